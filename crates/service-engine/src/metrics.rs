//! Aggregate counters of what this engine does, for an operator's `/metrics`: counts
//! by status or outcome only, never an id, so they carry no tenant's data. The HTTP
//! adapter registers them beside its own and renders the text.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use service_types::RunStatus;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// What became of one webhook delivery attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Answered 2xx.
    Delivered,
    /// Failed; another attempt is scheduled.
    Retry,
    /// Failed for the last time.
    Dead,
}

/// Counts webhook delivery attempts by outcome; handed to the engine's [`Webhooks`]
/// (`crate::Webhooks::count_deliveries`) when the engine is built.
#[derive(Clone, Debug, Default)]
pub struct DeliveryCounter(Family<OutcomeLabel, Counter>);

impl DeliveryCounter {
    /// Counts one attempt.
    pub fn count(&self, outcome: DeliveryOutcome) {
        let outcome = match outcome {
            DeliveryOutcome::Delivered => "delivered",
            DeliveryOutcome::Retry => "retry",
            DeliveryOutcome::Dead => "dead",
        };
        self.0.get_or_create(&OutcomeLabel { outcome }).inc();
    }
}

/// The engine's counters and gauges. Cheap to clone; clones count together.
#[derive(Clone, Debug, Default)]
pub(crate) struct EngineMetrics {
    runs_created: Counter,
    runs_started: Counter,
    runs_settled: Family<StatusLabel, Counter>,
    runs_executing: Gauge,
    pub(crate) deliveries: DeliveryCounter,
    queue_depth: Gauge,
    oldest_pending_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    webhook_retries_pending: Gauge,
}

impl EngineMetrics {
    pub(crate) fn run_created(&self) {
        self.runs_created.inc();
    }

    /// A run began executing here; the guard counts it out when it ends.
    pub(crate) fn run_started(&self) -> Executing {
        self.runs_started.inc();
        self.runs_executing.inc();
        Executing(self.runs_executing.clone())
    }

    pub(crate) fn run_settled(&self, status: RunStatus) {
        self.runs_settled
            .get_or_create(&StatusLabel {
                status: status.as_str(),
            })
            .inc();
    }
}

/// Counts an executing run out when dropped, however its execution ends.
#[derive(Debug)]
pub(crate) struct Executing(Gauge);

impl Drop for Executing {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl EngineMetrics {
    /// Registers these metrics (prefix `service_`) in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        let metrics = self.clone();
        let service = registry.sub_registry_with_prefix("service");
        service.register(
            "runs_created",
            "Runs created through this instance",
            metrics.runs_created,
        );
        service.register(
            "runs_started",
            "Runs that began executing on this instance",
            metrics.runs_started,
        );
        service.register(
            "runs_settled",
            "Runs this instance settled, by final status",
            metrics.runs_settled,
        );
        service.register(
            "runs_executing",
            "Runs executing on this instance now",
            metrics.runs_executing,
        );
        service.register(
            "webhook_deliveries",
            "Webhook delivery attempts, by outcome",
            metrics.deliveries.0,
        );
        service.register(
            "queue_depth",
            "Pending runs in the store (all instances), counted up to the max page size",
            metrics.queue_depth,
        );
        service.register(
            "queue_oldest_pending_age_seconds",
            "Age of the oldest pending run in the store (0 when none is pending)",
            metrics.oldest_pending_seconds,
        );
        service.register(
            "webhook_retries_pending",
            "Webhook deliveries in the store (all instances) awaiting a retry: attempted and \
             failed, neither delivered nor given up (0 when the store records no deliveries)",
            metrics.webhook_retries_pending,
        );
    }

    /// The queue's gauges, as a scrape read them from the store.
    pub(crate) fn set_queue(&self, pending: usize, oldest: Duration) {
        self.queue_depth
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
        self.oldest_pending_seconds.set(oldest.as_secs_f64());
    }

    /// The deliveries awaiting a retry, as a scrape counted them in the store.
    pub(crate) fn set_webhook_retries_pending(&self, waiting: u64) {
        self.webhook_retries_pending
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }
}
