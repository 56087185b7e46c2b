//! Calls from the Python side to the server's own checkpointer and long-term store:
//! the graphs' state and memory live in the server, whichever worker runs them.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};
use service_graph::{
    CheckpointConfig, CheckpointListOptions, Checkpointer, GraphError, LongTermStore,
};
use service_types::{JsonText, Metadata, StoreDelete, StoreListNamespaces, StorePut, StoreSearch};

/// The checkpoint a call names: `thread_id`, `checkpoint_ns` and the id under `id`.
fn coordinates(message: &Map<String, Value>, id: &str) -> Result<CheckpointConfig, GraphError> {
    Ok(CheckpointConfig {
        thread_id: text(message, "thread_id")?.to_owned(),
        checkpoint_ns: message
            .get("checkpoint_ns")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        checkpoint_id: message.get(id).and_then(Value::as_str).map(str::to_owned),
    })
}

fn text<'a>(message: &'a Map<String, Value>, key: &str) -> Result<&'a str, GraphError> {
    message
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| GraphError::InvalidInput(format!("malformed bridge call: no {key}")))
}

fn object(value: Option<Value>) -> Metadata {
    match value {
        Some(Value::Object(map)) => map,
        _ => Metadata::new(),
    }
}

fn answer(value: impl serde::Serialize) -> Result<Value, GraphError> {
    serde_json::to_value(value).map_err(|error| GraphError::checkpointer(error.to_string()))
}

/// Serves one call; the answer is JSON for bridge.py.
pub(crate) async fn serve(
    checkpointer: Option<Arc<dyn Checkpointer>>,
    store: Option<Arc<dyn LongTermStore>>,
    mut message: Map<String, Value>,
) -> Result<Value, GraphError> {
    let op = text(&message, "op")?.to_owned();
    if op.starts_with("store.") {
        let store = store
            .ok_or_else(|| GraphError::store("the long-term store is only reachable from a run"))?;
        return store_call(store.as_ref(), &mut message).await;
    }
    let saver = checkpointer
        .ok_or_else(|| GraphError::checkpointer("the server's checkpointer is not attached yet"))?;
    match op.as_str() {
        "cp.get" => answer(
            saver
                .get_tuple(&coordinates(&message, "checkpoint_id")?)
                .await?,
        ),
        "cp.list" => {
            let at = coordinates(&message, "checkpoint_id")?;
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
            answer(saver.list(&at, options).await?)
        }
        "cp.put" => {
            let parent = coordinates(&message, "parent_id")?;
            let id = text(&message, "checkpoint_id")?.to_owned();
            let body = message.remove("checkpoint").unwrap_or(Value::Null);
            let metadata = object(message.remove("metadata"));
            answer(
                saver
                    .put_named(&parent, &id, JsonText::new(&body), metadata)
                    .await?,
            )
        }
        "cp.put_writes" => {
            let at = coordinates(&message, "checkpoint_id")?;
            let task_id = text(&message, "task_id")?.to_owned();
            let writes: Vec<(String, Value)> = serde_json::from_value(
                message.remove("writes").unwrap_or(Value::Null),
            )
            .map_err(|error| GraphError::InvalidInput(format!("malformed writes: {error}")))?;
            // The run whose task wrote them: a stopped run's late writes are refused.
            let run_id = message.get("run_id").and_then(Value::as_str);
            saver
                .put_writes_of_run(&at, &task_id, writes, run_id)
                .await?;
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

/// A store call from bridge.py: the operation in `op`, its arguments in `body`, in the
/// store routes' own shapes.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", content = "body")]
enum StoreCall {
    #[serde(rename = "store.get")]
    Get(StoreGet),
    #[serde(rename = "store.put")]
    Put(StorePut),
    #[serde(rename = "store.delete")]
    Delete(StoreDelete),
    #[serde(rename = "store.search")]
    Search(StoreSearch),
    #[serde(rename = "store.list_namespaces")]
    ListNamespaces(StoreListNamespaces),
}

/// LangGraph's `GetOp`.
#[derive(Debug, Deserialize)]
struct StoreGet {
    namespace: Vec<String>,
    key: String,
    #[serde(default)]
    refresh_ttl: Option<bool>,
}

async fn store_call(
    store: &dyn LongTermStore,
    message: &mut Map<String, Value>,
) -> Result<Value, GraphError> {
    let call = Map::from_iter(
        ["op", "body"]
            .into_iter()
            .filter_map(|key| message.remove(key).map(|value| (key.to_owned(), value))),
    );
    let call = StoreCall::deserialize(Value::Object(call))
        .map_err(|error| GraphError::InvalidInput(format!("malformed store call: {error}")))?;
    match call {
        StoreCall::Get(get) => answer(store.get(&get.namespace, &get.key, get.refresh_ttl).await?),
        StoreCall::Put(put) => {
            store.put(put).await?;
            Ok(Value::Null)
        }
        StoreCall::Delete(delete) => {
            store.delete(&delete.namespace, &delete.key).await?;
            Ok(Value::Null)
        }
        StoreCall::Search(search) => answer(store.search(search).await?),
        StoreCall::ListNamespaces(query) => answer(store.list_namespaces(query).await?),
    }
}
