//! `store.index.embed` served by Python (`"./embed.py:embeddings"`, or a LangChain
//! `provider:model` string for providers this server has no native client of): the
//! workers load the object at boot, and each batch of texts is one bridge request.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde_json::json;
use service_store::{Embedder, StoreError, StoreResult};

use crate::worker::Pool;

/// An [`Embedder`] answered by the bridge's workers. Built before the bridge starts
/// (the store index is configured first); [`crate::Bridge::attach_embedder`] connects it.
#[derive(Clone)]
pub struct PythonEmbedder {
    spec: String,
    dims: usize,
    pool: Arc<OnceLock<Arc<Pool>>>,
}

impl std::fmt::Debug for PythonEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PythonEmbedder")
            .field("spec", &self.spec)
            .field("dims", &self.dims)
            .field("attached", &self.pool.get().is_some())
            .finish()
    }
}

impl PythonEmbedder {
    /// The embedder `spec` names, producing vectors of `dims`.
    pub fn new(spec: impl Into<String>, dims: usize) -> Self {
        Self {
            spec: spec.into(),
            dims,
            pool: Arc::new(OnceLock::new()),
        }
    }

    /// What the workers load (`BridgeOptions::embed`).
    pub fn spec(&self) -> &str {
        &self.spec
    }

    pub(crate) fn attach(&self, pool: &Arc<Pool>) {
        // One bridge per server: a second attach keeps the first.
        let _ = self.pool.set(Arc::clone(pool));
    }
}

#[async_trait]
impl Embedder for PythonEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }

    async fn embed(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
        let pool = self
            .pool
            .get()
            .ok_or_else(|| StoreError::transient("the Python bridge is not running yet"))?;
        let request = pool
            .request(json!({"op": "embed", "texts": texts}), None)
            .map_err(|error| StoreError::transient(error.to_string()))?;
        let answer = request
            .result()
            .await
            .map_err(|error| StoreError::unexpected(format!("{} failed: {error}", self.spec)))?;
        serde_json::from_value(answer).map_err(|error| {
            StoreError::unexpected(format!(
                "{} did not return a list of vectors: {error}",
                self.spec
            ))
        })
    }
}
