//! What a health probe and a metrics scrape ask the engine.

use std::time::Duration;

use prometheus_client::registry::Registry;
use service_graph::GraphError;
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
    /// Loads every registered graph once, all at once, and reports each one that
    /// cannot load (SPEC: a load-failure block per graph at startup); returns their
    /// ids. The others keep serving, and a failed one's routes answer
    /// `graph_load_failed`.
    pub async fn probe_graphs(&self) -> Vec<String> {
        let ids = self.graph_ids();
        let loads = ids.iter().map(|graph_id| async move {
            (graph_id, self.inner.graphs.load(graph_id).await.err())
        });
        let mut failed = Vec::new();
        for (graph_id, error) in futures::future::join_all(loads).await {
            let Some(error) = error else { continue };
            let reason = match error {
                GraphError::LoadFailed { reason, .. } => reason,
                other => other.to_string(),
            };
            crate::telemetry::report_load_failure(graph_id, &reason);
            failed.push(graph_id.clone());
        }
        failed
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
        if let Some(deliveries) = self.store().deliveries() {
            let waiting = deliveries.count_awaiting_retry().await?;
            self.inner.metrics.set_webhook_retries_pending(waiting);
        }
        Ok(())
    }
}
