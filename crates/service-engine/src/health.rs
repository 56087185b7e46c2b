//! What a health probe and a metrics scrape ask the engine.

use std::time::Duration;

use prometheus_client::registry::Registry;
use service_store::ActiveRunsQuery;
use service_types::RunStatus;

use crate::{Engine, EngineError, EngineResult, ErrorKind};

impl Engine {
    /// One cheap round trip to the store. Any failure is `Unavailable` (the probe's
    /// 503); its cause stays in the error's source, for the log, not the client.
    pub async fn check_store(&self) -> EngineResult<()> {
        self.inner.store.ping().await.map_err(|error| {
            EngineError::new(ErrorKind::Unavailable, "The store did not answer").with_source(error)
        })
    }
}

impl Engine {
    /// Registers the engine's metrics (prefix `service_`) in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.inner.metrics.register(registry);
    }

    /// Reads the queue's gauges from the store; called before each scrape. A store
    /// error leaves the last values and is returned.
    pub async fn refresh_metrics(&self) -> EngineResult<()> {
        let query = ActiveRunsQuery {
            status: Some(RunStatus::Pending),
            limit: Some(self.config().max_page_size),
            ..ActiveRunsQuery::default()
        };
        let pending = self.store().runs().active(&query).await?;
        let now = self.inner.clock.now();
        let oldest =
            pending
                .iter()
                .map(|run| run.created_at)
                .min()
                .map_or(Duration::ZERO, |created| {
                    Duration::from_micros(
                        u64::try_from(now.unix_micros() - created.unix_micros()).unwrap_or(0),
                    )
                });
        self.inner.metrics.set_queue(pending.len(), oldest);
        Ok(())
    }
}
