//! The protocol engine: run queue and workers, multitask strategies, the stream bus
//! with replay, the long-term store bridge, TTL sweepers, and typed errors. No HTTP
//! here; the axum adapter maps these calls and errors onto routes.

mod active;
mod assistants;
pub mod auth;
pub mod bus;
mod callbacks;
mod cancel_cause;
mod config;
pub mod coordination;
mod crons;
mod deliveries;
mod drive;
mod embedding;
mod engine;
mod error;
mod fence;
mod frames;
mod graph_store;
mod health;
mod idempotency;
mod invoke;
mod items;
mod join;
mod lifecycle;
pub mod limits;
pub mod metrics;
mod namespaces;
mod outcome;
pub mod protocol;
mod recovery;
mod run_options;
mod runs;
mod scheduler;
mod settle;
mod state_edit;
mod sweep;
mod threads;
pub mod views;
mod webhooks;
mod within;
mod worker;

pub use assistants::AssistantSearchPage;
pub use auth::Caller;
pub use config::EngineConfig;
pub use crons::CronSearchPage;
pub use engine::{Engine, EngineParts};
pub use error::{EngineError, EngineResult, ErrorDetail, ErrorKind};
pub use graph_store::long_term_store;
pub use join::{RunStream, RunToJoin, run_not_found};
pub use namespaces::{TENANT_ROOT, validate_namespace};
pub use run_options::{RunOptions, RunOptionsError};
pub use runs::{RunTarget, validate_run_body};
pub use threads::ThreadSearchPage;
pub use webhooks::{Outgoing, Webhooks};
