//! Cancels across instances over Redis pub/sub: with Redis configured, a recorded
//! cancel is announced on the bus's cancels channel and every instance's listener
//! hands it to its engine; the rest of the coordination (work announcements, thread
//! claims) stays with the coordinator it wraps (PostgreSQL).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use service_engine::EngineResult;
use service_engine::coordination::{CoordinationTuning, Coordinator, ThreadClaim};
use uuid::Uuid;

use crate::RedisBus;

/// A [`Coordinator`] whose cancel announcements travel over the Redis bus.
pub struct RedisCancels {
    inner: Arc<dyn Coordinator>,
    bus: Arc<RedisBus>,
}

impl fmt::Debug for RedisCancels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCancels")
            .field("bus", &self.bus)
            .finish_non_exhaustive()
    }
}

impl RedisCancels {
    /// `inner`, with cancels announced and heard through `bus`.
    pub fn new(inner: Arc<dyn Coordinator>, bus: Arc<RedisBus>) -> Self {
        Self { inner, bus }
    }
}

#[async_trait]
impl Coordinator for RedisCancels {
    fn tuning(&self) -> Option<&CoordinationTuning> {
        self.inner.tuning()
    }

    async fn announce_work(&self) {
        self.inner.announce_work().await;
    }

    async fn other_work(&self) {
        self.inner.other_work().await;
    }

    async fn claim_thread(&self, thread_id: Uuid) -> EngineResult<Box<dyn ThreadClaim>> {
        self.inner.claim_thread(thread_id).await
    }

    async fn thread_unclaimed(&self, thread_id: Uuid) -> EngineResult<bool> {
        self.inner.thread_unclaimed(thread_id).await
    }

    async fn announce_cancel(&self, run_id: Uuid) {
        let shared = &self.bus.shared;
        let published: redis::RedisResult<u64> = redis::cmd("PUBLISH")
            .arg(shared.keys.cancels())
            .arg(run_id.to_string())
            .query_async(&mut shared.connection.clone())
            .await;
        if let Err(error) = published {
            // Redis is away: the wrapped coordinator's channel still reaches the
            // instances (each hears both).
            tracing::warn!(%error, %run_id, "announcing a cancel on Redis failed; announcing it through the coordinator");
            self.inner.announce_cancel(run_id).await;
        }
    }

    fn announced_cancels(&self) -> BoxStream<'static, Uuid> {
        let heard = service_engine::coordination::announced(self.bus.shared.cancels.subscribe());
        futures::stream::select(heard, self.inner.announced_cancels()).boxed()
    }

    async fn shutdown(&self) {
        self.inner.shutdown().await;
    }
}
