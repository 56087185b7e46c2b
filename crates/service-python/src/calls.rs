//! Calls from a worker (bridge.py, service-node's js/bridge/) to the server's
//! checkpointer and long-term store: the graphs' state and memory live in the server,
//! whichever worker runs them. Both languages speak the same calls, defined once here
//! as [`Call`].

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};
use service_graph::{
    CheckpointConfig, CheckpointListOptions, Checkpointer, GraphError, LongTermStore,
};
use service_types::{
    ItemTtl, JsonText, Metadata, StoreDelete, StoreListNamespaces, StorePut, StoreSearch,
};

/// One call: the operation in `op`; a checkpointer call's arguments beside it, a store
/// call's under `body` in the store routes' own shapes. Other keys of the message
/// (`call`, `id`) are the worker protocol's.
#[derive(Debug, Deserialize)]
#[serde(tag = "op")]
enum Call {
    /// The checkpoint at these coordinates (the latest without an id).
    #[serde(rename = "cp.get")]
    GetCheckpoint(CheckpointConfig),
    #[serde(rename = "cp.list")]
    ListCheckpoints(ListCheckpoints),
    #[serde(rename = "cp.put")]
    PutCheckpoint(PutCheckpoint),
    #[serde(rename = "cp.put_writes")]
    PutWrites(PutWrites),
    #[serde(rename = "cp.delete_thread")]
    DeleteThread { thread_id: String },
    #[serde(rename = "store.get")]
    StoreGet { body: StoreGet },
    #[serde(rename = "store.put")]
    StorePut { body: GraphPut },
    #[serde(rename = "store.delete")]
    StoreDelete { body: StoreDelete },
    #[serde(rename = "store.search")]
    StoreSearch { body: StoreSearch },
    #[serde(rename = "store.list_namespaces")]
    StoreListNamespaces { body: StoreListNamespaces },
}

/// LangGraph's `alist`: a thread's checkpoints, newest first.
#[derive(Debug, Deserialize)]
struct ListCheckpoints {
    #[serde(flatten)]
    at: CheckpointConfig,
    /// Metadata key/value pairs every listed checkpoint has.
    #[serde(default)]
    filter: Option<Metadata>,
    /// Only checkpoints older than this id.
    #[serde(default)]
    before: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// LangGraph's `aput`: a checkpoint the worker named, after `parent_id`.
#[derive(Debug, Deserialize)]
struct PutCheckpoint {
    thread_id: String,
    #[serde(default)]
    checkpoint_ns: String,
    #[serde(default)]
    parent_id: Option<String>,
    checkpoint_id: String,
    /// The serializer's typed body, kept as the worker wrote it.
    checkpoint: Value,
    #[serde(default)]
    metadata: Metadata,
}

/// LangGraph's `aput_writes`: a task's writes against a checkpoint.
#[derive(Debug, Deserialize)]
struct PutWrites {
    #[serde(flatten)]
    at: CheckpointConfig,
    task_id: String,
    /// `[channel, value]` pairs, the channel prefixed with its write index.
    writes: Vec<(String, Value)>,
    /// The run whose task wrote them: a stopped run's late writes are refused.
    #[serde(default)]
    run_id: Option<String>,
}

/// LangGraph's `GetOp`.
#[derive(Debug, Deserialize)]
struct StoreGet {
    namespace: Vec<String>,
    key: String,
    #[serde(default)]
    refresh_ttl: Option<bool>,
}

/// LangGraph's `PutOp`: the store route's body, except that `ttl` tells "not given"
/// (absent: the configured default) from `None` (`null`: never expires), as
/// LangGraph's `put(ttl=...)` does.
#[derive(Debug, Deserialize)]
struct GraphPut {
    namespace: Vec<String>,
    key: String,
    value: Value,
    #[serde(default)]
    index: Option<Value>,
    #[serde(default, deserialize_with = "graph_ttl")]
    ttl: ItemTtl,
}

fn graph_ttl<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<ItemTtl, D::Error> {
    Ok(match Option::<f64>::deserialize(deserializer)? {
        Some(minutes) => ItemTtl::Minutes(minutes),
        None => ItemTtl::Never,
    })
}

fn answer(value: impl serde::Serialize) -> Result<Value, GraphError> {
    serde_json::to_value(value).map_err(|error| GraphError::checkpointer(error.to_string()))
}

/// Serves one call; the answer is JSON for the worker.
pub(crate) async fn serve(
    checkpointer: Option<Arc<dyn Checkpointer>>,
    store: Option<Arc<dyn LongTermStore>>,
    message: Map<String, Value>,
) -> Result<Value, GraphError> {
    let call = Call::deserialize(Value::Object(message))
        .map_err(|error| GraphError::InvalidInput(format!("malformed bridge call: {error}")))?;
    let store = || {
        store
            .clone()
            .ok_or_else(|| GraphError::store("the long-term store is only reachable from a run"))
    };
    let saver = || {
        checkpointer.clone().ok_or_else(|| {
            GraphError::checkpointer("the server's checkpointer is not attached yet")
        })
    };
    match call {
        Call::GetCheckpoint(at) => answer(saver()?.get_tuple(&at).await?),
        Call::ListCheckpoints(list) => {
            let options = CheckpointListOptions {
                filter: list.filter,
                before: list.before,
                limit: list.limit,
            };
            answer(saver()?.list(&list.at, options).await?)
        }
        Call::PutCheckpoint(put) => {
            let parent = CheckpointConfig {
                thread_id: put.thread_id,
                checkpoint_ns: put.checkpoint_ns,
                checkpoint_id: put.parent_id,
            };
            let body = JsonText::new(&put.checkpoint);
            answer(
                saver()?
                    .put_named(&parent, &put.checkpoint_id, body, put.metadata)
                    .await?,
            )
        }
        Call::PutWrites(put) => {
            saver()?
                .put_writes_of_run(&put.at, &put.task_id, put.writes, put.run_id.as_deref())
                .await?;
            Ok(Value::Null)
        }
        Call::DeleteThread { thread_id } => {
            saver()?.delete_thread(&thread_id).await?;
            Ok(Value::Null)
        }
        Call::StoreGet { body } => answer(
            store()?
                .get(&body.namespace, &body.key, body.refresh_ttl)
                .await?,
        ),
        Call::StorePut { body } => {
            let put = StorePut {
                namespace: body.namespace,
                key: body.key,
                value: body.value,
                index: body.index,
                ttl: body.ttl,
            };
            store()?.put(put).await?;
            Ok(Value::Null)
        }
        Call::StoreDelete { body } => {
            store()?.delete(&body.namespace, &body.key).await?;
            Ok(Value::Null)
        }
        Call::StoreSearch { body } => answer(store()?.search(body).await?),
        Call::StoreListNamespaces { body } => answer(store()?.list_namespaces(body).await?),
    }
}
