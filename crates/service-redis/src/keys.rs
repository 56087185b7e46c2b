//! Key names, the scripts, and the markers the bus writes into streams.

use std::sync::LazyLock;

use redis::Script;
use service_engine::bus::{EventId, Topic};

/// The marker closing a topic: subscribers end at it.
pub(crate) const CLOSED: &str = "__bus_closed";

/// Appends one entry to `stream` with its number in the topic (`n`, counted in
/// `meta`; `closed` is set there once a marker ended the topic). Redis gives the entry
/// its id (`<ms>-<seq>`, always increasing). Renews both keys' expiry to `ttl` for
/// markers and every 64th frame (the expiry is an idle bound of hours, not a precise
/// one), and announces `<origin> <stream key>` on `channel` when another instance
/// follows the topic (`watch`: followers per instance; an instance wakes its own
/// subscribers itself, once it has the frame to hand them). Answers `{id, n}`.
const APPEND_FUNCTION: &str = r"
local function append(stream, meta, watch, event, data, maxlen, ttl, marker, channel, origin)
  local n = redis.call('HINCRBY', meta, 'n', 1)
  local id
  if maxlen > 0 then
    id = redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'e', event, 'd', data, 'n', n)
  else
    id = redis.call('XADD', stream, '*', 'e', event, 'd', data, 'n', n)
  end
  if marker == '1' then
    redis.call('HSET', meta, 'closed', 1)
  end
  if marker == '1' or n % 64 == 1 then
    redis.call('PEXPIRE', stream, ttl)
    redis.call('PEXPIRE', meta, ttl)
  end
  local followers = redis.call('HGETALL', watch)
  for i = 1, #followers, 2 do
    if followers[i] ~= origin and tonumber(followers[i + 1]) > 0 then
      redis.call('PUBLISH', channel, origin .. ' ' .. stream)
      break
    end
  end
  return {id, n}
end
";

/// Appends one entry. KEYS: the stream, its meta hash, its watch hash. ARGV: event,
/// data, max length (0: no trim), expiry in ms, `1` for a marker, channel, origin.
pub(crate) static APPEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{APPEND_FUNCTION}
return append(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7])"
    ))
});

/// Appends a run's frame, and the same to its thread's stream when the thread's topic
/// is open. KEYS: the run's stream, meta and watch, the thread's. ARGV: as [`APPEND`]
/// without the marker flag. Answers the run entry's `{id, n}`.
pub(crate) static APPEND_RUN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{APPEND_FUNCTION}
local appended = append(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], '0', ARGV[5], ARGV[6])
if redis.call('EXISTS', KEYS[5]) == 1 then
  append(KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], '0', ARGV[5], ARGV[6])
end
return appended"
    ))
});

/// Appends frames of one run, in order, each also to its thread's stream when the
/// thread's topic is open. KEYS: as [`APPEND_RUN`]. ARGV: max length, expiry in ms,
/// channel, origin, then per frame its event and data. Answers each run entry's
/// `{id, n}`.
pub(crate) static APPEND_RUN_FRAMES: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{APPEND_FUNCTION}
local maxlen, ttl, channel, origin = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local followed = redis.call('EXISTS', KEYS[5]) == 1
local appended = {{}}
for a = 5, #ARGV, 2 do
  appended[#appended + 1] = append(KEYS[1], KEYS[2], KEYS[3], ARGV[a], ARGV[a + 1], maxlen, ttl, '0', channel, origin)
  if followed then
    append(KEYS[4], KEYS[5], KEYS[6], ARGV[a], ARGV[a + 1], maxlen, ttl, '0', channel, origin)
  end
end
return appended"
    ))
});

/// Where a subscription starts: the topic's frame count, whether it is closed, and its
/// newest entry's id (empty when it has none); nil for an unknown topic. KEYS: the
/// meta hash, the stream.
pub(crate) static HEAD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local head = redis.call('HMGET', KEYS[1], 'n', 'closed')
if not head[1] then
  return false
end
local newest = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local id = ''
if #newest > 0 then
  id = newest[1][1]
end
return {head[1], head[2] or '', id}
",
    )
});

/// Forgets a topic: its stream and meta hash go, and the stream's key is announced so
/// subscribers anywhere wake, find it gone and end. KEYS: the stream, its meta hash.
/// ARGV: channel, origin.
pub(crate) static DISCARD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[1], ARGV[2] .. ' ' .. KEYS[1])
return 0
",
    )
});

/// Opens a topic: its meta hash with no frames, unless it exists. KEYS: the meta
/// hash. ARGV: expiry in ms.
pub(crate) static OPEN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HSETNX', KEYS[1], 'n', 0) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 0
",
    )
});

/// The names of one deployment's keys.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
    channel: String,
    cancels: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            channel: format!("{prefix}:frames"),
            cancels: format!("{prefix}:cancels"),
        }
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The stream of a topic.
    pub(crate) fn stream(&self, topic: Topic) -> String {
        match topic {
            Topic::Run(id) => format!("{}:run:{id}", self.prefix),
            Topic::Thread(id) => format!("{}:thread:{id}", self.prefix),
        }
    }

    /// The meta hash of a topic: it exists while the topic does.
    pub(crate) fn meta(&self, topic: Topic) -> String {
        format!("{}:meta", self.stream(topic))
    }

    /// The watch hash of a topic: per instance, how many of its subscriptions follow it.
    pub(crate) fn watch(&self, topic: Topic) -> String {
        format!("{}:watch", self.stream(topic))
    }

    /// The channel announcing appended frames (the payload is the stream's key).
    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    /// The channel announcing recorded cancels (the payload is the run id).
    pub(crate) fn cancels(&self) -> &str {
        &self.cancels
    }
}

/// An entry id `<ms>-<seq>` as an event id.
pub(crate) fn event_id(text: &str) -> Option<EventId> {
    let (millis, seq) = text.split_once('-')?;
    Some(EventId {
        millis: millis.parse().ok()?,
        seq: seq.parse().ok()?,
    })
}

/// The exclusive start of a range after `id`.
pub(crate) fn after(id: EventId) -> String {
    format!("({}-{}", id.millis, id.seq)
}

pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_read_as_event_ids() {
        assert_eq!(
            event_id("1795296141278-3"),
            Some(EventId {
                millis: 1_795_296_141_278,
                seq: 3
            })
        );
        assert_eq!(event_id("nope"), None);
        let id = EventId {
            millis: 5,
            seq: u64::MAX,
        };
        assert_eq!(after(id), "(5-18446744073709551615");
    }
}
