//! A program of your own on the bundled server: your graphs, and every command, flag,
//! environment knob and configuration block of `service-server` (`src/main.rs` is
//! the whole program). Run it with `cargo run -p service-example-custom-server -- dev`.

use std::sync::Arc;

use serde_json::json;
use service_graph::{Checkpointer, GraphError, GraphRegistry};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::RunError;

/// The graphs this program serves, built with the checkpointer the server owns (the
/// in-memory saver, or PostgreSQL's in `start` with `DATABASE_URL`).
pub fn graphs(checkpointer: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
    let notes = notes(checkpointer)?;
    let mut registry = GraphRegistry::new();
    registry.insert("notes", notes.schema(), Arc::new(notes));
    Ok(registry)
}

/// `notes`: keeps every `note` a thread is sent, and how many there are.
fn notes(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("notes")
        .channel("note", Reducer::LastValue, json!({"type": "string"}))
        .channel(
            "notes",
            Reducer::Append,
            json!({"type": "array", "items": {"type": "string"}}),
        )
        .channel("count", Reducer::LastValue, json!({"type": "integer"}))
        .node("keep", |state, _ctx| async move {
            let note = state["note"]
                .as_str()
                .ok_or_else(|| RunError::new("KeyError", "'note' must be a string"))?;
            let count = state["notes"].as_array().map_or(0, Vec::len) + 1;
            Ok::<_, NodeError>(json!({"notes": [note], "count": count}))
        })
        .edge(START, "keep")
        .edge("keep", END)
        .compile(checkpointer)
}
