use std::sync::Arc;

use serde_json::{Value, json};
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};

use crate::approval;

/// `nested`: `plan` logs the topic, the `approval` graph runs as subgraph node
/// `review` (its interrupt pauses this graph until resumed here), `publish` logs the
/// outcome.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    let review = approval::graph(Arc::clone(&checkpointer))?;
    StateGraph::new("nested")
        .channel("topic", Reducer::LastValue, json!({"type": "string"}))
        .channel("draft", Reducer::LastValue, json!({"type": "string"}))
        .channel("status", Reducer::LastValue, json!({"type": "string"}))
        .channel(
            "log",
            Reducer::Append,
            json!({"type": "array", "items": {}}),
        )
        .node("plan", |state, _ctx| async move {
            let topic = state["topic"].as_str().unwrap_or_default().to_owned();
            Ok::<_, NodeError>(json!({"log": [format!("plan {topic}")]}))
        })
        .subgraph("review", &review)
        .node("publish", |state, _ctx| async move {
            let status = state["status"].as_str().map(str::to_owned);
            let line = match status {
                Some(status) => format!("publish {status}"),
                None => "publish".to_owned(),
            };
            Ok::<_, NodeError>(json!({"log": [Value::String(line)]}))
        })
        .edge(START, "plan")
        .edge("plan", "review")
        .edge("review", "publish")
        .edge("publish", END)
        .compile(checkpointer)
}
