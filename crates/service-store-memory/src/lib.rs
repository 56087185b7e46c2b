//! The in-memory driver of the service store: development, tests and the
//! single-instance production path.
//!
//! State lives behind `parking_lot` mutexes that are never held across an `.await`
//! (every method body is synchronous inside). Threads, runs, crons and deliveries
//! share one lock because their changes are atomic together (a thread delete
//! cascades, a settle writes the delivery row); items, assistants and idempotency
//! keys have their own. Secondary indexes keep the common calls off full scans: runs
//! by thread, the pending-run queue, crons by thread, deliveries by run, items in a
//! `BTreeMap` keyed by namespace path so a prefix is a range scan, and per namespace an
//! equality index over the items' top-level scalars for filtered searches. Built with
//! an [`IndexSpec`], items keep their vectors and a query ranks the candidates the
//! prefix and filter leave by exact cosine similarity.

mod assistants;
mod core;
mod crons;
mod deliveries;
mod idempotency;
mod item_index;
mod items;
mod runs;
mod threads;
mod vector_arena;

use std::sync::Arc;

use async_trait::async_trait;
use service_graph::InMemorySaver;
use service_store::{Clock, IndexSpec, PageLimits, Store, StoreHealth, StoreParts, StoreResult};

/// Construction options of the memory driver.
#[derive(Clone, Debug)]
pub struct MemoryOptions {
    /// Source of "now" for every timestamp, TTL and schedule.
    pub clock: Arc<dyn Clock>,
    /// Page bounds (SERVICE_MAX_PAGE_SIZE).
    pub limits: PageLimits,
    /// The semantic index (`store.index`); `None` refuses vectors and queries.
    pub index: Option<IndexSpec>,
    /// The checkpointer the runs use, when it is in memory: a claim reads whether the
    /// run's thread has a checkpoint there ([`service_store::ClaimedRun`]). Without it
    /// a claim reports that it may have one.
    pub checkpoints: Option<Arc<InMemorySaver>>,
}

impl MemoryOptions {
    /// Options with the wall clock and default page bounds.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            limits: PageLimits::default(),
            index: None,
            checkpoints: None,
        }
    }

    /// Lets claims see the checkpoints `saver` keeps (the runs' checkpointer).
    pub fn with_checkpoints(mut self, saver: Arc<InMemorySaver>) -> Self {
        self.checkpoints = Some(saver);
        self
    }

    /// Holds vectors of `spec.dims` and ranks searches by them (`hnsw` changes
    /// nothing here: the scan is always exact).
    pub fn with_index(mut self, spec: IndexSpec) -> Self {
        self.index = Some(spec);
        self
    }

    /// Sets the largest page any list returns.
    pub fn with_max_page_size(mut self, max_page_size: usize) -> Self {
        self.limits = PageLimits::new(max_page_size);
        self
    }
}

/// Builds an empty in-memory [`Store`] with every repository, deliveries included.
pub fn memory_store(options: MemoryOptions) -> Store {
    let env = Env {
        clock: options.clock,
        limits: options.limits,
        index: options.index,
        checkpoints: options.checkpoints,
    };
    let assistants = Arc::new(assistants::MemoryAssistants::new(env.clone()));
    let core = Arc::new(core::MemoryCore::new(env.clone(), assistants.clone()));
    Store::new(StoreParts {
        assistants,
        threads: core.clone(),
        runs: core.clone(),
        crons: core.clone(),
        items: Arc::new(items::MemoryItems::new(env.clone())),
        idempotency: Arc::new(idempotency::MemoryIdempotency::default()),
        deliveries: Some(core),
        health: Arc::new(InProcess),
        durable: false,
        semantic_search: options.index.is_some(),
    })
}

/// The store lives in this process: it is up as long as the process is.
#[derive(Debug)]
struct InProcess;

#[async_trait]
impl StoreHealth for InProcess {
    async fn ping(&self) -> StoreResult<()> {
        Ok(())
    }
}

/// What every repository of this driver needs.
#[derive(Clone, Debug)]
struct Env {
    clock: Arc<dyn Clock>,
    limits: PageLimits,
    index: Option<IndexSpec>,
    checkpoints: Option<Arc<InMemorySaver>>,
}
