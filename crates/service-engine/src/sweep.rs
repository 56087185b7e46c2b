//! Periodic collection of expired threads, store items and idempotency records.

use crate::Engine;

/// Threads collected per sweeper pass; a full batch triggers another pass at once.
const SWEEP_BATCH: usize = 100;

impl Engine {
    pub(crate) async fn sweep_loop(&self) {
        let mut ticker = tokio::time::interval(self.config().sweep_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                () = self.inner.shutdown.cancelled() => return,
            }
            self.sweep_once().await;
        }
    }

    /// One sweeper pass: expired threads (in bounded batches, again at once while a
    /// batch is full), expired store items, expired idempotency records.
    pub(crate) async fn sweep_once(&self) {
        loop {
            let now = self.now();
            let expired = match self.store().threads().expired(now, SWEEP_BATCH).await {
                Ok(expired) => expired,
                Err(error) => {
                    tracing::error!(%error, "listing expired threads failed");
                    break;
                }
            };
            for thread_id in &expired {
                if let Err(error) = self.delete_thread(*thread_id).await {
                    tracing::warn!(%thread_id, error = %error.chain(), "collecting an expired thread failed");
                }
            }
            if expired.len() < SWEEP_BATCH {
                break;
            }
        }
        let now = self.now();
        if let Err(error) = self.store().items().sweep_expired(now).await {
            tracing::error!(%error, "sweeping expired store items failed");
        }
        if let Err(error) = self.store().idempotency().expire(now).await {
            tracing::error!(%error, "expiring idempotency records failed");
        }
    }
}
