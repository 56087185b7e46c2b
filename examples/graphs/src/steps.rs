use std::sync::Arc;

use serde_json::{Value, json};
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};

const DEFAULT_N: i64 = 3;

fn count(state: &Value) -> i64 {
    state["count"].as_i64().unwrap_or(0)
}

/// `steps`: node `step` runs once per superstep until `count == n`.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("steps")
        .channel(
            "n",
            Reducer::LastValue,
            json!({"type": ["integer", "null"], "default": DEFAULT_N}),
        )
        .channel("count", Reducer::LastValue, json!({"type": "integer"}))
        .channel(
            "log",
            Reducer::Append,
            json!({"type": "array", "items": {"type": "string"}}),
        )
        .input_keys(&["n", "count", "log"])
        .node("step", |state, ctx| async move {
            let k = count(&state) + 1;
            ctx.write(json!({"step": k}));
            Ok::<_, NodeError>(json!({"count": k, "log": [format!("step {k}")]}))
        })
        .edge(START, "step")
        .conditional_edges(
            "step",
            |state| {
                let n = state["n"].as_i64().unwrap_or(DEFAULT_N);
                if count(state) < n { "step" } else { END }
            },
            &["step", END],
        )
        .compile(checkpointer)
}
