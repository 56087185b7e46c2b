//! Key names, the scripts, and the markers the bus writes into streams.

use std::sync::LazyLock;

use redis::Script;
use service_engine::bus::{EventId, Topic};

/// The marker closing a topic: subscribers end at it.
pub(crate) const CLOSED: &str = "__bus_closed";
/// The marker of a discarded topic: subscribers end at it.
pub(crate) const DISCARDED: &str = "__bus_discarded";

/// Appends one entry. KEYS: the stream, its meta hash (`n` frames so far, `ms` of the
/// last). ARGV: event, data, max length (0: no trim), expiry in ms, channel. Numbers
/// the entry, gives it the id `<ms>-<n>` (`ms` never below the last entry's, so ids
/// increase even if the clock steps back), renews both keys' expiry, announces the
/// stream's key on the channel. Answers the id.
pub(crate) static APPEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local n = redis.call('HINCRBY', KEYS[2], 'n', 1)
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = tonumber(redis.call('HGET', KEYS[2], 'ms') or '0')
if ms < last then ms = last end
redis.call('HSET', KEYS[2], 'ms', ms)
local id = string.format('%d-%d', ms, n)
if tonumber(ARGV[3]) > 0 then
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], id, 'e', ARGV[1], 'd', ARGV[2])
else
  redis.call('XADD', KEYS[1], id, 'e', ARGV[1], 'd', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PUBLISH', ARGV[5], KEYS[1])
return id
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
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            channel: format!("{prefix}:frames"),
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

    /// The channel announcing appended frames (the payload is the stream's key).
    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }
}

/// An entry id `<ms>-<n>` as an event id.
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
