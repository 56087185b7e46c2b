//! Engine settings, read once at boot by the server (or set by an embedder).

use std::time::Duration;

use service_store::SemanticIndex;

use crate::bus::MemoryBusLimits;

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Runs one instance executes at once (SERVICE_RUN_CONCURRENCY).
    pub run_concurrency: usize,
    /// Abort a run executing longer than this (SERVICE_RUN_TIMEOUT_MS); off when `None`.
    pub run_timeout: Option<Duration>,
    /// Send error stacks and graph-load reasons to clients (development).
    pub expose_stacks: bool,
    /// Largest page any list returns (SERVICE_MAX_PAGE_SIZE).
    pub max_page_size: usize,
    /// Time shutdown lets in-flight runs finish (SERVICE_SHUTDOWN_GRACE_MS).
    pub shutdown_grace: Duration,
    /// Bounds of the in-memory stream bus.
    pub bus: MemoryBusLimits,
    /// Lifetime of a recorded Idempotency-Key response.
    pub idempotency_ttl: Duration,
    /// Long-term store items: ttl applied to puts without their own (minutes).
    pub store_default_ttl_minutes: Option<f64>,
    /// Long-term store items: a read extends a live item's expiry.
    pub store_refresh_on_read: bool,
    /// Period of the TTL sweepers (threads and store items).
    pub sweep_interval: Duration,
    /// Threads without their own ttl get this one (minutes).
    pub thread_default_ttl_minutes: Option<f64>,
    /// The semantic index (`store.index`): puts are embedded with it before the store
    /// is called, and a search's `query` ranks by it. The store must be built with its
    /// spec. `None`: `index` and `query` are ignored (`score: null`), as on the peers.
    pub store_index: Option<SemanticIndex>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            run_concurrency: 10,
            run_timeout: None,
            expose_stacks: false,
            max_page_size: 1000,
            shutdown_grace: Duration::from_millis(5000),
            bus: MemoryBusLimits::default(),
            idempotency_ttl: Duration::from_secs(24 * 3600),
            store_default_ttl_minutes: None,
            store_refresh_on_read: true,
            sweep_interval: Duration::from_secs(60 * 60),
            thread_default_ttl_minutes: None,
            store_index: None,
        }
    }
}
