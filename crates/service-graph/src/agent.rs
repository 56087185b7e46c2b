use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use service_types::{GraphSchema, Metadata};

use crate::capability;
use crate::{
    CheckpointConfig, ChunkStream, GraphError, RunContext, RunInput, RunnableConfig, StateSnapshot,
    StreamOptions,
};

/// Options of [`AgentGraph::get_state`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateOptions {
    /// Include nested subgraph state in the tasks.
    pub subgraphs: bool,
}

/// Options of [`AgentGraph::get_state_history`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryOptions {
    /// Most snapshots to return (the caller applies its default and cap).
    pub limit: Option<usize>,
    /// Only checkpoints older than this checkpoint id.
    pub before: Option<String>,
    /// Only checkpoints whose metadata contains these key/value pairs.
    pub filter: Option<Metadata>,
}

/// One update of a [`AgentGraph::bulk_update_state`] superstep.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StateUpdate {
    /// Values applied through the graph's reducers.
    #[serde(default)]
    pub values: Option<Value>,
    /// A command object (`update`, `goto`) applied like a node's command.
    #[serde(default)]
    pub command: Option<Value>,
    /// The node the update is attributed to.
    #[serde(default)]
    pub as_node: Option<String>,
}

/// An agent the engine can drive (SPEC "The AgentGraph interface").
///
/// `stream` and `get_state` are required. Every other method is optional: its default
/// body answers [`GraphError::CapabilityMissing`] naming the method, which the HTTP
/// layer turns into 422 `agent_capability_missing`.
#[async_trait]
pub trait AgentGraph: Send + Sync {
    /// Starts a run and returns its chunks. `ctx.cancel` must stop execution.
    async fn stream(
        &self,
        input: RunInput,
        options: StreamOptions,
        ctx: RunContext,
    ) -> Result<ChunkStream, GraphError>;

    /// The state at `config` (latest checkpoint of the thread unless it names one).
    async fn get_state(
        &self,
        config: &RunnableConfig,
        options: StateOptions,
    ) -> Result<StateSnapshot, GraphError>;

    /// Snapshots of the thread, newest first.
    async fn get_state_history(
        &self,
        config: &RunnableConfig,
        options: HistoryOptions,
    ) -> Result<Vec<StateSnapshot>, GraphError> {
        let _ = (config, options);
        Err(GraphError::missing(capability::GET_STATE_HISTORY))
    }

    /// Applies `values` through the reducers as if `as_node` had written them; returns
    /// the new checkpoint. An unknown node is [`GraphError::InvalidInput`]
    /// (`Node <x> does not exist`).
    async fn update_state(
        &self,
        config: &RunnableConfig,
        values: Value,
        as_node: Option<String>,
    ) -> Result<CheckpointConfig, GraphError> {
        let _ = (config, values, as_node);
        Err(GraphError::missing(capability::UPDATE_STATE))
    }

    /// Applies supersteps of updates, one checkpoint per superstep; returns the last.
    async fn bulk_update_state(
        &self,
        config: &RunnableConfig,
        supersteps: Vec<Vec<StateUpdate>>,
    ) -> Result<CheckpointConfig, GraphError> {
        let _ = (config, supersteps);
        Err(GraphError::missing(capability::BULK_UPDATE_STATE))
    }

    /// Like [`AgentGraph::stream`], also emitting `events` frames.
    async fn stream_events(
        &self,
        input: RunInput,
        options: StreamOptions,
        ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        let _ = (input, options, ctx);
        Err(GraphError::missing(capability::STREAM_EVENTS))
    }

    /// Runs to the end and returns the final values.
    async fn invoke(
        &self,
        input: RunInput,
        options: StreamOptions,
        ctx: RunContext,
    ) -> Result<Value, GraphError> {
        let _ = (input, options, ctx);
        Err(GraphError::missing(capability::INVOKE))
    }

    /// The graph drawing `{nodes, edges}`; `xray` is the subgraph depth to expand.
    async fn get_graph(&self, xray: u32) -> Result<Value, GraphError> {
        let _ = xray;
        Err(GraphError::missing(capability::GET_GRAPH))
    }

    /// Subgraphs as `(namespace, schema)` pairs, optionally under one namespace.
    async fn get_subgraphs(
        &self,
        namespace: Option<String>,
        recurse: bool,
    ) -> Result<Vec<(String, GraphSchema)>, GraphError> {
        let _ = (namespace, recurse);
        Err(GraphError::missing(capability::GET_SUBGRAPHS))
    }

    /// Whether a run on a discarded thread ([`StreamOptions::thread_is_discarded`])
    /// keeps that thread's checkpoints to itself, leaving none in the saver for the
    /// engine to delete.
    fn keeps_discarded_checkpoints(&self) -> bool {
        false
    }
}
