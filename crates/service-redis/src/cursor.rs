//! A subscriber's position in a topic's stream, read a batch at a time.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use redis::streams::{StreamId, StreamRangeReply};
use service_engine::bus::{Delivery, EventId, Frame, Topic};

use crate::keys::{self, CLOSED};
use crate::{Local, Shared};

/// Where a subscription starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Start {
    /// The oldest frame still kept.
    Beginning,
    /// The frame after this one (a client's `Last-Event-ID`): frames trimmed since
    /// are skipped, as on the in-memory bus, so a reconnect cannot loop on a gap.
    After(EventId),
    /// The frame after the newest one (none yet: the first), which must be number
    /// `next`, or the subscriber lagged.
    Live {
        /// The newest entry when subscribing.
        after: Option<EventId>,
        /// The number of the next frame.
        next: u64,
    },
}

pub(crate) struct Cursor {
    shared: Arc<Shared>,
    /// This instance's wake-ups and recent frames of the topic.
    local: Arc<Local>,
    topic: Topic,
    stream: String,
    start: Start,
    /// The number the next frame must carry; unknown until the first is read (the
    /// oldest kept, or the first after a replay point, may follow trimmed ones).
    expected: Option<u64>,
    /// Read, not yet handed out.
    pending: VecDeque<Delivery>,
    /// Nothing is read after what is pending.
    ended: bool,
    /// The topic was closed when subscribed: once nothing is left to read, it ends.
    closed: bool,
    /// The topic's `unread` count when this cursor last read Redis.
    seen_unread: u64,
}

impl Cursor {
    pub(crate) fn new(
        shared: Arc<Shared>,
        local: Arc<Local>,
        topic: Topic,
        start: Start,
        closed: bool,
    ) -> Self {
        let stream = shared.keys.stream(topic);
        let (start, expected) = match start {
            Start::Live { after, next } => {
                (after.map_or(Start::Beginning, Start::After), Some(next))
            }
            other => (other, None),
        };
        Self {
            local,
            shared,
            topic,
            stream,
            start,
            expected,
            pending: VecDeque::new(),
            ended: false,
            closed,
            // Never a count: the first look always reads Redis, for frames appended
            // before this instance followed the topic.
            seen_unread: u64::MAX,
        }
    }

    pub(crate) async fn next(&mut self) -> Option<Delivery> {
        // A poll interval passed without a wake-up.
        let mut woken = false;
        loop {
            if let Some(delivery) = self.pending.pop_front() {
                return Some(delivery);
            }
            if self.ended || self.shared.closed_all.load(Ordering::SeqCst) {
                return None;
            }
            let (local, shared) = (self.local.clone(), self.shared.clone());
            let announced = local.announced.notified();
            let closing = shared.closing.notified();
            tokio::pin!(announced, closing);
            // Registered before looking, so a frame appended in between still wakes us.
            announced.as_mut().enable();
            closing.as_mut().enable();
            let behind = match self.expected {
                Some(expected) => {
                    let (frames, next, behind) = self.local.frames_from(expected);
                    if let Some(last) = frames.last() {
                        self.start = Start::After(last.id);
                        self.expected = Some(next);
                        self.pending.extend(frames.into_iter().map(Delivery::Frame));
                        continue;
                    }
                    behind
                }
                None => true,
            };
            // Redis is read for what this instance did not append itself: the replay, a
            // frame announced by another instance, or after a quiet poll interval. A
            // subscriber that reads on every wake-up races the appends it is told about.
            let unread = self.local.unread.load(Ordering::SeqCst);
            // Told of something (or a quiet interval passed): an empty read then means
            // the topic may be gone.
            let told = woken || unread != self.seen_unread;
            if behind || told {
                self.seen_unread = unread;
                match self.read().await {
                    Ok(true) => {
                        woken = false;
                        continue;
                    }
                    Ok(false) if self.closed => return None,
                    Ok(false) if told && !self.topic_exists().await => return None,
                    Ok(false) => {}
                    Err(error) => {
                        // The client is told (an error frame) rather than left waiting; it
                        // may reconnect with Last-Event-ID once Redis is back.
                        tracing::error!(%error, topic = ?self.topic, "reading a stream from Redis failed");
                        self.ended = true;
                        return Some(Delivery::Unavailable);
                    }
                }
            }
            woken = false;
            tokio::select! {
                () = announced => {}
                () = closing => {}
                () = tokio::time::sleep(self.shared.options.poll) => woken = true,
            }
        }
    }

    /// Reads the next batch from Redis into `pending`; false when there was nothing new.
    async fn read(&mut self) -> redis::RedisResult<bool> {
        let start = match self.start {
            Start::Beginning => "-".to_owned(),
            // A live start was turned into one of the others when the cursor was made.
            Start::After(id)
            | Start::Live {
                after: Some(id), ..
            } => keys::after(id),
            Start::Live { after: None, .. } => "-".to_owned(),
        };
        let reply: StreamRangeReply = redis::cmd("XRANGE")
            .arg(&self.stream)
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(self.shared.options.batch.max(1))
            .query_async(&mut self.shared.connection.clone())
            .await?;
        if reply.ids.is_empty() {
            return Ok(false);
        }
        for entry in reply.ids {
            self.take(entry);
            if self.ended {
                break;
            }
        }
        Ok(true)
    }

    /// One entry: a frame to hand out, a marker that ends the subscription, or a gap
    /// (frames trimmed before they were read) that ends it as lagged.
    fn take(&mut self, entry: StreamId) {
        let field = |name: &str| match entry.map.get(name) {
            Some(redis::Value::BulkString(bytes)) => Bytes::copy_from_slice(bytes),
            _ => Bytes::new(),
        };
        let number = std::str::from_utf8(&field("n"))
            .ok()
            .and_then(|text| text.parse::<u64>().ok());
        let (Some(id), Some(number)) = (keys::event_id(&entry.id), number) else {
            tracing::error!(id = entry.id, "a stream entry is not one this bus appended");
            self.ended = true;
            self.pending.push_back(Delivery::Lagged);
            return;
        };
        self.start = Start::After(id);
        if self.expected.is_some_and(|expected| number != expected) {
            self.ended = true;
            self.pending.push_back(Delivery::Lagged);
            return;
        }
        self.expected = Some(number + 1);
        let event = String::from_utf8_lossy(&field("e")).into_owned();
        if event == CLOSED {
            self.ended = true;
            return;
        }
        self.pending.push_back(Delivery::Frame(Frame {
            id,
            event,
            data: field("d"),
        }));
    }

    /// False once the topic is gone (discarded, or expired), so a subscriber stops
    /// waiting for frames that cannot come.
    async fn topic_exists(&self) -> bool {
        let meta = self.shared.keys.meta(self.topic);
        let exists: redis::RedisResult<u32> = redis::cmd("EXISTS")
            .arg(&meta)
            .arg(&self.stream)
            .query_async(&mut self.shared.connection.clone())
            .await;
        exists.map_or(true, |count| count > 0)
    }
}
