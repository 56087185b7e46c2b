use std::sync::Arc;

use serde_json::{Value, json};
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};

fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `approval`: `draft` writes a draft, `review` interrupts for approval.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("approval")
        .channel("topic", Reducer::LastValue, json!({"type": "string"}))
        .channel("draft", Reducer::LastValue, json!({"type": "string"}))
        .channel("status", Reducer::LastValue, json!({"type": "string"}))
        .node("draft", |state, _ctx| async move {
            Ok::<_, NodeError>(json!({"draft": format!("draft for {}", text(&state["topic"]))}))
        })
        .node("review", |state, ctx| async move {
            let answer = ctx.interrupt(json!({"question": "approve?", "draft": state["draft"]}))?;
            let status = if answer == Value::Bool(true) {
                "approved"
            } else {
                "rejected"
            };
            Ok::<_, NodeError>(json!({"status": status}))
        })
        .edge(START, "draft")
        .edge("draft", "review")
        .edge("review", END)
        .compile(checkpointer)
}
