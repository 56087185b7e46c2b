//! Wire types of the agent-run service.
//!
//! Every resource, request body and response body the LangGraph client SDKs exchange
//! with the server, as serde types, plus the SPEC additions (`RunError`, `Delivery`).
//! No I/O lives here: these types are shared by the store, the engine and the HTTP
//! adapter, and their JSON is pinned by golden tests against captured SDK exchanges.

mod assistant;
mod common;
mod cron;
mod delivery;
mod error;
mod item;
mod json_text;
mod openapi;
mod protocol;
mod requests;
mod run;
mod schema;
mod state;
mod thread;

pub use assistant::{Assistant, AssistantVersion};
pub use common::{Config, IfExists, Metadata, SortOrder, Timestamp};
pub use cron::Cron;
pub use delivery::{Delivery, DeliveryStatus};
pub use error::RunError;
pub use item::{Item, ItemTtl, SearchItem};
pub use json_text::JsonText;
pub use protocol::{
    AgentTreeParams, EventParams, EventStreamRequest, EventType, InputRespondParams, InputResponse,
    ProtocolCommand, ProtocolErrorCode, ProtocolEvent, ProtocolResponse, ResponseMeta,
    RunStartParams, UnsubscribeParams,
};
pub use requests::{
    AssistantCreate, AssistantPatch, AssistantSearch, AssistantSortBy, AssistantVersionsQuery,
    BulkCancel, BulkCancelStatus, CronCreate, CronPatch, CronSearch, CronSortBy, ExcludeMetadata,
    HistoryBefore, HistoryQuery, NodeSelection, RunCreate, SetLatest, StoreDelete,
    StoreListNamespaces, StorePut, StoreSearch, StreamModes, Superstep, SuperstepUpdate,
    ThreadCreate, ThreadPatch, ThreadPrune, ThreadSearch, ThreadSortBy, ThreadStateAtCheckpoint,
    ThreadStatePatch, ThreadStateUpdate,
};
pub use run::{
    CancelAction, Durability, IfNotExists, MultitaskStrategy, OnCompletion, OnDisconnect, Run,
    RunStatus, StreamMode,
};
pub use schema::GraphSchema;
pub use state::{Checkpoint, HistorySelect, Interrupt, ThreadState, ThreadTask};
pub use thread::{
    MAX_TTL_MINUTES, PendingInterrupts, PruneStrategy, Thread, ThreadStatus, ThreadTtl, TtlSetting,
    ttl_minutes_valid,
};
