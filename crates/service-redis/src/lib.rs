//! The Redis stream bus: every run's and thread's frames in a Redis stream, so a client
//! reaches them through any instance and replays them after `Last-Event-ID` from any
//! instance.
//!
//! - A frame is appended by one script call that numbers it within its topic (`n`,
//!   kept in the entry: a subscriber that finds a number missing knows frames were
//!   trimmed before it read them, and is told it lagged instead of getting a silent
//!   gap), appends it (Redis gives the id, `<ms>-<seq>`), renews the topic's expiry
//!   now and then, and announces it on one pub/sub channel when another instance
//!   follows the topic.
//! - A subscriber takes the frames its own instance appends from memory, and reads
//!   its stream with `XRANGE` from its own position, at most `batch` frames at a time
//!   (a slow client holds no more than that in this process; the rest waits in Redis),
//!   for the replay, for frames another instance announced (one listening connection
//!   per instance), or after `poll` should an announcement be lost.
//! - Closing a topic appends a marker (subscribers end at it) and shortens its expiry
//!   to `retention`. Redis holds frames and nothing else: runs settle in the store.

mod cancels;
mod cursor;
mod keys;
mod listener;
mod retry;

pub use cancels::RedisCancels;
pub use retry::RedisRetryQueue;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use redis::aio::ConnectionManager;
use service_engine::bus::{EventId, Frame, Replay, StreamBus, Subscription, Topic};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::cursor::{Cursor, Start};
use crate::keys::Keys;

/// How the Redis bus is reached and bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisBusOptions {
    /// `redis://host:port/db`.
    pub url: String,
    /// Prefix of every key and of the channel, so deployments can share a Redis.
    pub prefix: String,
    /// Approximate cap on a topic's stream (SERVICE_QUEUE_STREAM_MAXLEN); 0 trims
    /// nothing, the expiry alone bounds it.
    pub max_len: u64,
    /// Frames a subscriber reads ahead (SERVICE_STREAM_BUFFER_FRAMES).
    pub batch: usize,
    /// How long a closed topic stays replayable.
    pub retention: Duration,
    /// How long a topic lives after its last frame when nobody closes it (a thread's,
    /// or a run's whose instance died).
    pub idle_ttl: Duration,
    /// The longest a subscriber waits without an announcement before it looks again.
    pub poll: Duration,
}

impl RedisBusOptions {
    /// The defaults for `url`: SPEC's caps (10,000 frames, 512 read ahead), ten
    /// minutes of retention, a day of idleness, a look every second.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "service".into(),
            max_len: 10_000,
            batch: 512,
            retention: Duration::from_secs(600),
            idle_ttl: Duration::from_secs(24 * 3600),
            poll: Duration::from_secs(1),
        }
    }
}

/// Why the bus could not start.
#[derive(Debug, thiserror::Error)]
pub enum RedisBusError {
    /// The URL does not parse.
    #[error("invalid Redis URL {url:?}: {source}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// Why.
        source: redis::RedisError,
    },
    /// Redis did not answer.
    #[error("cannot reach Redis at {url}: {source}")]
    Unreachable {
        /// The URL given.
        url: String,
        /// Why.
        source: redis::RedisError,
    },
}

/// The Redis [`StreamBus`].
pub struct RedisBus {
    shared: Arc<Shared>,
    listener: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBus")
            .field("prefix", &self.shared.keys.prefix())
            .finish_non_exhaustive()
    }
}

impl Drop for RedisBus {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// What the bus, its cursors and its listener share.
pub(crate) struct Shared {
    pub(crate) options: RedisBusOptions,
    pub(crate) keys: Keys,
    pub(crate) connection: ConnectionManager,
    /// A second connection for runs' batches of frames, so a single frame (a run's
    /// first, a marker) and the subscribers' reads are not queued behind them.
    batches: ConnectionManager,
    /// This bus's name in announcements, so it skips its own (it wakes its
    /// subscribers itself, with the frame in hand).
    pub(crate) origin: String,
    /// Per stream key with subscribers here: their wake-up and recent local frames.
    locals: Mutex<HashMap<String, Weak<Local>>>,
    /// Set by `close_all`: every subscription ends, and new ones start ended.
    pub(crate) closed_all: AtomicBool,
    /// Woken by `close_all`.
    pub(crate) closing: Notify,
    /// Cancels announced on the cancels channel, by any instance.
    pub(crate) cancels: tokio::sync::broadcast::Sender<Uuid>,
}

/// Frames of a topic this instance appended lately, kept for its subscribers here.
const RECENT_FRAMES: usize = 256;

/// What this instance's subscribers of one topic share: their wake-up, and the frames
/// this instance appended lately (by number), so a subscriber that keeps up takes them
/// from here instead of reading them back from Redis.
#[derive(Default)]
pub(crate) struct Local {
    pub(crate) announced: Notify,
    /// This instance's count in the topic's watch hash, taken back when dropped.
    following: std::sync::OnceLock<Following>,
    recent: Mutex<VecDeque<(u64, Frame)>>,
    /// Counts wake-ups for frames not in `recent` (another instance's, a thread entry
    /// appended with a run's): a subscriber that saw it move reads Redis.
    pub(crate) unread: AtomicU64,
}

impl Local {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, Frame)>> {
        // Each update is one insert or pop: a panic cannot leave it half-done.
        self.recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps `frame`, number `n`, in number order (appends on this instance may finish
    /// out of order).
    fn remember(&self, n: u64, frame: Frame) {
        let mut recent = self.lock();
        let at = recent.partition_point(|(kept, _)| *kept < n);
        recent.insert(at, (n, frame));
        if recent.len() > RECENT_FRAMES {
            recent.pop_front();
        }
    }

    /// The consecutive frames from number `n` this instance appended lately, with the
    /// number of the last; and whether it has later ones while `n` itself is not kept
    /// (evicted, or appended by another instance in between), so the reader must go to
    /// Redis.
    pub(crate) fn frames_from(&self, n: u64) -> (Vec<Frame>, u64, bool) {
        let recent = self.lock();
        let at = recent.partition_point(|(kept, _)| *kept < n);
        let mut frames = Vec::new();
        for (expected, (kept, frame)) in (n..).zip(recent.range(at..)) {
            if *kept != expected {
                break;
            }
            frames.push(frame.clone());
        }
        let behind = frames.is_empty() && recent.back().is_some_and(|(last, _)| *last > n);
        let next = n + frames.len() as u64;
        (frames, next, behind)
    }
}

/// This instance counted among a topic's followers, so other instances announce its
/// frames; uncounted when the topic's last subscription here ends.
struct Following {
    connection: ConnectionManager,
    watch: String,
    origin: String,
}

impl Drop for Following {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut connection = self.connection.clone();
        let (watch, origin) = (
            std::mem::take(&mut self.watch),
            std::mem::take(&mut self.origin),
        );
        // Counts, not membership: a follow and an unfollow of this instance commute.
        runtime.spawn(async move {
            let _: redis::RedisResult<i64> = redis::cmd("HINCRBY")
                .arg(&watch)
                .arg(&origin)
                .arg(-1)
                .query_async(&mut connection)
                .await;
        });
    }
}

impl Shared {
    /// The local state of `topic`'s stream, counted among the topic's followers so
    /// other instances announce their frames of it; before the subscription's first
    /// read, so no frame appended after that read goes unannounced.
    pub(crate) async fn follow(&self, topic: Topic) -> Arc<Local> {
        let local = self.local(&self.keys.stream(topic));
        if local.following.get().is_none() {
            let watch = self.keys.watch(topic);
            let counted: redis::RedisResult<()> = redis::pipe()
                .cmd("HINCRBY")
                .arg(&watch)
                .arg(&self.origin)
                .arg(1)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&watch)
                .arg(self.options.idle_ttl.as_millis() as u64)
                .ignore()
                .query_async(&mut self.connection.clone())
                .await;
            match counted {
                Ok(()) => {
                    let following = Following {
                        connection: self.connection.clone(),
                        watch,
                        origin: self.origin.clone(),
                    };
                    // Two subscriptions racing here both counted: the second takes its count back.
                    let _ = local.following.set(following);
                }
                // Other instances' frames then reach this subscriber at its poll interval.
                Err(error) => tracing::warn!(%error, ?topic, "following a topic on Redis failed"),
            }
        }
        local
    }

    /// The local state of `key`, made when it has none.
    pub(crate) fn local(&self, key: &str) -> Arc<Local> {
        let mut locals = self.lock_locals();
        if let Some(local) = locals.get(key).and_then(Weak::upgrade) {
            return local;
        }
        // Forgotten subscriptions leave dead entries behind; clear them as the map grows.
        if locals.len() >= 1024 && locals.len().is_power_of_two() {
            locals.retain(|_, local| local.strong_count() > 0);
        }
        let local = Arc::new(Local::default());
        locals.insert(key.to_owned(), Arc::downgrade(&local));
        local
    }

    /// Wakes the subscribers of `key` here, after remembering `frame` for them.
    pub(crate) fn wake(&self, key: &str, frame: Option<(u64, Frame)>) {
        let local = self.lock_locals().get(key).and_then(Weak::upgrade);
        if let Some(local) = local {
            match frame {
                Some((n, frame)) => local.remember(n, frame),
                None => {
                    local.unread.fetch_add(1, Ordering::SeqCst);
                }
            }
            local.announced.notify_waiters();
        }
    }

    /// Wakes every subscriber (after the listener reconnects: announcements may have
    /// been missed meanwhile).
    pub(crate) fn wake_all(&self) {
        let locals: Vec<Arc<Local>> = self
            .lock_locals()
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for local in locals {
            local.unread.fetch_add(1, Ordering::SeqCst);
            local.announced.notify_waiters();
        }
    }

    fn lock_locals(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<Local>>> {
        // Each update is one insert, lookup or retain: a panic cannot leave it half-done.
        self.locals
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends a frame (or a marker) to `topic`, renews its expiry to `ttl`, announces
    /// it; its id.
    async fn append(
        &self,
        topic: Topic,
        event: &str,
        data: Bytes,
        ttl: Duration,
        marker: bool,
    ) -> redis::RedisResult<EventId> {
        let (stream, meta) = (self.keys.stream(topic), self.keys.meta(topic));
        let (id, n): (String, u64) = keys::APPEND
            .key(&stream)
            .key(&meta)
            .key(self.keys.watch(topic))
            .arg(event)
            .arg(data.as_ref())
            .arg(self.options.max_len)
            .arg(ttl.as_millis() as u64)
            .arg(if marker { "1" } else { "0" })
            .arg(self.keys.channel())
            .arg(&self.origin)
            .invoke_async(&mut self.connection.clone())
            .await?;
        let id = parsed(id)?;
        let frame = (!marker).then(|| {
            let frame = Frame {
                id,
                event: event.to_owned(),
                data,
            };
            (n, frame)
        });
        self.wake(&stream, frame);
        Ok(id)
    }

    /// [`StreamBus::publish_run`] in one script call.
    async fn append_run(
        &self,
        run: Uuid,
        thread: Uuid,
        event: &str,
        data: Bytes,
    ) -> redis::RedisResult<EventId> {
        let (run, thread) = (Topic::Run(run), Topic::Thread(thread));
        let (run_stream, thread_stream) = (self.keys.stream(run), self.keys.stream(thread));
        let (id, n): (String, u64) = keys::APPEND_RUN
            .key(&run_stream)
            .key(self.keys.meta(run))
            .key(self.keys.watch(run))
            .key(&thread_stream)
            .key(self.keys.meta(thread))
            .key(self.keys.watch(thread))
            .arg(event)
            .arg(data.as_ref())
            .arg(self.options.max_len)
            .arg(self.options.idle_ttl.as_millis() as u64)
            .arg(self.keys.channel())
            .arg(&self.origin)
            .invoke_async(&mut self.connection.clone())
            .await?;
        let id = parsed(id)?;
        let frame = Frame {
            id,
            event: event.to_owned(),
            data,
        };
        self.wake(&run_stream, Some((n, frame)));
        // The thread entry's number is not known here: its subscribers read it back.
        self.wake(&thread_stream, None);
        Ok(id)
    }
}

impl Shared {
    /// [`StreamBus::publish_run_frames`] in one script call.
    async fn append_run_frames(
        &self,
        run: Uuid,
        thread: Uuid,
        frames: Vec<(String, Bytes)>,
    ) -> redis::RedisResult<()> {
        let (run, thread) = (Topic::Run(run), Topic::Thread(thread));
        let (run_stream, thread_stream) = (self.keys.stream(run), self.keys.stream(thread));
        let mut call = keys::APPEND_RUN_FRAMES.prepare_invoke();
        call.key(&run_stream)
            .key(self.keys.meta(run))
            .key(self.keys.watch(run))
            .key(&thread_stream)
            .key(self.keys.meta(thread))
            .key(self.keys.watch(thread))
            .arg(self.options.max_len)
            .arg(self.options.idle_ttl.as_millis() as u64)
            .arg(self.keys.channel())
            .arg(&self.origin);
        for (event, data) in &frames {
            call.arg(event).arg(data.as_ref());
        }
        let appended: Vec<(String, u64)> = call.invoke_async(&mut self.batches.clone()).await?;
        for ((event, data), (id, n)) in frames.into_iter().zip(appended) {
            let frame = Frame {
                id: parsed(id)?,
                event,
                data,
            };
            self.wake(&run_stream, Some((n, frame)));
        }
        // The thread entries' numbers are not known here: its subscribers read them back.
        self.wake(&thread_stream, None);
        Ok(())
    }
}

impl RedisBus {
    /// Connects (failing when Redis does not answer) and starts listening for other
    /// instances' announcements.
    pub async fn connect(options: RedisBusOptions) -> Result<Arc<Self>, RedisBusError> {
        let shown = without_password(&options.url);
        let client = redis::Client::open(options.url.as_str()).map_err(|source| {
            RedisBusError::InvalidUrl {
                url: shown.clone(),
                source,
            }
        })?;
        let unreachable = |source| RedisBusError::Unreachable {
            url: shown.clone(),
            source,
        };
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let mut connection = client
            .get_connection_manager_with_config(config.clone())
            .await
            .map_err(unreachable)?;
        let batches = client
            .get_connection_manager_with_config(config)
            .await
            .map_err(unreachable)?;
        let _: String = redis::cmd("PING")
            .query_async(&mut connection)
            .await
            .map_err(unreachable)?;
        let shared = Arc::new(Shared {
            keys: Keys::new(&options.prefix),
            origin: Uuid::new_v4().simple().to_string(),
            options,
            connection,
            batches,
            locals: Mutex::new(HashMap::new()),
            closed_all: AtomicBool::new(false),
            closing: Notify::new(),
            cancels: tokio::sync::broadcast::channel(1024).0,
        });
        let listener = tokio::spawn(listener::listen(client, Arc::downgrade(&shared)));
        Ok(Arc::new(Self { shared, listener }))
    }

    async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> redis::RedisResult<T> {
        command
            .query_async(&mut self.shared.connection.clone())
            .await
    }
}

/// An entry id Redis answered.
fn parsed(id: String) -> redis::RedisResult<EventId> {
    keys::event_id(&id).ok_or_else(|| {
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "Redis answered an entry id that is not <ms>-<seq>",
            id,
        ))
    })
}

/// `url` as it may be logged: without the credentials of its authority.
fn without_password(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            format!("{scheme}://{host}")
        }
        None => "(unparsable URL)".into(),
    }
}

#[async_trait]
impl StreamBus for RedisBus {
    async fn open(&self, topic: Topic) {
        let meta = self.shared.keys.meta(topic);
        let ttl = self.shared.options.idle_ttl.as_millis() as u64;
        let opened: redis::RedisResult<()> = keys::OPEN
            .key(&meta)
            .arg(ttl)
            .invoke_async(&mut self.shared.connection.clone())
            .await;
        if let Err(error) = opened {
            tracing::error!(%error, ?topic, "opening a topic on Redis failed");
        }
    }

    async fn publish(&self, topic: Topic, event: &str, data: Bytes) -> EventId {
        let ttl = self.shared.options.idle_ttl;
        match self.shared.append(topic, event, data, ttl, false).await {
            Ok(id) => id,
            Err(error) => {
                // The frame is lost; the run goes on and settles in the store, and its
                // waiters fall back to the stored result.
                tracing::error!(%error, ?topic, event, "publishing a frame to Redis failed");
                EventId {
                    millis: keys::now_millis(),
                    seq: 0,
                }
            }
        }
    }

    async fn publish_run(&self, run: Uuid, thread: Uuid, event: &str, data: Bytes) -> EventId {
        match self.shared.append_run(run, thread, event, data).await {
            Ok(id) => id,
            Err(error) => {
                tracing::error!(%error, %run, event, "publishing a frame to Redis failed");
                EventId {
                    millis: keys::now_millis(),
                    seq: 0,
                }
            }
        }
    }

    async fn publish_run_frames(&self, run: Uuid, thread: Uuid, frames: Vec<(String, Bytes)>) {
        let count = frames.len();
        if let Err(error) = self.shared.append_run_frames(run, thread, frames).await {
            tracing::error!(%error, %run, count, "publishing frames to Redis failed");
        }
    }

    async fn close(&self, topic: Topic) {
        let retention = self.shared.options.retention;
        if let Err(error) = self
            .shared
            .append(topic, keys::CLOSED, Bytes::new(), retention, true)
            .await
        {
            tracing::error!(%error, ?topic, "closing a topic on Redis failed");
        }
    }

    async fn subscribe(&self, topic: Topic, replay: Replay) -> Option<Subscription> {
        let head: redis::RedisResult<Option<(u64, String, String)>> = keys::HEAD
            .key(self.shared.keys.meta(topic))
            .key(self.shared.keys.stream(topic))
            .invoke_async(&mut self.shared.connection.clone())
            .await;
        let (start, closed) = match head {
            Ok(None) => return None,
            Ok(Some((n, closed, newest))) => {
                let start = match replay {
                    Replay::All => Start::Beginning,
                    Replay::After(id) => Start::After(id),
                    Replay::Live => Start::Live {
                        after: keys::event_id(&newest),
                        next: n + 1,
                    },
                };
                (start, !closed.is_empty())
            }
            Err(error) => {
                tracing::error!(%error, ?topic, "subscribing on Redis failed");
                return None;
            }
        };
        let local = self.shared.follow(topic).await;
        let cursor = Cursor::new(self.shared.clone(), local, topic, start, closed);
        Some(
            futures::stream::unfold(cursor, |mut cursor| async move {
                cursor.next().await.map(|delivery| (delivery, cursor))
            })
            .boxed(),
        )
    }

    async fn is_open(&self, topic: Topic) -> bool {
        let meta = self.shared.keys.meta(topic);
        self.query::<bool>(redis::cmd("EXISTS").arg(&meta))
            .await
            .unwrap_or(false)
    }

    async fn discard(&self, topic: Topic) {
        let stream = self.shared.keys.stream(topic);
        let discarded: redis::RedisResult<()> = keys::DISCARD
            .key(&stream)
            .key(self.shared.keys.meta(topic))
            .arg(self.shared.keys.channel())
            .arg(&self.shared.origin)
            .invoke_async(&mut self.shared.connection.clone())
            .await;
        if let Err(error) = discarded {
            tracing::error!(%error, ?topic, "discarding a topic on Redis failed");
        }
        self.shared.wake(&stream, None);
    }

    async fn close_all(&self) {
        self.shared.closed_all.store(true, Ordering::SeqCst);
        self.shared.closing.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn logged_urls_carry_no_password() {
        assert_eq!(
            super::without_password("redis://user:secret@cache:6379/2"),
            "redis://cache:6379/2"
        );
        assert_eq!(super::without_password("redis://cache"), "redis://cache");
    }
}
