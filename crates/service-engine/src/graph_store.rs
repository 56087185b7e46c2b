//! The long-term store graphs get: the items repository itself, outside every tenant
//! (SPEC: the agent never sees auth), and refused the tenants' reserved root.

use std::sync::Arc;

use async_trait::async_trait;
use service_graph::{GraphError, LongTermStore};
use service_store::{IndexFields, ItemSearch, PutItem, SemanticIndex, Store};
use service_types::{Item, Metadata};

use crate::embedding::embed;
use crate::namespaces::refuse_reserved_root;

/// The long-term store graphs get: the items repository, with the configured default
/// ttl on what they put, embedded with the semantic index when there is one.
pub(crate) fn graph_store(
    store: Store,
    default_ttl: Option<f64>,
    index: Option<SemanticIndex>,
) -> Arc<dyn LongTermStore> {
    Arc::new(StoreBridge {
        store,
        default_ttl,
        index,
    })
}

/// [`LongTermStore`] over the items repository.
struct StoreBridge {
    store: Store,
    default_ttl: Option<f64>,
    index: Option<SemanticIndex>,
}

/// Graphs share the store with clients but never a tenant's part of it.
fn graph_namespace(namespace: &[String]) -> Result<(), GraphError> {
    refuse_reserved_root(namespace).map_err(|error| GraphError::InvalidInput(error.message.clone()))
}

fn graph_error(error: service_store::StoreError) -> GraphError {
    GraphError::store_caused_by(error.message.clone(), error)
}

#[async_trait]
impl LongTermStore for StoreBridge {
    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Metadata,
    ) -> Result<(), GraphError> {
        graph_namespace(namespace)?;
        let vectors = embed(self.index.as_ref(), &value, &IndexFields::Configured)
            .await
            .map_err(graph_error)?;
        let item = PutItem {
            namespace: namespace.to_vec(),
            key: key.to_owned(),
            value,
            ttl_minutes: self.default_ttl,
            vectors,
        };
        self.store.items().put(item).await.map_err(graph_error)
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, GraphError> {
        graph_namespace(namespace)?;
        self.store
            .items()
            .get(namespace, key, true)
            .await
            .map_err(graph_error)
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), GraphError> {
        graph_namespace(namespace)?;
        self.store
            .items()
            .delete(namespace, key)
            .await
            .map_err(graph_error)
    }

    async fn search(
        &self,
        namespace_prefix: &[String],
        limit: usize,
    ) -> Result<Vec<Item>, GraphError> {
        graph_namespace(namespace_prefix)?;
        let search = ItemSearch {
            namespace_prefix: namespace_prefix.to_vec(),
            limit: Some(limit.min(1000)),
            ..ItemSearch::default()
        };
        let items = self
            .store
            .items()
            .search(&search)
            .await
            .map_err(graph_error)?;
        Ok(items.into_iter().map(|found| found.item).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TENANT_ROOT;

    #[test]
    fn graphs_are_refused_the_reserved_root() {
        assert!(graph_namespace(&[TENANT_ROOT.to_owned()]).is_err());
        assert!(graph_namespace(&["memories".to_owned()]).is_ok());
    }

    #[tokio::test]
    async fn a_graphs_put_is_embedded_with_the_configured_fields() {
        use service_store::{ManualClock, WordHashEmbedder};
        use service_store_memory::{MemoryOptions, memory_store};
        let index = SemanticIndex::new(
            Arc::new(WordHashEmbedder::new(16)),
            vec!["text".into()],
            false,
        );
        let clock = Arc::new(ManualClock::new(
            service_types::Timestamp::from_unix_micros(0),
        ));
        let store = memory_store(MemoryOptions::new(clock).with_index(index.spec()));
        let handle = graph_store(store.clone(), None, Some(index.clone()));
        let serde_json::Value::Object(value) = serde_json::json!({"text": "a cat"}) else {
            unreachable!("an object literal")
        };
        handle.put(&["m".to_owned()], "k", value).await.unwrap();
        let search = ItemSearch {
            query: Some(index.query("a cat").await.unwrap()),
            ..ItemSearch::default()
        };
        let found = store.items().search(&search).await.unwrap();
        assert!((found[0].score.expect("scored") - 1.0).abs() < 1e-6);
    }
}
