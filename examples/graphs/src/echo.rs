use std::sync::Arc;

use serde_json::json;
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph, message_text};

/// `echo`: one node answering the last message's text (a string or content blocks,
/// as chat front ends send) with an AI message; messages merge as `add_messages`.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("echo")
        .channel(
            "messages",
            Reducer::MergeMessages,
            json!({"type": "array", "items": {}}),
        )
        .node("echo", |state, _ctx| async move {
            let last = state["messages"]
                .as_array()
                .and_then(|messages| messages.last())
                .map(message_text)
                .unwrap_or_default();
            Ok::<_, NodeError>(
                json!({"messages": [{"type": "ai", "content": format!("echo: {last}")}]}),
            )
        })
        .edge(START, "echo")
        .edge("echo", END)
        .compile(checkpointer)
}
