//! The engine value an embedder builds once and shares: store, graphs, checkpointer,
//! stream bus, workers.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use service_graph::{AgentGraph, Checkpointer, GraphError, GraphResolver};
use service_store::{Clock, Store, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::bus::StreamBus;
use crate::coordination::{Coordinator, LocalCoordinator};
use crate::worker::Workers;
use crate::{EngineConfig, EngineError, ErrorKind};

/// What an embedder hands the engine.
#[derive(Clone)]
pub struct EngineParts {
    /// The protocol store.
    pub store: Store,
    /// Where graphs come from.
    pub graphs: Arc<dyn GraphResolver>,
    /// The checkpointer the graphs write to (thread copy, prune, rollback use it).
    pub checkpointer: Arc<dyn Checkpointer>,
    /// The stream bus.
    pub bus: Arc<dyn StreamBus>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
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
    pub(crate) graphs: Arc<dyn GraphResolver>,
    pub(crate) checkpointer: Arc<dyn Checkpointer>,
    pub(crate) bus: Arc<dyn StreamBus>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: EngineConfig,
    pub(crate) coordinator: Arc<dyn Coordinator>,
    pub(crate) expose_stacks: AtomicBool,
    /// Wakes idle workers when a run is queued or a thread frees up.
    pub(crate) wake: Notify,
    /// Runs this instance queued and may start at once, oldest first: a worker claims
    /// them by id, without searching the queue.
    pub(crate) queued_here: Mutex<VecDeque<Uuid>>,
    /// Idle workers and the runs claimed at their creation for them.
    pub(crate) workers: Mutex<Workers>,
    /// Set when the queue may hold a claimable run that `queued_here` does not name
    /// (another instance's, a delayed one now due, one that waited for its thread); a
    /// worker then searches the queue.
    pub(crate) search_queue: AtomicBool,
    /// Tells the delayed-run timer that the earliest due time may have changed.
    pub(crate) delays_changed: Notify,
    /// Asks the announcer to tell other instances that work was queued; requests made
    /// while one announcement is out are answered by the next one.
    pub(crate) announce: Notify,
    /// Wakes the cron scheduler when a cron changes.
    pub(crate) wake_crons: Notify,
    /// Runs executing on this instance.
    pub(crate) active: Mutex<HashMap<Uuid, ActiveRun>>,
    /// Assistants as last read for a run, by id. A run built from one is queued only
    /// while the stored assistant is unchanged (`NewRun::assistant_as_read`), so an
    /// entry another instance made stale costs one retry, never a run built from an
    /// old version; this instance's own changes drop their entry.
    pub(crate) run_assistants: Mutex<HashMap<Uuid, service_types::Assistant>>,
    /// Serializes run creation per thread so the multitask check and the insert of
    /// two concurrent requests cannot interleave.
    pub(crate) thread_gates: Vec<tokio::sync::Mutex<()>>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
}

/// A run executing on this instance: how to stop it and what its stop means.
#[derive(Clone)]
pub(crate) struct ActiveRun {
    pub(crate) cancel: CancellationToken,
    pub(crate) rollback: Arc<AtomicBool>,
}

const THREAD_GATES: usize = 64;

impl Engine {
    /// Builds a single-instance engine; call [`Engine::start`] to run workers and
    /// sweepers.
    pub fn new(parts: EngineParts) -> Self {
        Self::with_coordinator(parts, Arc::new(LocalCoordinator))
    }

    /// Builds an engine that shares its store with other instances through
    /// `coordinator`.
    pub fn with_coordinator(parts: EngineParts, coordinator: Arc<dyn Coordinator>) -> Self {
        let expose_stacks = AtomicBool::new(parts.config.expose_stacks);
        Self {
            inner: Arc::new(Inner {
                store: parts.store,
                graphs: parts.graphs,
                checkpointer: parts.checkpointer,
                bus: parts.bus,
                clock: parts.clock,
                config: parts.config,
                coordinator,
                expose_stacks,
                wake: Notify::new(),
                queued_here: Mutex::new(VecDeque::new()),
                workers: Mutex::new(Workers::default()),
                // What was queued before this instance started is found by a search.
                search_queue: AtomicBool::new(true),
                delays_changed: Notify::new(),
                announce: Notify::new(),
                wake_crons: Notify::new(),
                active: Mutex::new(HashMap::new()),
                run_assistants: Mutex::new(HashMap::new()),
                thread_gates: (0..THREAD_GATES)
                    .map(|_| tokio::sync::Mutex::new(()))
                    .collect(),
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The stream bus.
    pub fn bus(&self) -> &Arc<dyn StreamBus> {
        &self.inner.bus
    }

    /// Whether error stacks and graph-load reasons reach clients.
    pub fn exposes_stacks(&self) -> bool {
        self.inner.expose_stacks.load(Ordering::Relaxed)
    }

    /// Turns stack exposure on or off (it may change after mounting).
    pub fn set_expose_stacks(&self, expose: bool) {
        self.inner.expose_stacks.store(expose, Ordering::Relaxed);
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

    pub(crate) fn active(&self) -> MutexGuard<'_, HashMap<Uuid, ActiveRun>> {
        // The map only holds handles; a panic elsewhere cannot corrupt it.
        self.inner
            .active
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Has a worker search the queue (a worker that claims a run wakes the next, so a
    /// burst drains on every idle worker) and tells the other instances.
    pub(crate) fn wake_workers(&self) {
        self.queue_changed();
        self.announce();
    }

    /// Asks the announcer to tell other instances about queued work, when there are
    /// any: in one process nothing is woken (a wake-up per run costs more than the
    /// run's own hand-overs at low concurrency).
    pub(crate) fn announce(&self) {
        if self.inner.coordinator.announce_spacing().is_some() {
            self.inner.announce.notify_one();
        }
    }

    /// Marks the queue as worth a search and wakes an idle worker to do it.
    pub(crate) fn queue_changed(&self) {
        self.inner.search_queue.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
    }

    /// Hands a run this instance just queued, due now, to its own workers, and tells
    /// the other instances (one of theirs may be idle when all of these are busy).
    pub(crate) fn queue_here(&self, run_id: Uuid) {
        self.queued_here().push_back(run_id);
        self.inner.wake.notify_one();
        self.announce();
    }

    pub(crate) fn queued_here(&self) -> MutexGuard<'_, VecDeque<Uuid>> {
        // Holds only ids; a panic elsewhere cannot corrupt it.
        self.inner
            .queued_here
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn thread_gate(&self, thread_id: Uuid) -> &tokio::sync::Mutex<()> {
        let index = (thread_id.as_u128() % THREAD_GATES as u128) as usize;
        &self.inner.thread_gates[index]
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
                    tracing::error!(graph_id, reason, "graph failed to load");
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
        };
        if kind == ErrorKind::Internal {
            return EngineError::internal(error);
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
