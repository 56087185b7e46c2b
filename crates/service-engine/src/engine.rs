//! The engine value an embedder builds once and shares: store, graphs, checkpointer,
//! stream bus, workers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use service_graph::{AgentGraph, Checkpointer, GraphError, GraphResolver, GraphSource};
use service_store::{Clock, Store, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::active::ActiveRuns;
use crate::bus::StreamBus;
use crate::callbacks::Callbacks;
use crate::coordination::{Coordinator, LocalCoordinator};
use crate::drive::Driver;
use crate::fence::{FencedSaver, Fences};
use crate::frames::Frames;
use crate::graph_store::graph_store;
use crate::items::ItemOps;
use crate::metrics::EngineMetrics;
use crate::scheduler::Scheduler;
use crate::settle::Settler;
use crate::telemetry::{Observers, TelemetrySink};
use crate::webhooks::Webhooks;
use crate::{EngineConfig, EngineError, ErrorKind};

/// What an embedder hands the engine.
pub struct EngineParts {
    /// The protocol store.
    pub store: Store,
    /// Where graphs come from: built by the engine with `checkpointer`.
    pub graphs: Box<dyn GraphSource>,
    /// The checkpointer the graphs are built with and thread copy, prune and rollback
    /// act on.
    pub checkpointer: Arc<dyn Checkpointer>,
    /// The stream bus.
    pub bus: Arc<dyn StreamBus>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Where settled runs' webhooks go; without it, runs carrying one are refused.
    pub webhooks: Option<Arc<dyn Webhooks>>,
    /// Settings.
    pub config: EngineConfig,
}

impl std::fmt::Debug for EngineParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineParts")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The protocol engine. Cheap to clone; every clone is the same engine.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    /// Store items with the configured index, ttl and refresh applied.
    pub(crate) items: ItemOps,
    pub(crate) graphs: Arc<dyn GraphResolver>,
    pub(crate) checkpointer: Arc<dyn Checkpointer>,
    pub(crate) bus: Arc<dyn StreamBus>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) webhooks: Option<Arc<dyn Webhooks>>,
    pub(crate) config: EngineConfig,
    pub(crate) coordinator: Arc<dyn Coordinator>,
    /// Writes runs' frames and outcomes to the bus.
    pub(crate) frames: Frames,
    /// Drives runs' graphs.
    pub(crate) driver: Driver,
    /// Settles driven runs.
    pub(crate) settler: Settler,
    /// Who runs what next on this instance.
    pub(crate) scheduler: Scheduler,
    /// Runs executing on this instance.
    pub(crate) active: ActiveRuns,
    /// Wakes the cron scheduler when a cron changes.
    pub(crate) wake_crons: Notify,
    /// Assistants as last read for a run, by id. A run built from one is queued only
    /// while the stored assistant is unchanged (`NewRun::assistant_as_read`), so an
    /// entry another instance made stale costs one retry, never a run built from an
    /// old version; this instance's own changes drop their entry.
    pub(crate) run_assistants: Mutex<HashMap<Uuid, service_types::Assistant>>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
    /// What `/metrics` reports of this engine.
    pub(crate) metrics: EngineMetrics,
}

impl Engine {
    /// Builds a single-instance engine; call [`Engine::start`] to run workers and
    /// sweepers. Fails when the graph source does.
    pub fn new(parts: EngineParts) -> Result<Self, GraphError> {
        Self::with_coordinator(parts, Arc::new(LocalCoordinator))
    }

    /// Builds an engine that shares its store with other instances through
    /// `coordinator`. Fails when the graph source does.
    pub fn with_coordinator(
        parts: EngineParts,
        coordinator: Arc<dyn Coordinator>,
    ) -> Result<Self, GraphError> {
        // The graphs write through a fence, so a stopped run's late checkpoints are
        // refused; thread copy, prune and rollback use the saver itself.
        let fences = Arc::new(Fences::default());
        let graphs = parts.graphs.build(Arc::new(FencedSaver {
            inner: Arc::clone(&parts.checkpointer),
            fences: Arc::clone(&fences),
        }))?;
        let frames = Frames::new(Arc::clone(&parts.bus), parts.config.expose_stacks);
        let observers = Observers::default();
        let metrics = EngineMetrics::default();
        if let Some(webhooks) = &parts.webhooks {
            webhooks.count_deliveries(metrics.deliveries.clone());
        }
        let items = ItemOps::new(parts.store.clone(), &parts.config);
        let driver = Driver {
            graphs: Arc::clone(&graphs),
            coordinator: Arc::clone(&coordinator),
            store: parts.store.clone(),
            long_term: graph_store(items.clone()),
            frames: frames.clone(),
            run_timeout: parts.config.run_timeout,
            observers: observers.clone(),
        };
        let settler = Settler {
            store: parts.store.clone(),
            checkpointer: Arc::clone(&parts.checkpointer),
            fences,
            frames: frames.clone(),
            callbacks: Callbacks::new(
                parts.webhooks.clone(),
                parts.store.capabilities().deliveries,
            ),
            clock: Arc::clone(&parts.clock),
            run_timeout: parts.config.run_timeout,
            metrics: metrics.clone(),
            observers,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                store: parts.store,
                items,
                graphs,
                checkpointer: parts.checkpointer,
                bus: parts.bus,
                clock: parts.clock,
                webhooks: parts.webhooks,
                config: parts.config,
                coordinator,
                frames,
                driver,
                settler,
                scheduler: Scheduler::default(),
                active: ActiveRuns::default(),
                wake_crons: Notify::new(),
                run_assistants: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                metrics,
            }),
        })
    }

    /// The store.
    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Whether error stacks and graph-load reasons reach clients.
    pub fn exposes_stacks(&self) -> bool {
        self.inner.frames.exposes_stacks()
    }

    /// Turns stack exposure on or off (it may change after mounting).
    pub fn set_expose_stacks(&self, expose: bool) {
        self.inner.frames.set_expose_stacks(expose);
    }

    /// Registers a telemetry sink: it receives every run's `run.finished` event from
    /// now on (SPEC "Telemetry").
    pub fn add_telemetry_sink(&self, sink: Arc<dyn TelemetrySink>) {
        self.inner.settler.observers.add_sink(sink);
    }

    /// Logs run activity (SPEC `logRunActivity`, the CLI's `--verbose`): each run's
    /// start, its tool calls and results, and the interrupts it pauses on, as info
    /// events of [`ACTIVITY_TARGET`](crate::telemetry::ACTIVITY_TARGET). Failures are
    /// logged either way.
    pub fn log_run_activity(&self, on: bool) {
        self.inner.settler.observers.set_log_activity(on);
    }

    /// Registered graph ids.
    pub fn graph_ids(&self) -> Vec<String> {
        self.inner.graphs.graph_ids()
    }

    pub(crate) fn now(&self) -> service_types::Timestamp {
        self.inner.clock.now()
    }

    /// The store's clock reading (TTL and expiry stamps use it).
    pub fn store_now(&self) -> service_types::Timestamp {
        self.inner.clock.now()
    }

    /// How many workers wait for work now: an engine with every worker idle has
    /// nothing to execute (health reports and tests read it).
    pub fn idle_workers(&self) -> usize {
        self.inner.scheduler.idle_workers()
    }

    /// Has a worker search the queue (a worker that claims a run wakes the next, so a
    /// burst drains on every idle worker) and tells the other instances.
    pub(crate) fn wake_workers(&self) {
        self.inner.scheduler.queue_changed();
        self.announce();
    }

    /// Asks the announcer to tell other instances about queued work, when there are
    /// any: in one process nothing is woken (a wake-up per run costs more than the
    /// run's own hand-overs at low concurrency).
    pub(crate) fn announce(&self) {
        if self.inner.coordinator.tuning().is_some() {
            self.inner.scheduler.request_announcement();
        }
    }

    /// Loads a graph for a surface that answers HTTP directly: a load failure is
    /// 500 `graph_load_failed`, the reason shown only when stacks are exposed.
    pub(crate) async fn load_graph(
        &self,
        graph_id: &str,
    ) -> Result<Arc<dyn AgentGraph>, EngineError> {
        self.inner
            .graphs
            .load(graph_id)
            .await
            .map_err(|error| match error {
                GraphError::LoadFailed { graph_id, reason } => {
                    crate::telemetry::report_load_failure(&graph_id, &reason);
                    EngineError::graph_load_failed(&graph_id, &reason, self.exposes_stacks())
                }
                other => EngineError::from(other),
            })
    }
}

impl From<StoreError> for EngineError {
    fn from(error: StoreError) -> Self {
        use service_store::ErrorKind as Store;
        let kind = match error.kind {
            Store::NotFound => ErrorKind::NotFound,
            Store::Conflict => ErrorKind::Conflict,
            Store::Invalid => ErrorKind::BadRequest,
            Store::Unsupported => ErrorKind::Unprocessable,
            Store::Transient => ErrorKind::Unavailable,
            Store::Stale => ErrorKind::Conflict,
            Store::Unexpected => ErrorKind::Internal,
            Store::Adapter => ErrorKind::Unavailable,
        };
        if error.kind == Store::Adapter {
            // The deployment's own store failed: like the database, a 503, but
            // with the adapter's account (its error class and message), which is
            // the deployment's to read and not the database's internals.
            let mut engine_error = EngineError::new(kind, error.message.clone());
            engine_error.code = Some("store_adapter_failed");
            return engine_error.with_source(error);
        }
        if kind == ErrorKind::Internal {
            return EngineError::internal(error);
        }
        if kind == ErrorKind::Unavailable {
            // The database's own words (SQLSTATEs, statement text, hosts) are for the
            // log, which gets them through the source; clients get the class.
            let mut engine_error = EngineError::new(
                kind,
                "The database is temporarily unavailable; try again shortly",
            );
            engine_error.code = Some("store_unavailable");
            return engine_error.with_source(error);
        }
        // The message goes to the client; its cause (a lost connection behind a 503)
        // to the log.
        let mut engine_error = EngineError::new(kind, error.message);
        engine_error.source = error.source;
        engine_error
    }
}

impl From<GraphError> for EngineError {
    fn from(error: GraphError) -> Self {
        match error {
            GraphError::CapabilityMissing { capability } => {
                EngineError::capability_missing(capability)
            }
            GraphError::InvalidInput(message) => EngineError::bad_request(message),
            GraphError::NotFound(message) => EngineError::not_found(message),
            GraphError::LoadFailed { graph_id, reason } => {
                EngineError::graph_load_failed(&graph_id, &reason, false)
            }
            other => EngineError::internal(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transient_database_error_reaches_clients_as_its_class_and_the_log_in_full() {
        let cause = std::io::Error::other("57014: canceling statement due to statement timeout");
        let store =
            StoreError::transient("database error: 57014: canceling statement").with_source(cause);
        let error = EngineError::from(store);
        assert_eq!(error.kind, ErrorKind::Unavailable);
        assert_eq!(error.code, Some("store_unavailable"));
        assert!(!error.message.contains("57014"), "{}", error.message);
        assert!(
            error
                .chain()
                .contains("canceling statement due to statement timeout")
        );
    }

    #[test]
    fn a_failing_store_adapter_reaches_clients_as_a_503_with_its_own_account() {
        let store =
            StoreError::adapter("store.adapter ./store.py:store failed: ConnectionError: down");
        let error = EngineError::from(store);
        assert_eq!(error.kind, ErrorKind::Unavailable);
        assert_eq!(error.code, Some("store_adapter_failed"));
        assert!(
            error.message.contains("ConnectionError: down"),
            "{}",
            error.message
        );
    }
}
