//! A small LangGraph-style runtime that implements
//! [`AgentGraph`](service_graph::AgentGraph) on top of any
//! [`Checkpointer`](service_graph::Checkpointer).
//!
//! State is a JSON object with one channel per key, each with a [`Reducer`]. Nodes
//! are async functions of the state returning an update or a [`Command`]; edges are
//! static or conditional. Execution is Pregel-style: every superstep runs the pending
//! nodes concurrently, applies their writes through the reducers and writes one
//! checkpoint. Nodes may pause with [`NodeContext::interrupt`] and are resumed by
//! interrupt id; runs may pause before or after nodes; any checkpoint can be resumed
//! or forked. A compiled graph can be a node of another ([`StateGraph::subgraph`]),
//! with checkpoints under a namespace of its own.

mod channel;
mod compiled;
mod context;
mod driven;
mod emit;
mod graph;
mod messages;
mod node;
mod pregel;
mod resume;
mod schema;
mod start;
mod stored;
mod subgraph;
mod update;
mod write_behind;

pub use channel::{Reducer, ReducerFn};
pub use compiled::CompiledGraph;
pub use context::{NodeContext, StreamWriter};
pub use graph::StateGraph;
pub use messages::{REMOVE_ALL_MESSAGES, message_text};
pub use node::{Command, NodeError, NodeOutput};

/// The virtual node every run starts from.
pub const START: &str = "__start__";
/// The virtual node that ends a run.
pub const END: &str = "__end__";
/// The default most supersteps one run may take.
pub const DEFAULT_RECURSION_LIMIT: u32 = 25;
