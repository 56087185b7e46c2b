//! The runtime seam between the protocol engine and agents.
//!
//! The engine drives any [`AgentGraph`]: a hand-written agent or the
//! `service-stategraph` runtime. This crate holds that trait, the values that cross it
//! (run input, stream options, chunks, state snapshots, errors), the [`GraphResolver`]
//! that finds graphs by id and the [`GraphSource`] an engine builds it from, the
//! [`LongTermStore`] handle a run may use, and the [`Checkpointer`] trait with its
//! in-memory saver.

mod agent;
pub mod capability;
pub mod checkpoint;
mod chunk;
mod config;
mod error;
mod input;
mod resolver;
mod snapshot;
mod source;
mod stack;
mod store;
pub mod trace_context;

pub use agent::{AgentGraph, HistoryOptions, StateOptions, StateUpdate};
pub use checkpoint::{
    CheckpointListOptions, CheckpointTuple, Checkpointer, InMemorySaver, NamedStep, NewCheckpoint,
    PendingWrite, new_checkpoint_id,
};
pub use chunk::{Chunk, ChunkStream};
pub use config::{CheckpointConfig, RunnableConfig};
pub use error::GraphError;
pub use input::{FinalState, RunContext, RunInput, StreamOptions};
pub use resolver::{GraphLoader, GraphRegistry, GraphResolver};
pub use service_types::NodeSelection;
pub use snapshot::{StateSnapshot, TaskSnapshot};
pub use source::GraphSource;
pub use stack::{capture_stack, with_captured_stack};
pub use store::LongTermStore;
