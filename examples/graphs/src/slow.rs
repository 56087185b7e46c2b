use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};

const DEFAULT_DELAY_MS: u64 = 1000;

/// `slow`: node `sleep` waits `delay_ms`, then sets `done`; cancelling the run stops
/// the wait.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("slow")
        .channel(
            "delay_ms",
            Reducer::LastValue,
            json!({"type": ["integer", "null"], "default": DEFAULT_DELAY_MS}),
        )
        .channel("done", Reducer::LastValue, json!({"type": "boolean"}))
        .node("sleep", |state, _ctx| async move {
            let delay = state["delay_ms"].as_u64().unwrap_or(DEFAULT_DELAY_MS);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Ok::<_, NodeError>(json!({"done": true}))
        })
        .edge(START, "sleep")
        .edge("sleep", END)
        .compile(checkpointer)
}
