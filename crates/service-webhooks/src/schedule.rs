//! Where the retry schedule lives. Without a queue server, the outbox table itself:
//! each retry's due time is its row's `next_attempt_at`; an instance searches the
//! table for due rows every poll interval (so another instance's retries, and rows
//! committed before a crash, are picked up), and sooner when a retry it recorded
//! falls due. With a durable queue ([`RetryQueue`], e.g. on Redis), retries are
//! delayed jobs there, taken by whichever instance looks first, and the table is only
//! swept now and then for rows that lost their job (a crash between taking a job and
//! claiming its row, a failed schedule): they arrive late, never not at all.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use service_types::Timestamp;
use tokio::sync::Notify;
use uuid::Uuid;

/// A durable queue of delayed retries: pending retries survive restarts of every
/// instance. Each job is taken once, by one instance.
#[async_trait]
pub trait RetryQueue: Send + Sync + fmt::Debug {
    /// The next attempt of `delivery_id` is due at `at`.
    async fn schedule(&self, delivery_id: Uuid, at: Timestamp) -> Result<(), String>;

    /// Takes up to `limit` jobs due by `now` off the queue, earliest first.
    async fn take_due(&self, now: Timestamp, limit: usize) -> Result<Vec<Uuid>, String>;
}

/// The earliest retry this instance recorded, and a wake-up when it moves earlier.
#[derive(Clone, Debug, Default)]
pub(crate) struct RetryTimer {
    inner: Arc<TimerInner>,
}

#[derive(Debug, Default)]
struct TimerInner {
    earliest: Mutex<Option<Timestamp>>,
    earlier: Notify,
}

impl RetryTimer {
    /// A retry is due at `at`.
    pub(crate) fn retry_at(&self, at: Timestamp) {
        let mut earliest = self
            .inner
            .earliest
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if earliest.is_none_or(|current| at < current) {
            *earliest = Some(at);
            self.inner.earlier.notify_waiters();
        }
    }

    /// The outbox is searched at `now`: retries due by then are taken by it.
    pub(crate) fn passed(&self, now: Timestamp) {
        let mut earliest = self
            .inner
            .earliest
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if earliest.is_some_and(|at| at <= now) {
            *earliest = None;
        }
    }

    /// Resolves when the outbox should be searched again: after `poll`, when the
    /// earliest recorded retry falls due, or when an earlier one is recorded.
    pub(crate) fn wait_for_next(
        &self,
        now: Timestamp,
        poll: Duration,
    ) -> impl Future<Output = ()> + Send + 'static {
        let inner = Arc::clone(&self.inner);
        async move {
            let earlier = inner.earlier.notified();
            tokio::pin!(earlier);
            // Registered before the read, so a retry recorded in between still wakes.
            earlier.as_mut().enable();
            let until_earliest = inner
                .earliest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map(|at| {
                    Duration::from_micros((at.unix_micros() - now.unix_micros()).max(0) as u64)
                });
            let wait = until_earliest.map_or(poll, |until| until.min(poll));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = earlier => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wakes_at_the_earliest_retry_not_the_poll_interval() {
        let timer = RetryTimer::default();
        let now = Timestamp::from_unix_micros(1_000_000_000);
        timer.retry_at(now.plus_millis(300));
        timer.retry_at(now.plus_millis(900));
        let started = tokio::time::Instant::now();
        timer.wait_for_next(now, Duration::from_secs(5)).await;
        assert_eq!(started.elapsed(), Duration::from_millis(300));
        timer.passed(now.plus_millis(300));
        let started = tokio::time::Instant::now();
        timer.wait_for_next(now, Duration::from_secs(5)).await;
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(5),
            "the 900 ms retry was taken by the search"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_retry_cuts_a_wait_short() {
        let timer = RetryTimer::default();
        let now = Timestamp::from_unix_micros(1_000_000_000);
        let waiting = timer.wait_for_next(now, Duration::from_secs(5));
        let started = tokio::time::Instant::now();
        let recorder = timer.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            recorder.retry_at(now.plus_millis(60));
        });
        waiting.await;
        assert_eq!(started.elapsed(), Duration::from_millis(50));
    }
}
