//! The in-memory stream bus: bounded per-topic buffers, bounded retention of finished
//! topics, and a bounded queue per subscriber whose overflow drops that subscriber.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::broadcast;

use super::{Delivery, EventId, Frame, Replay, StreamBus, Subscription, Topic};

/// Bounds of the in-memory bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBusLimits {
    /// Frames one topic buffers (SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN); older frames
    /// age out and cannot be replayed.
    pub max_frames_per_topic: usize,
    /// Finished topics kept replayable (SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS).
    pub max_retained_topics: usize,
    /// Frames a live subscriber may have queued before it is dropped as lagging.
    pub subscriber_buffer: usize,
}

impl Default for MemoryBusLimits {
    fn default() -> Self {
        Self {
            max_frames_per_topic: 10_000,
            max_retained_topics: 50,
            subscriber_buffer: 512,
        }
    }
}

/// The in-memory [`StreamBus`].
#[derive(Debug)]
pub struct MemoryBus {
    limits: MemoryBusLimits,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    topics: HashMap<Topic, TopicState>,
    /// Closed topics, oldest first; evicted beyond the retention bound.
    finished: VecDeque<Topic>,
}

#[derive(Debug)]
struct TopicState {
    frames: VecDeque<Frame>,
    last_id: Option<EventId>,
    /// `None` once closed: receivers drain their queue and end.
    sender: Option<broadcast::Sender<Frame>>,
}

impl MemoryBus {
    /// A bus with these bounds.
    pub fn new(limits: MemoryBusLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Arc::new(Mutex::new(State::default())),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the maps half-updated in a way
        // later calls would misread, so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn topic_mut<'a>(&self, state: &'a mut State, topic: Topic) -> &'a mut TopicState {
        state.topics.entry(topic).or_insert_with(|| TopicState {
            frames: VecDeque::new(),
            last_id: None,
            sender: Some(broadcast::channel(self.limits.subscriber_buffer.max(1)).0),
        })
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding this lock cannot leave the maps half-updated in a way
    // later calls would misread, so a poisoned lock is still usable.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A subscriber's position: frames queued from the buffer, then the live receiver.
/// When the live queue overflows, the subscriber catches up from the topic's retained
/// buffer; only a frame that aged out of that buffer ends it as lagging.
struct Cursor {
    state: Arc<Mutex<State>>,
    topic: Topic,
    queue: VecDeque<Frame>,
    receiver: Option<broadcast::Receiver<Frame>>,
    /// Sequence number of the next frame this subscriber needs.
    next_seq: u64,
}

impl Cursor {
    async fn next(&mut self) -> Option<Delivery> {
        loop {
            if let Some(frame) = self.queue.pop_front() {
                self.next_seq = frame.id.seq + 1;
                return Some(Delivery::Frame(frame));
            }
            let receiver = self.receiver.as_mut()?;
            match receiver.recv().await {
                Ok(frame) if frame.id.seq < self.next_seq => {}
                Ok(frame) => {
                    self.next_seq = frame.id.seq + 1;
                    return Some(Delivery::Frame(frame));
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.receiver = None;
                    return None;
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if !self.catch_up() {
                        self.receiver = None;
                        return Some(Delivery::Lagged);
                    }
                }
            }
        }
    }

    /// Refills the queue from the retained buffer; false when the next needed frame is
    /// no longer there.
    fn catch_up(&mut self) -> bool {
        let state = lock(&self.state);
        let Some(entry) = state.topics.get(&self.topic) else {
            return false;
        };
        let pending: VecDeque<Frame> = entry
            .frames
            .iter()
            .filter(|frame| frame.id.seq >= self.next_seq)
            .cloned()
            .collect();
        let continuous = match pending.front() {
            Some(first) => first.id.seq == self.next_seq,
            None => entry.last_id.is_none_or(|last| last.seq < self.next_seq),
        };
        if !continuous {
            return false;
        }
        self.queue = pending;
        // Resubscribed under the lock: nothing published in between is missed.
        self.receiver = entry.sender.as_ref().map(broadcast::Sender::subscribe);
        true
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
        let mut state = self.lock();
        self.topic_mut(&mut state, topic);
    }

    async fn publish(&self, topic: Topic, event: &str, data: Bytes) -> EventId {
        let mut state = self.lock();
        let max_frames = self.limits.max_frames_per_topic.max(1);
        let entry = self.topic_mut(&mut state, topic);
        let id = match entry.last_id {
            Some(last) => EventId {
                millis: now_millis().max(last.millis),
                seq: last.seq + 1,
            },
            None => EventId {
                millis: now_millis(),
                seq: 0,
            },
        };
        entry.last_id = Some(id);
        let frame = Frame {
            id,
            event: event.to_owned(),
            data,
        };
        if entry.frames.len() == max_frames {
            entry.frames.pop_front();
        }
        entry.frames.push_back(frame.clone());
        if let Some(sender) = &entry.sender {
            // No receivers is fine: the frame stays buffered for later joins.
            let _ = sender.send(frame);
        }
        id
    }

    async fn close(&self, topic: Topic) {
        let mut state = self.lock();
        let entry = self.topic_mut(&mut state, topic);
        if entry.sender.take().is_none() {
            return;
        }
        state.finished.push_back(topic);
        while state.finished.len() > self.limits.max_retained_topics {
            if let Some(evicted) = state.finished.pop_front() {
                state.topics.remove(&evicted);
            }
        }
    }

    async fn subscribe(&self, topic: Topic, replay: Replay) -> Option<Subscription> {
        let state = self.lock();
        let entry = state.topics.get(&topic)?;
        let queue: VecDeque<Frame> = match replay {
            Replay::Live => VecDeque::new(),
            Replay::All => entry.frames.iter().cloned().collect(),
            Replay::After(after) => entry
                .frames
                .iter()
                .filter(|frame| frame.id > after)
                .cloned()
                .collect(),
        };
        let next_seq = queue
            .front()
            .map(|frame| frame.id.seq)
            .or_else(|| entry.last_id.map(|last| last.seq + 1))
            .unwrap_or(0);
        // Subscribing under the same lock as publish means no frame falls between the
        // replayed snapshot and the live receiver.
        let receiver = entry.sender.as_ref().map(broadcast::Sender::subscribe);
        drop(state);
        let cursor = Cursor {
            state: self.state.clone(),
            topic,
            queue,
            receiver,
            next_seq,
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
        let mut state = self.lock();
        state.topics.remove(&topic);
        state.finished.retain(|finished| *finished != topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn limits(max_frames: usize, retained: usize, buffer: usize) -> MemoryBusLimits {
        MemoryBusLimits {
            max_frames_per_topic: max_frames,
            max_retained_topics: retained,
            subscriber_buffer: buffer,
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
        let bus = MemoryBus::new(limits(3, 50, 16));
        let topic = Topic::Run(Uuid::now_v7());
        publish_n(&bus, topic, 10).await;
        bus.close(topic).await;
        let all = bus.subscribe(topic, Replay::All).await.unwrap();
        assert_eq!(data(&collect(all).await), ["7", "8", "9"]);
    }

    #[tokio::test]
    async fn finished_topics_beyond_retention_are_evicted() {
        let bus = MemoryBus::new(limits(10, 2, 16));
        let topics: Vec<Topic> = (0..3).map(|_| Topic::Run(Uuid::now_v7())).collect();
        for topic in &topics {
            publish_n(&bus, *topic, 1).await;
            bus.close(*topic).await;
        }
        assert!(bus.subscribe(topics[0], Replay::All).await.is_none());
        assert!(bus.subscribe(topics[2], Replay::All).await.is_some());
    }

    #[tokio::test]
    async fn a_slow_subscriber_catches_up_from_the_retained_buffer() {
        let bus = MemoryBus::new(limits(1000, 50, 4));
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
        let bus = MemoryBus::new(limits(8, 50, 4));
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
        let bus = MemoryBus::new(limits(100, 50, 4));
        let topic = Topic::Run(Uuid::now_v7());
        bus.open(topic).await;
        let _idle = bus.subscribe(topic, Replay::Live).await.unwrap();
        // Would hang if a full subscriber queue held the producer back.
        publish_n(&bus, topic, 10_000).await;
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
