//! The bundle of repositories a driver provides, and what it can do.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::{
    AssistantsRepo, CronsRepo, DeliveriesRepo, IdempotencyRepo, ItemsRepo, RunsRepo, StoreResult,
    ThreadsRepo,
};

/// Whether the service behind a store answers: what a health check asks.
#[async_trait]
pub trait StoreHealth: Send + Sync {
    /// One cheap round trip to the backing service (`Ok` when there is none); a
    /// failure is `Transient` when the service is unreachable.
    async fn ping(&self) -> StoreResult<()>;
}

/// What a store supports beyond the required repositories.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Rows survive a restart (warn when the webhook schedule does not).
    pub durable: bool,
    /// A deliveries repository exists; without it webhooks degrade to one
    /// best-effort POST without delivery headers.
    pub deliveries: bool,
    /// Item search ranks by a semantic `query`; otherwise the query is ignored.
    pub semantic_search: bool,
}

/// The repositories a driver hands over to build a [`Store`].
#[derive(Clone)]
pub struct StoreParts {
    /// Assistants.
    pub assistants: Arc<dyn AssistantsRepo>,
    /// Threads.
    pub threads: Arc<dyn ThreadsRepo>,
    /// Runs.
    pub runs: Arc<dyn RunsRepo>,
    /// Crons.
    pub crons: Arc<dyn CronsRepo>,
    /// Store items.
    pub items: Arc<dyn ItemsRepo>,
    /// Idempotency keys.
    pub idempotency: Arc<dyn IdempotencyRepo>,
    /// Webhook deliveries, when the driver records them.
    pub deliveries: Option<Arc<dyn DeliveriesRepo>>,
    /// The health check.
    pub health: Arc<dyn StoreHealth>,
    /// Whether rows survive a restart.
    pub durable: bool,
    /// Whether item search is semantic.
    pub semantic_search: bool,
}

/// Every repository of one driver; cheap to clone.
#[derive(Clone)]
pub struct Store {
    assistants: Arc<dyn AssistantsRepo>,
    threads: Arc<dyn ThreadsRepo>,
    runs: Arc<dyn RunsRepo>,
    crons: Arc<dyn CronsRepo>,
    items: Arc<dyn ItemsRepo>,
    idempotency: Arc<dyn IdempotencyRepo>,
    deliveries: Option<Arc<dyn DeliveriesRepo>>,
    health: Arc<dyn StoreHealth>,
    capabilities: Capabilities,
}

impl Store {
    /// Bundles a driver's repositories; capabilities follow from the parts.
    pub fn new(parts: StoreParts) -> Self {
        let capabilities = Capabilities {
            durable: parts.durable,
            deliveries: parts.deliveries.is_some(),
            semantic_search: parts.semantic_search,
        };
        Self {
            assistants: parts.assistants,
            threads: parts.threads,
            runs: parts.runs,
            crons: parts.crons,
            items: parts.items,
            idempotency: parts.idempotency,
            deliveries: parts.deliveries,
            health: parts.health,
            capabilities,
        }
    }

    /// The repositories this store was built from, so one can be wrapped (to count
    /// or delay its calls, say) and a store built again around the rest.
    pub fn parts(&self) -> StoreParts {
        StoreParts {
            assistants: self.assistants.clone(),
            threads: self.threads.clone(),
            runs: self.runs.clone(),
            crons: self.crons.clone(),
            items: self.items.clone(),
            idempotency: self.idempotency.clone(),
            deliveries: self.deliveries.clone(),
            health: self.health.clone(),
            durable: self.capabilities.durable,
            semantic_search: self.capabilities.semantic_search,
        }
    }

    /// What this store supports.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// Assistants.
    pub fn assistants(&self) -> &dyn AssistantsRepo {
        self.assistants.as_ref()
    }

    /// Threads.
    pub fn threads(&self) -> &dyn ThreadsRepo {
        self.threads.as_ref()
    }

    /// Runs (the queue).
    pub fn runs(&self) -> &dyn RunsRepo {
        self.runs.as_ref()
    }

    /// Crons.
    pub fn crons(&self) -> &dyn CronsRepo {
        self.crons.as_ref()
    }

    /// Store items.
    pub fn items(&self) -> &dyn ItemsRepo {
        self.items.as_ref()
    }

    /// Idempotency keys.
    pub fn idempotency(&self) -> &dyn IdempotencyRepo {
        self.idempotency.as_ref()
    }

    /// Webhook deliveries, when recorded.
    pub fn deliveries(&self) -> Option<&dyn DeliveriesRepo> {
        self.deliveries.as_deref()
    }

    /// Whether the service behind the store answers (see [`StoreHealth::ping`]).
    pub async fn ping(&self) -> StoreResult<()> {
        self.health.ping().await
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for StoreParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreParts")
            .field("durable", &self.durable)
            .finish_non_exhaustive()
    }
}
