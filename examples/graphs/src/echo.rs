use std::sync::Arc;

use serde_json::{Value, json};
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};

/// The text of a message: its `content` (objects), itself (strings).
fn content(message: &Value) -> String {
    match message.get("content").unwrap_or(message) {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `echo`: one node appending an AI message that repeats the last message.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("echo")
        .channel(
            "messages",
            Reducer::Append,
            json!({"type": "array", "items": {}}),
        )
        .node("echo", |state, _ctx| async move {
            let last = state["messages"]
                .as_array()
                .and_then(|messages| messages.last())
                .map(content)
                .unwrap_or_default();
            Ok::<_, NodeError>(
                json!({"messages": [{"type": "ai", "content": format!("echo: {last}")}]}),
            )
        })
        .edge(START, "echo")
        .edge("echo", END)
        .compile(checkpointer)
}
