//! Names of the optional [`AgentGraph`](crate::AgentGraph) methods, as SPEC names
//! them; a [`GraphError::CapabilityMissing`](crate::GraphError) carries one of these.

/// `get_state_history`.
pub const GET_STATE_HISTORY: &str = "getStateHistory";
/// `update_state`.
pub const UPDATE_STATE: &str = "updateState";
/// `bulk_update_state`.
pub const BULK_UPDATE_STATE: &str = "bulkUpdateState";
/// `stream_events`.
pub const STREAM_EVENTS: &str = "streamEvents";
/// `invoke`.
pub const INVOKE: &str = "invoke";
/// `get_graph`.
pub const GET_GRAPH: &str = "getGraphAsync";
/// `get_subgraphs`.
pub const GET_SUBGRAPHS: &str = "getSubgraphsAsync";
