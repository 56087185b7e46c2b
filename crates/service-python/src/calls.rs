//! Calls from the Python side to the server's own checkpointer and long-term store:
//! the graphs' state and memory live in the server, whichever worker runs them.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};
use service_graph::{
    CheckpointConfig, CheckpointListOptions, Checkpointer, GraphError, LongTermStore,
};
use service_types::{JsonText, Metadata};

#[derive(Deserialize)]
struct Coordinates {
    thread_id: String,
    #[serde(default)]
    checkpoint_ns: String,
    #[serde(default)]
    checkpoint_id: Option<String>,
}

impl Coordinates {
    fn config(self) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: self.thread_id,
            checkpoint_ns: self.checkpoint_ns,
            checkpoint_id: self.checkpoint_id,
        }
    }
}

#[derive(Deserialize)]
struct Key {
    namespace: Vec<String>,
    #[serde(default)]
    key: String,
}

fn arguments<T: for<'de> Deserialize<'de>>(message: &Map<String, Value>) -> Result<T, GraphError> {
    T::deserialize(Value::Object(message.clone()))
        .map_err(|error| GraphError::InvalidInput(format!("malformed bridge call: {error}")))
}

fn text<'a>(message: &'a Map<String, Value>, key: &str) -> Result<&'a str, GraphError> {
    message
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| GraphError::InvalidInput(format!("malformed bridge call: no {key}")))
}

fn object(value: Option<&Value>) -> Metadata {
    value
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn answer(value: impl serde::Serialize) -> Result<Value, GraphError> {
    serde_json::to_value(value).map_err(|error| GraphError::checkpointer(error.to_string()))
}

/// Serves one call; the answer is JSON for bridge.py.
pub(crate) async fn serve(
    checkpointer: Option<Arc<dyn Checkpointer>>,
    store: Option<Arc<dyn LongTermStore>>,
    message: Map<String, Value>,
) -> Result<Value, GraphError> {
    let op = text(&message, "op")?;
    if let Some(op) = op.strip_prefix("store.") {
        let store = store
            .ok_or_else(|| GraphError::store("the long-term store is only reachable from a run"))?;
        return store_call(store.as_ref(), op, &message).await;
    }
    let saver = checkpointer
        .ok_or_else(|| GraphError::checkpointer("the server's checkpointer is not attached yet"))?;
    match op {
        "cp.get" => {
            let at: Coordinates = arguments(&message)?;
            answer(saver.get_tuple(&at.config()).await?)
        }
        "cp.list" => {
            let at: Coordinates = arguments(&message)?;
            let options = CheckpointListOptions {
                filter: message.get("filter").and_then(Value::as_object).cloned(),
                before: message
                    .get("before")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                limit: message
                    .get("limit")
                    .and_then(Value::as_u64)
                    .and_then(|limit| usize::try_from(limit).ok()),
            };
            answer(saver.list(&at.config(), options).await?)
        }
        "cp.put" => {
            let parent = CheckpointConfig {
                thread_id: text(&message, "thread_id")?.to_owned(),
                checkpoint_ns: message
                    .get("checkpoint_ns")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                checkpoint_id: message
                    .get("parent_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            };
            let body = message.get("checkpoint").cloned().unwrap_or(Value::Null);
            let stored = saver
                .put_named(
                    &parent,
                    text(&message, "checkpoint_id")?,
                    JsonText::new(&body),
                    object(message.get("metadata")),
                )
                .await?;
            answer(stored)
        }
        "cp.put_writes" => {
            let at: Coordinates = arguments(&message)?;
            let task_id = text(&message, "task_id")?.to_owned();
            let writes: Vec<(String, Value)> =
                serde_json::from_value(message.get("writes").cloned().unwrap_or(Value::Null))
                    .map_err(|error| {
                        GraphError::InvalidInput(format!("malformed writes: {error}"))
                    })?;
            saver.put_writes(&at.config(), &task_id, writes).await?;
            Ok(Value::Null)
        }
        "cp.delete_thread" => {
            saver.delete_thread(text(&message, "thread_id")?).await?;
            Ok(Value::Null)
        }
        other => Err(GraphError::InvalidInput(format!(
            "unknown bridge call {other}"
        ))),
    }
}

async fn store_call(
    store: &dyn LongTermStore,
    op: &str,
    message: &Map<String, Value>,
) -> Result<Value, GraphError> {
    let key: Key = arguments(message)?;
    match op {
        "get" => answer(store.get(&key.namespace, &key.key).await?),
        "put" => {
            store
                .put(&key.namespace, &key.key, object(message.get("value")))
                .await?;
            Ok(Value::Null)
        }
        "delete" => {
            store.delete(&key.namespace, &key.key).await?;
            Ok(Value::Null)
        }
        "search" => {
            let limit = message
                .get("limit")
                .and_then(Value::as_u64)
                .and_then(|limit| usize::try_from(limit).ok())
                .unwrap_or(10);
            answer(store.search(&key.namespace, limit).await?)
        }
        other => Err(GraphError::InvalidInput(format!(
            "unknown bridge call store.{other}"
        ))),
    }
}
