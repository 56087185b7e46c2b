//! The in-memory stream bus: bounded per-topic buffers and bounded retention of
//! finished topics. Subscribers read a topic's buffer directly, each at its own
//! position, so no subscriber has a queue of its own and a slow one never holds the
//! publisher back; one whose next frame aged out of the buffer is told it lagged.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::Notify;

use super::{Delivery, EventId, Frame, Replay, StreamBus, Subscription, Topic};

/// Bounds of the in-memory bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBusLimits {
    /// Frames one topic buffers (SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN); older frames
    /// age out and cannot be replayed.
    pub max_frames_per_topic: usize,
    /// Finished topics kept replayable (SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS).
    pub max_retained_topics: usize,
    /// Bytes the finished topics kept replayable may hold together
    /// (SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES): a few runs with large inputs would
    /// otherwise pin hundreds of MB within the topic count.
    pub max_retained_bytes: usize,
}

impl Default for MemoryBusLimits {
    fn default() -> Self {
        Self {
            max_frames_per_topic: 10_000,
            max_retained_topics: 50,
            max_retained_bytes: 64 * 1024 * 1024,
        }
    }
}

/// The in-memory [`StreamBus`].
#[derive(Debug)]
pub struct MemoryBus {
    limits: MemoryBusLimits,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    topics: HashMap<Topic, Arc<TopicShared>>,
    /// Closed topics with their bytes, oldest first; evicted beyond the retention
    /// bounds.
    finished: VecDeque<(Topic, usize)>,
    /// The bytes of `finished`, together.
    finished_bytes: usize,
}

impl State {
    /// Forgets the oldest finished topics until both retention bounds hold.
    fn evict_beyond(&mut self, limits: &MemoryBusLimits) {
        while self.finished.len() > limits.max_retained_topics
            || self.finished_bytes > limits.max_retained_bytes
        {
            let Some((evicted, bytes)) = self.finished.pop_front() else {
                return;
            };
            self.finished_bytes -= bytes;
            self.topics.remove(&evicted);
        }
    }
}

/// One topic, shared with its subscribers so that they can finish reading it after it
/// is evicted.
#[derive(Debug, Default)]
struct TopicShared {
    buffer: Mutex<Buffer>,
    /// Woken on every publish and on close.
    changed: Notify,
}

#[derive(Debug, Default)]
struct Buffer {
    /// Consecutive sequence numbers, oldest first.
    frames: VecDeque<Frame>,
    last_id: Option<EventId>,
    closed: bool,
}

impl Buffer {
    /// The sequence number the next published frame gets.
    fn next_seq(&self) -> u64 {
        self.last_id.map_or(0, |last| last.seq + 1)
    }

    /// What the buffered frames hold: their event names and data.
    fn bytes(&self) -> usize {
        self.frames
            .iter()
            .map(|frame| frame.event.len() + frame.data.len())
            .sum()
    }
}

impl TopicShared {
    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // Every update under this lock is a single push, pop or flag: a panic elsewhere
        // cannot leave it half-done.
        self.buffer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks the topic closed and wakes its subscribers; its bytes when it was open,
    /// `None` when it already was closed.
    fn close(&self) -> Option<usize> {
        let closing = {
            let mut buffer = self.lock();
            let was_closed = std::mem::replace(&mut buffer.closed, true);
            (!was_closed).then(|| buffer.bytes())
        };
        self.changed.notify_waiters();
        closing
    }
}

impl MemoryBus {
    /// A bus with these bounds.
    pub fn new(limits: MemoryBusLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the maps half-updated in a way
        // later calls would misread, so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn topic(&self, topic: Topic) -> Arc<TopicShared> {
        self.lock().topics.entry(topic).or_default().clone()
    }
}

/// A subscriber's position in a topic.
struct Cursor {
    topic: Arc<TopicShared>,
    /// Sequence number of the next frame this subscriber needs.
    next_seq: u64,
    /// Told it lagged: nothing follows.
    ended: bool,
}

impl Cursor {
    async fn next(&mut self) -> Option<Delivery> {
        while !self.ended {
            let changed = self.topic.changed.notified();
            tokio::pin!(changed);
            // Registered before looking, so a frame published in between still wakes us.
            changed.as_mut().enable();
            {
                let buffer = self.topic.lock();
                if let Some(oldest) = buffer.frames.front() {
                    if self.next_seq < oldest.id.seq {
                        self.ended = true;
                        return Some(Delivery::Lagged);
                    }
                    let index = (self.next_seq - oldest.id.seq) as usize;
                    if let Some(frame) = buffer.frames.get(index) {
                        self.next_seq += 1;
                        return Some(Delivery::Frame(frame.clone()));
                    }
                }
                if buffer.closed {
                    return None;
                }
            }
            changed.await;
        }
        None
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as i64)
        .unwrap_or(0)
}

#[async_trait]
impl StreamBus for MemoryBus {
    async fn open(&self, topic: Topic) {
        self.topic(topic);
    }

    async fn publish(&self, topic: Topic, event: &str, data: Bytes) -> EventId {
        let max_frames = self.limits.max_frames_per_topic.max(1);
        let shared = self.topic(topic);
        let id = {
            let mut buffer = shared.lock();
            let id = EventId {
                millis: buffer
                    .last_id
                    .map_or_else(now_millis, |last| now_millis().max(last.millis)),
                seq: buffer.next_seq(),
            };
            buffer.last_id = Some(id);
            if buffer.frames.len() == max_frames {
                buffer.frames.pop_front();
            }
            buffer.frames.push_back(Frame {
                id,
                event: event.to_owned(),
                data,
            });
            id
        };
        shared.changed.notify_waiters();
        id
    }

    async fn close(&self, topic: Topic) {
        let mut state = self.lock();
        let Some(bytes) = state.topics.entry(topic).or_default().close() else {
            return;
        };
        state.finished.push_back((topic, bytes));
        state.finished_bytes += bytes;
        state.evict_beyond(&self.limits);
    }

    async fn close_all(&self) {
        for topic in self.lock().topics.values() {
            topic.close();
        }
    }

    async fn subscribe(&self, topic: Topic, replay: Replay) -> Option<Subscription> {
        let topic = self.lock().topics.get(&topic)?.clone();
        let next_seq = {
            let buffer = topic.lock();
            match replay {
                Replay::Live => buffer.next_seq(),
                Replay::All => buffer
                    .frames
                    .front()
                    .map_or_else(|| buffer.next_seq(), |oldest| oldest.id.seq),
                Replay::After(after) => buffer
                    .frames
                    .iter()
                    .find(|frame| frame.id > after)
                    .map_or_else(|| buffer.next_seq(), |frame| frame.id.seq),
            }
        };
        let cursor = Cursor {
            topic,
            next_seq,
            ended: false,
        };
        Some(
            futures::stream::unfold(cursor, |mut cursor| async move {
                cursor.next().await.map(|delivery| (delivery, cursor))
            })
            .boxed(),
        )
    }

    async fn is_open(&self, topic: Topic) -> bool {
        self.lock().topics.contains_key(&topic)
    }

    async fn discard(&self, topic: Topic) {
        let removed = {
            let mut state = self.lock();
            let mut freed = 0;
            state.finished.retain(|(finished, bytes)| {
                let keep = *finished != topic;
                if !keep {
                    freed += bytes;
                }
                keep
            });
            state.finished_bytes -= freed;
            state.topics.remove(&topic)
        };
        // Subscribers still reading it end instead of waiting for frames that never come.
        if let Some(shared) = removed {
            shared.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn limits(max_frames: usize, retained: usize) -> MemoryBusLimits {
        MemoryBusLimits {
            max_frames_per_topic: max_frames,
            max_retained_topics: retained,
            ..MemoryBusLimits::default()
        }
    }

    async fn publish_n(bus: &MemoryBus, topic: Topic, n: usize) -> Vec<EventId> {
        let mut ids = Vec::new();
        for i in 0..n {
            ids.push(
                bus.publish(topic, "values", Bytes::from(i.to_string()))
                    .await,
            );
        }
        ids
    }

    async fn collect(subscription: Subscription) -> Vec<Delivery> {
        subscription.collect().await
    }

    fn data(deliveries: &[Delivery]) -> Vec<String> {
        deliveries
            .iter()
            .map(|delivery| match delivery {
                Delivery::Frame(frame) => String::from_utf8_lossy(&frame.data).into_owned(),
                Delivery::Lagged => "LAGGED".to_owned(),
                Delivery::Unavailable => "UNAVAILABLE".to_owned(),
            })
            .collect()
    }

    #[tokio::test]
    async fn ids_increase_strictly_within_a_topic() {
        let bus = MemoryBus::new(MemoryBusLimits::default());
        let ids = publish_n(&bus, Topic::Run(Uuid::now_v7()), 100).await;
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[tokio::test]
    async fn replay_after_an_id_returns_exactly_the_later_frames() {
        let bus = MemoryBus::new(MemoryBusLimits::default());
        let topic = Topic::Run(Uuid::now_v7());
        let ids = publish_n(&bus, topic, 5).await;
        bus.close(topic).await;
        let after = bus.subscribe(topic, Replay::After(ids[1])).await.unwrap();
        assert_eq!(data(&collect(after).await), ["2", "3", "4"]);
        let all = bus.subscribe(topic, Replay::All).await.unwrap();
        assert_eq!(collect(all).await.len(), 5);
    }

    #[tokio::test]
    async fn live_subscriber_sees_frames_after_joining_and_ends_on_close() {
        let bus = MemoryBus::new(MemoryBusLimits::default());
        let topic = Topic::Run(Uuid::now_v7());
        publish_n(&bus, topic, 2).await;
        let live = bus.subscribe(topic, Replay::Live).await.unwrap();
        bus.publish(topic, "values", Bytes::from_static(b"late"))
            .await;
        bus.close(topic).await;
        assert_eq!(data(&collect(live).await), ["late"]);
    }

    #[tokio::test]
    async fn replay_then_live_has_no_gap_and_no_duplicate() {
        let bus = MemoryBus::new(MemoryBusLimits::default());
        let topic = Topic::Run(Uuid::now_v7());
        publish_n(&bus, topic, 3).await;
        let subscription = bus.subscribe(topic, Replay::All).await.unwrap();
        bus.publish(topic, "values", Bytes::from_static(b"3")).await;
        bus.close(topic).await;
        assert_eq!(data(&collect(subscription).await), ["0", "1", "2", "3"]);
    }

    #[tokio::test]
    async fn buffer_keeps_only_the_newest_frames() {
        let bus = MemoryBus::new(limits(3, 50));
        let topic = Topic::Run(Uuid::now_v7());
        publish_n(&bus, topic, 10).await;
        bus.close(topic).await;
        let all = bus.subscribe(topic, Replay::All).await.unwrap();
        assert_eq!(data(&collect(all).await), ["7", "8", "9"]);
    }

    #[tokio::test]
    async fn finished_topics_beyond_retention_are_evicted() {
        let bus = MemoryBus::new(limits(10, 2));
        let topics: Vec<Topic> = (0..3).map(|_| Topic::Run(Uuid::now_v7())).collect();
        for topic in &topics {
            publish_n(&bus, *topic, 1).await;
            bus.close(*topic).await;
        }
        assert!(bus.subscribe(topics[0], Replay::All).await.is_none());
        assert!(bus.subscribe(topics[2], Replay::All).await.is_some());
    }

    #[tokio::test]
    async fn finished_topics_beyond_the_byte_budget_are_evicted_oldest_first() {
        let bus = MemoryBus::new(MemoryBusLimits {
            max_retained_bytes: 2500,
            ..MemoryBusLimits::default()
        });
        let topics: Vec<Topic> = (0..3).map(|_| Topic::Run(Uuid::now_v7())).collect();
        for topic in &topics {
            let input = Bytes::from(vec![b'x'; 1000]);
            bus.publish(*topic, "values", input).await;
            bus.close(*topic).await;
        }
        assert!(
            !bus.is_open(topics[0]).await,
            "over the budget: the oldest goes"
        );
        assert!(bus.is_open(topics[1]).await);
        assert!(bus.is_open(topics[2]).await);
        // A discarded topic's bytes leave the budget, so the next one fits.
        bus.discard(topics[1]).await;
        let newer = Topic::Run(Uuid::now_v7());
        bus.publish(newer, "values", Bytes::from(vec![b'y'; 1000]))
            .await;
        bus.close(newer).await;
        assert!(bus.is_open(topics[2]).await && bus.is_open(newer).await);
    }

    #[tokio::test]
    async fn a_running_topic_is_never_evicted_for_the_byte_budget() {
        let bus = MemoryBus::new(MemoryBusLimits {
            max_retained_bytes: 10,
            ..MemoryBusLimits::default()
        });
        let running = Topic::Run(Uuid::now_v7());
        bus.publish(running, "values", Bytes::from(vec![b'x'; 1000]))
            .await;
        let finished = Topic::Run(Uuid::now_v7());
        bus.publish(finished, "values", Bytes::from(vec![b'x'; 1000]))
            .await;
        bus.close(finished).await;
        assert!(bus.is_open(running).await);
        assert!(!bus.is_open(finished).await, "alone over the budget");
    }

    #[tokio::test]
    async fn a_slow_subscriber_catches_up_from_the_retained_buffer() {
        let bus = MemoryBus::new(limits(1000, 50));
        let topic = Topic::Run(Uuid::now_v7());
        bus.open(topic).await;
        let slow = bus.subscribe(topic, Replay::Live).await.unwrap();
        publish_n(&bus, topic, 20).await;
        bus.close(topic).await;
        let expected: Vec<String> = (0..20).map(|i| i.to_string()).collect();
        assert_eq!(data(&collect(slow).await), expected);
    }

    #[tokio::test]
    async fn a_subscriber_whose_next_frame_aged_out_is_told_it_lagged() {
        let bus = MemoryBus::new(limits(8, 50));
        let topic = Topic::Run(Uuid::now_v7());
        bus.open(topic).await;
        let slow = bus.subscribe(topic, Replay::Live).await.unwrap();
        publish_n(&bus, topic, 20).await;
        bus.close(topic).await;
        let deliveries = collect(slow).await;
        assert_eq!(deliveries, vec![Delivery::Lagged], "no silent gap");
    }

    #[tokio::test]
    async fn publishing_never_waits_for_a_subscriber_that_does_not_read() {
        let bus = MemoryBus::new(limits(100, 50));
        let topic = Topic::Run(Uuid::now_v7());
        bus.open(topic).await;
        let _idle = bus.subscribe(topic, Replay::Live).await.unwrap();
        // Would hang if a full subscriber queue held the producer back.
        publish_n(&bus, topic, 10_000).await;
    }

    #[tokio::test]
    async fn a_subscriber_reads_its_topic_to_the_end_after_eviction() {
        let bus = MemoryBus::new(limits(100, 1));
        let topic = Topic::Run(Uuid::now_v7());
        bus.open(topic).await;
        let early = bus.subscribe(topic, Replay::All).await.unwrap();
        publish_n(&bus, topic, 3).await;
        bus.close(topic).await;
        let other = Topic::Run(Uuid::now_v7());
        bus.open(other).await;
        bus.close(other).await;
        assert!(!bus.is_open(topic).await, "evicted beyond retention");
        assert_eq!(data(&collect(early).await), ["0", "1", "2"]);
    }

    #[tokio::test]
    async fn discarding_a_topic_ends_its_waiting_subscribers() {
        let bus = MemoryBus::new(MemoryBusLimits::default());
        let topic = Topic::Run(Uuid::now_v7());
        publish_n(&bus, topic, 1).await;
        let waiting = bus.subscribe(topic, Replay::All).await.unwrap();
        let reader = tokio::spawn(collect(waiting));
        tokio::task::yield_now().await;
        bus.discard(topic).await;
        assert_eq!(data(&reader.await.unwrap()), ["0"]);
    }

    #[tokio::test]
    async fn closing_every_topic_ends_every_waiting_subscriber() {
        let bus = MemoryBus::new(MemoryBusLimits::default());
        let (run, thread) = (Topic::Run(Uuid::now_v7()), Topic::Thread(Uuid::now_v7()));
        publish_n(&bus, run, 2).await;
        bus.open(thread).await;
        let readers = [
            tokio::spawn(collect(bus.subscribe(run, Replay::All).await.unwrap())),
            tokio::spawn(collect(bus.subscribe(thread, Replay::All).await.unwrap())),
        ];
        tokio::task::yield_now().await;
        bus.close_all().await;
        let [run_frames, thread_frames] = readers;
        assert_eq!(data(&run_frames.await.unwrap()), ["0", "1"]);
        assert!(thread_frames.await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn unknown_topics_have_no_subscription() {
        let bus = MemoryBus::new(MemoryBusLimits::default());
        assert!(
            bus.subscribe(Topic::Run(Uuid::now_v7()), Replay::All)
                .await
                .is_none()
        );
    }
}
