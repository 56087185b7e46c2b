//! The stream bus: every frame a run publishes, buffered for replay and fanned out to
//! live subscribers (SSE streams, joins, waits).
//!
//! A topic is a run (its own stream) or a thread (every run on it, plus state
//! updates). Frames carry ids that increase strictly within a topic, so a client that
//! reconnects with `Last-Event-ID` gets exactly the frames after the one it saw.

mod memory;

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use uuid::Uuid;

pub use memory::{MemoryBus, MemoryBusLimits};

/// What a topic is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    /// One run's frames.
    Run(Uuid),
    /// Every frame of every run on a thread, plus run-done markers and state updates.
    Thread(Uuid),
}

/// A frame's position in its topic: publish time in milliseconds (never decreasing
/// within a topic) and a sequence number (strictly increasing within a topic).
/// Written as `<ms>-<seq>`, the shape the reference server and Redis streams use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    /// Milliseconds since the Unix epoch.
    pub millis: i64,
    /// Position in the topic.
    pub seq: u64,
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.millis, self.seq)
    }
}

/// Where a subscription starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// Only frames published from now on.
    Live,
    /// Every buffered frame, then live ones (`Last-Event-ID: -1` or `-`).
    All,
    /// Buffered frames after this id, then live ones.
    After(EventId),
}

impl Replay {
    /// Reads a `Last-Event-ID` header: `-1` and `-` mean from the start; `<ms>-<seq>`
    /// and `<ms>` resume after that point; anything else is `None` (a bad header).
    pub fn from_last_event_id(header: Option<&str>) -> Option<Self> {
        let Some(text) = header.map(str::trim) else {
            return Some(Self::Live);
        };
        if text.is_empty() {
            return Some(Self::Live);
        }
        if text == "-1" || text == "-" || text == "0" {
            return Some(Self::All);
        }
        let (millis, seq) = match text.split_once('-') {
            Some((millis, "*")) => (millis.parse().ok()?, u64::MAX),
            Some((millis, seq)) => (millis.parse().ok()?, seq.parse().ok()?),
            None => (text.parse().ok()?, u64::MAX),
        };
        Some(Self::After(EventId { millis, seq }))
    }
}

/// One published frame: an SSE event name and its JSON data, serialized once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Position in the topic.
    pub id: EventId,
    /// SSE event name (`values`, `updates|child:…`, `error`, …).
    pub event: String,
    /// One-line JSON text.
    pub data: Bytes,
}

impl Frame {
    /// Event names starting with this prefix are internal records (e.g. a run's
    /// outcome) that travel with the topic but are never written to clients.
    pub const INTERNAL_PREFIX: &'static str = "__";

    /// True for internal records.
    pub fn is_internal(&self) -> bool {
        self.event.starts_with(Self::INTERNAL_PREFIX)
    }
}

/// What a subscription yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The next frame.
    Frame(Frame),
    /// The subscriber fell behind the bus bound and was dropped; the connection must be
    /// aborted so the client reconnects with `Last-Event-ID`.
    Lagged,
    /// The bus cannot be read any more (a durable bus lost its backend): the client
    /// is told so with an `error` frame and may reconnect with `Last-Event-ID` once
    /// the bus is back; the run itself goes on and settles in the store.
    Unavailable,
}

/// A subscription: replayed frames, then live ones, ending when the topic closes.
pub type Subscription = BoxStream<'static, Delivery>;

/// What a caller reads in place of a subscription the bus could not make (a durable
/// bus whose backend is down): told so, instead of a stream that ends in silence.
pub(crate) fn unavailable() -> Subscription {
    futures::StreamExt::boxed(futures::stream::iter([Delivery::Unavailable]))
}

/// The stream bus seam: in memory here; a durable one can replace it.
#[async_trait]
pub trait StreamBus: Send + Sync + fmt::Debug {
    /// Makes sure the topic exists so subscribers may wait on it before its first frame.
    async fn open(&self, topic: Topic);

    /// Appends a frame and fans it out; returns its id.
    async fn publish(&self, topic: Topic, event: &str, data: Bytes) -> EventId;

    /// Appends a run's frame, and the same frame to its thread's topic when that one is
    /// open (someone follows the thread); the run topic's id. A bus reaching its
    /// backend over the network does both in one round trip.
    async fn publish_run(&self, run: Uuid, thread: Uuid, event: &str, data: Bytes) -> EventId {
        let id = self.publish(Topic::Run(run), event, data.clone()).await;
        let topic = Topic::Thread(thread);
        if self.is_open(topic).await {
            self.publish(topic, event, data).await;
        }
        id
    }

    /// Appends several frames of a run, in order, as [`StreamBus::publish_run`] does
    /// each: the frames of the chunks a graph had ready at once. A bus reaching its
    /// backend over the network appends them in one round trip.
    async fn publish_run_frames(&self, run: Uuid, thread: Uuid, frames: Vec<(String, Bytes)>) {
        for (event, data) in frames {
            self.publish_run(run, thread, &event, data).await;
        }
    }

    /// Marks the topic finished: subscribers drain what is buffered and end; the
    /// frames stay replayable within the retention bound.
    async fn close(&self, topic: Topic);

    /// Subscribes; `None` when the topic is unknown (never opened, or evicted).
    async fn subscribe(&self, topic: Topic, replay: Replay) -> Option<Subscription>;

    /// True when the topic exists (opened or published to, and not evicted).
    async fn is_open(&self, topic: Topic) -> bool;

    /// Forgets a topic at once (its run or thread was deleted); subscribers end.
    async fn discard(&self, topic: Topic);

    /// Closes every topic: subscribers drain what is buffered and end. The engine's
    /// shutdown calls it once its runs are settled, so no stream (a thread's never
    /// ends by itself) holds the process past its shutdown budget.
    async fn close_all(&self);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_event_id_forms() {
        assert_eq!(Replay::from_last_event_id(None), Some(Replay::Live));
        assert_eq!(Replay::from_last_event_id(Some("-1")), Some(Replay::All));
        assert_eq!(Replay::from_last_event_id(Some("-")), Some(Replay::All));
        assert_eq!(
            Replay::from_last_event_id(Some("1795296141278-3")),
            Some(Replay::After(EventId {
                millis: 1_795_296_141_278,
                seq: 3
            }))
        );
        assert_eq!(Replay::from_last_event_id(Some("garbage")), None);
    }
}
