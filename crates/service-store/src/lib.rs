//! The store interface of the agent-run service.
//!
//! One trait per repository (assistants, threads, runs, crons, items, idempotency,
//! deliveries), bundled in a [`Store`] that states its [`Capabilities`]. Queries are
//! plain structs a SQL driver can translate; the semantics every driver must share
//! (store filter evaluation, JSON containment, namespace rules, page clamping, sort
//! ties, the delivery state machine, cron schedules) live here once. Time comes from
//! an injected [`Clock`].

pub mod adapter;
mod assistants;
mod clock;
pub mod containment;
mod crons;
mod deliveries;
mod error;
pub mod filter;
mod idempotency;
mod items;
pub mod namespace;
pub mod ordering;
pub mod page;
mod runs;
pub mod schedule;
pub mod semantic;
mod store;
pub mod text;
mod threads;

pub use adapter::{AdaptedItems, StoreAdapter, with_adapter};
pub use assistants::{
    AssistantFilter, AssistantPage, AssistantPatch, AssistantQuery, AssistantSortBy,
    AssistantsRepo, NewAssistant, VersionQuery,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use crons::{CronFilter, CronPatch, CronQuery, CronSortBy, CronsRepo, NewCron, next_run};
pub use deliveries::{AttemptOutcome, DeliveriesRepo, DeliveryQuery, DeliveryRecord};
pub use error::{ErrorKind, StoreError, StoreResult};
pub use filter::StoreFilter;
pub use idempotency::{Begin, IdempotencyRepo, StoredResponse};
pub use items::{ItemSearch, ItemsRepo, PutItem, compare_items, validate_item_ttl};
pub use namespace::NamespaceQuery;
pub use page::PageLimits;
pub use runs::{
    ActiveRunsQuery, AssistantStamp, CancelOutcome, ClaimNext, Claimed, ClaimedRun, NewRun,
    RunListQuery, RunsRepo, Settled, SettledAndMirrored, SettledRun, Settlement, ThreadAndActive,
    ThreadRunCreated, WebhookRequest, final_status, webhook_status,
};
pub use semantic::{
    Embedder, FieldVector, IndexFields, IndexSpec, SemanticIndex, WordHashEmbedder,
};
pub use store::{Capabilities, Store, StoreHealth, StoreParts};
pub use threads::{
    NewThread, StateHold, ThreadFilter, ThreadMatcher, ThreadMirror, ThreadPatch, ThreadQuery,
    ThreadSortBy, ThreadsRepo, TtlChange, validate_ttl,
};
