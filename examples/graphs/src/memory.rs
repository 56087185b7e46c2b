use std::sync::Arc;

use serde_json::{Map, Value, json};
use service_graph::{Checkpointer, GraphError};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::{RunError, StorePut, StoreSearch};

/// Most items counted under one namespace.
const SEARCH_LIMIT: i64 = 1000;

fn required<'a>(state: &'a Value, key: &str) -> Result<&'a str, NodeError> {
    state[key]
        .as_str()
        .ok_or_else(|| RunError::new("KeyError", format!("'{key}' must be a string")).into())
}

/// `memory`: stores `{"text": text}` under `["memories", user]` / `key` in the
/// long-term store, then counts the items of that namespace.
pub(crate) fn graph(checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
    StateGraph::new("memory")
        .channel("user", Reducer::LastValue, json!({"type": "string"}))
        .channel("key", Reducer::LastValue, json!({"type": "string"}))
        .channel("text", Reducer::LastValue, json!({"type": "string"}))
        .channel("count", Reducer::LastValue, json!({"type": "integer"}))
        .node("remember", |state, ctx| async move {
            let store = ctx.store()?;
            let namespace = vec!["memories".to_owned(), required(&state, "user")?.to_owned()];
            let mut value = Map::new();
            value.insert("text".into(), state["text"].clone());
            store
                .put(StorePut {
                    namespace: namespace.clone(),
                    key: required(&state, "key")?.to_owned(),
                    value: Value::Object(value),
                    ..StorePut::default()
                })
                .await?;
            let search = StoreSearch {
                namespace_prefix: namespace,
                limit: Some(SEARCH_LIMIT),
                ..StoreSearch::default()
            };
            let count = store.search(search).await?.len();
            Ok::<_, NodeError>(json!({"count": count}))
        })
        .edge(START, "remember")
        .edge("remember", END)
        .compile(checkpointer)
}
