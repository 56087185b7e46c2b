use std::sync::Arc;

use serde_json::json;
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::RunError;

/// `fail`: node `explode` fails with "boom" caused by "root cause". Its state is
/// echo's, so an echo run on the same thread afterwards succeeds.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("fail")
        .channel(
            "messages",
            Reducer::Append,
            json!({"type": "array", "items": {}}),
        )
        .node("explode", |_state, _ctx| async move {
            let cause = RunError::new("RuntimeError", "root cause");
            Err::<serde_json::Value, NodeError>(
                RunError::new("ValueError", "boom").with_cause(cause).into(),
            )
        })
        .edge(START, "explode")
        .edge("explode", END)
        .compile(checkpointer)
}
