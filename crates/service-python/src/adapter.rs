//! `store.adapter` served by the workers: a LangGraph `BaseStore` (Python's, or
//! LangGraph.js's through service-node) the workers load at boot keeps the store items;
//! each operation is one request to a worker, which calls the store's `abatch`
//! (`batch` in JS). The service's own semantics are applied over its answers
//! ([`service_store::AdaptedItems`]).

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use service_store::{StoreAdapter, StoreError, StoreResult};
use service_types::{Item, Metadata};

use crate::worker::Pool;

/// One operation of the adapted store, as the bridges' `adapter` request reads it
/// (bridge.py, service-node's js/bridge/adapter.mjs).
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum AdapterCall<'a> {
    /// `GetOp`.
    Get {
        namespace: &'a [String],
        key: &'a str,
        refresh_ttl: bool,
    },
    /// `PutOp` with a value.
    Put {
        namespace: &'a [String],
        key: &'a str,
        value: &'a Metadata,
        ttl: Option<f64>,
    },
    /// `PutOp` without one.
    Delete {
        namespace: &'a [String],
        key: &'a str,
    },
    /// `SearchOp`s under the prefix, page after page, until the store has no more.
    Items { prefix: &'a [String] },
    /// `ListNamespacesOp`s under the prefix, page after page.
    Namespaces { prefix: &'a [String] },
    /// The store's `sweep_ttl`.
    Sweep,
}

/// A [`StoreAdapter`] answered by the workers' `BaseStore`, whichever their language.
#[derive(Clone, Debug)]
pub(crate) struct WorkerStore {
    pub(crate) pool: Arc<Pool>,
    pub(crate) spec: String,
    pub(crate) supports_ttl: bool,
    pub(crate) sweeps: bool,
}

impl WorkerStore {
    /// One call; whatever fails (no worker to take it, the store raising, an answer
    /// of the wrong shape) is the adapter's failure, said with its class and message
    /// (`StoreError::adapter`: a 503 `store_adapter_failed`, not an opaque 500).
    async fn call<T: DeserializeOwned>(&self, call: AdapterCall<'_>) -> StoreResult<T> {
        let spec = &self.spec;
        let request = self
            .pool
            .request(json!({"op": "adapter", "call": call}), None)
            .map_err(|error| {
                StoreError::adapter(format!("store.adapter {spec} cannot be reached: {error}"))
            })?;
        let answer: Value = request.result().await.map_err(|error| {
            // The client reads the class and message; the log also gets the traceback.
            let run_error = error.to_run_error();
            if let Some(stack) = &run_error.stack {
                tracing::warn!(adapter = %spec, %stack, "store.adapter raised");
            }
            StoreError::adapter(format!("store.adapter {spec} failed: {error}"))
        })?;
        serde_json::from_value(answer).map_err(|error| {
            StoreError::adapter(format!(
                "store.adapter {spec} answered an unexpected shape: {error}"
            ))
        })
    }
}

#[async_trait]
impl StoreAdapter for WorkerStore {
    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: &Metadata,
        ttl_minutes: Option<f64>,
    ) -> StoreResult<()> {
        let call = AdapterCall::Put {
            namespace,
            key,
            value,
            ttl: ttl_minutes,
        };
        self.call::<Value>(call).await.map(drop)
    }

    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>> {
        let call = AdapterCall::Get {
            namespace,
            key,
            refresh_ttl: refresh,
        };
        self.call(call).await
    }

    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()> {
        self.call::<Value>(AdapterCall::Delete { namespace, key })
            .await
            .map(drop)
    }

    async fn items(&self, prefix: &[String]) -> StoreResult<Vec<Item>> {
        self.call(AdapterCall::Items { prefix }).await
    }

    async fn namespaces(&self, prefix: &[String]) -> StoreResult<Vec<Vec<String>>> {
        self.call(AdapterCall::Namespaces { prefix }).await
    }

    fn supports_ttl(&self) -> bool {
        self.supports_ttl
    }

    fn sweeps(&self) -> bool {
        self.sweeps
    }

    async fn sweep_expired(&self) -> StoreResult<u64> {
        self.call(AdapterCall::Sweep).await
    }
}
