use serde::{Deserialize, Serialize};

/// JSON schemas of a graph, as `/assistants/{id}/schemas` returns them (with
/// `graph_id`) and `/subgraphs` lists them (without).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GraphSchema {
    /// The graph; absent in subgraph listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_id: Option<String>,
    /// Schema of the run input.
    #[serde(default)]
    pub input_schema: Option<serde_json::Value>,
    /// Schema of the run output.
    #[serde(default)]
    pub output_schema: Option<serde_json::Value>,
    /// Schema of the whole state.
    #[serde(default)]
    pub state_schema: Option<serde_json::Value>,
    /// Schema of `config.configurable`.
    #[serde(default)]
    pub config_schema: Option<serde_json::Value>,
    /// Schema of the run context.
    #[serde(default)]
    pub context_schema: Option<serde_json::Value>,
}
