//! The long-term store graphs get: the same operations as the store routes
//! (`ItemOps`), outside every tenant (SPEC: the agent never sees auth), refused the
//! tenants' reserved root and never shown what lies under it. A graph's page has no
//! cap: past the store's page bound it is read in several pages.

use std::sync::Arc;

use async_trait::async_trait;
use service_graph::{GraphError, LongTermStore};
use service_store::Store;
use service_types::{Item, SearchItem, StoreListNamespaces, StorePut, StoreSearch};

use crate::items::ItemOps;
use crate::limits::MAX_SEARCH_LIMIT;
use crate::namespaces::{TENANT_ROOT, refuse_reserved_root};
use crate::{EngineConfig, EngineError};

/// LangGraph's default `limit` of `BaseStore.search`.
const DEFAULT_SEARCH_LIMIT: i64 = 10;

/// LangGraph's default `limit` of `BaseStore.list_namespaces`.
const DEFAULT_NAMESPACE_LIMIT: i64 = 100;

/// The long-term store a graph run gets over `store`, with `config`'s index, default
/// ttl and refresh-on-read: what the engine hands its runs, for embedders that drive
/// graphs themselves.
pub fn long_term_store(store: Store, config: &EngineConfig) -> Arc<dyn LongTermStore> {
    graph_store(ItemOps::new(store, config))
}

pub(crate) fn graph_store(items: ItemOps) -> Arc<dyn LongTermStore> {
    Arc::new(StoreBridge { items })
}

/// [`LongTermStore`] over the engine's item operations.
struct StoreBridge {
    items: ItemOps,
}

/// Graphs share the store with clients but never a tenant's part of it.
fn graph_namespace(namespace: &[String]) -> Result<(), GraphError> {
    refuse_reserved_root(namespace).map_err(graph_error)
}

fn graph_error(error: EngineError) -> GraphError {
    GraphError::store_caused_by(error.message.clone(), error)
}

/// Whether a prefix can reach the reserved root (empty, or a wildcard first label).
fn reaches_reserved_root(prefix: &[String]) -> bool {
    prefix.first().is_none_or(|label| label == "*")
}

fn under_reserved_root(namespace: &[String]) -> bool {
    namespace.first().is_some_and(|label| label == TENANT_ROOT)
}

/// `limit` and `offset` as the routes check them, without the routes' upper bound on
/// `limit`.
fn page(
    limit: Option<i64>,
    offset: Option<i64>,
    default: i64,
) -> Result<(usize, usize), GraphError> {
    let limit = limit.unwrap_or(default);
    if limit < 1 {
        return Err(GraphError::InvalidInput(format!(
            "limit must be at least 1, not {limit}"
        )));
    }
    let offset = crate::limits::offset(offset).map_err(graph_error)?;
    Ok((usize::try_from(limit).unwrap_or(usize::MAX), offset))
}

/// A graph's page of `limit` rows from `offset`, read from the store in pages of the
/// routes' bound (`fetch(store_offset)`), leaving out rows under the reserved root
/// when `hide_root` (then the offset counts visible rows only).
async fn paged<T, Page>(
    (limit, offset): (usize, usize),
    hide_root: bool,
    namespace_of: impl Fn(&T) -> &[String],
    mut fetch: impl FnMut(usize) -> Page,
) -> Result<Vec<T>, GraphError>
where
    Page: Future<Output = Result<Vec<T>, GraphError>>,
{
    let (mut store_offset, mut to_skip) = if hide_root { (0, offset) } else { (offset, 0) };
    let mut found = Vec::new();
    loop {
        let batch = fetch(store_offset).await?;
        let last_page = (batch.len() as i64) < MAX_SEARCH_LIMIT;
        store_offset += batch.len();
        for row in batch {
            if hide_root && under_reserved_root(namespace_of(&row)) {
                continue;
            }
            if to_skip > 0 {
                to_skip -= 1;
                continue;
            }
            found.push(row);
            if found.len() == limit {
                return Ok(found);
            }
        }
        if last_page {
            return Ok(found);
        }
    }
}

#[async_trait]
impl LongTermStore for StoreBridge {
    async fn put(&self, put: StorePut) -> Result<(), GraphError> {
        graph_namespace(&put.namespace)?;
        self.items.put(put).await.map_err(graph_error)
    }

    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, GraphError> {
        graph_namespace(namespace)?;
        self.items
            .get(namespace, key, refresh_ttl)
            .await
            .map_err(graph_error)
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), GraphError> {
        graph_namespace(namespace)?;
        self.items.delete(namespace, key).await.map_err(graph_error)
    }

    async fn search(&self, search: StoreSearch) -> Result<Vec<SearchItem>, GraphError> {
        graph_namespace(&search.namespace_prefix)?;
        let bounds = page(search.limit, search.offset, DEFAULT_SEARCH_LIMIT)?;
        let hide_root = reaches_reserved_root(&search.namespace_prefix);
        paged(
            bounds,
            hide_root,
            |found: &SearchItem| &found.item.namespace,
            |store_offset| {
                let request = StoreSearch {
                    limit: Some(MAX_SEARCH_LIMIT),
                    offset: Some(store_offset as i64),
                    ..search.clone()
                };
                async move { self.items.search(request).await.map_err(graph_error) }
            },
        )
        .await
    }

    async fn list_namespaces(
        &self,
        query: StoreListNamespaces,
    ) -> Result<Vec<Vec<String>>, GraphError> {
        if let Some(prefix) = &query.prefix {
            graph_namespace(prefix)?;
        }
        let bounds = page(query.limit, query.offset, DEFAULT_NAMESPACE_LIMIT)?;
        let hide_root = reaches_reserved_root(query.prefix.as_deref().unwrap_or_default());
        paged(
            bounds,
            hide_root,
            |namespace: &Vec<String>| namespace,
            |store_offset| {
                let request = StoreListNamespaces {
                    limit: Some(MAX_SEARCH_LIMIT),
                    offset: Some(store_offset as i64),
                    ..query.clone()
                };
                async move {
                    self.items
                        .list_namespaces(request)
                        .await
                        .map_err(graph_error)
                }
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use service_store::{ItemSearch, ManualClock, PutItem, SemanticIndex, WordHashEmbedder};
    use service_store_memory::{MemoryOptions, memory_store};
    use service_types::Timestamp;

    use super::*;

    fn store(index: Option<&SemanticIndex>) -> Store {
        let clock = Arc::new(ManualClock::new(Timestamp::from_unix_micros(0)));
        let options = MemoryOptions::new(clock);
        memory_store(match index {
            Some(index) => options.with_index(index.spec()),
            None => options,
        })
    }

    fn put(namespace: &[&str], key: &str) -> StorePut {
        StorePut {
            namespace: namespace.iter().map(|label| (*label).to_owned()).collect(),
            key: key.to_owned(),
            value: json!({"text": "a cat"}),
            ..StorePut::default()
        }
    }

    #[tokio::test]
    async fn graphs_are_refused_the_reserved_root_and_never_shown_it() {
        let store = store(None);
        let handle = long_term_store(store.clone(), &EngineConfig::default());
        let refused = handle.put(put(&[TENANT_ROOT], "k")).await.unwrap_err();
        assert!(matches!(refused, GraphError::Store { .. }), "{refused:?}");
        // A tenant's item, as the items view stores it, beside 1,200 of the graph's.
        let tenant_item = PutItem {
            namespace: vec![TENANT_ROOT.to_owned(), "alice".into()],
            key: "secret".into(),
            value: serde_json::Map::new(),
            ttl_minutes: None,
            vectors: Vec::new(),
        };
        store.items().put(tenant_item).await.unwrap();
        for i in 0..1200 {
            handle
                .put(put(&["m", &format!("n{i}")], "k"))
                .await
                .unwrap();
        }
        let everything = StoreSearch {
            limit: Some(5000),
            ..StoreSearch::default()
        };
        let found = handle.search(everything.clone()).await.unwrap();
        assert_eq!(
            found.len(),
            1200,
            "every item of the graph's, none of the tenant's"
        );
        let skipped = StoreSearch {
            offset: Some(1199),
            ..everything
        };
        assert_eq!(handle.search(skipped).await.unwrap().len(), 1);
        let namespaces = handle
            .list_namespaces(StoreListNamespaces {
                max_depth: Some(1),
                ..StoreListNamespaces::default()
            })
            .await
            .unwrap();
        assert_eq!(namespaces, vec![vec!["m".to_owned()]]);
        let all = handle
            .list_namespaces(StoreListNamespaces {
                limit: Some(5000),
                ..StoreListNamespaces::default()
            })
            .await
            .unwrap();
        assert_eq!(all.len(), 1200);
        let default_page = handle.search(StoreSearch::default()).await.unwrap();
        assert_eq!(default_page.len(), 10, "LangGraph's default limit");
    }

    #[tokio::test]
    async fn a_graphs_put_is_embedded_with_the_configured_fields() {
        let index = SemanticIndex::new(
            Arc::new(WordHashEmbedder::new(16)),
            vec!["text".into()],
            false,
        );
        let store = store(Some(&index));
        let config = EngineConfig {
            store_index: Some(index.clone()),
            ..EngineConfig::default()
        };
        let handle = long_term_store(store.clone(), &config);
        handle.put(put(&["m"], "k")).await.unwrap();
        let search = ItemSearch {
            query: Some(index.query("a cat").await.unwrap()),
            ..ItemSearch::default()
        };
        let found = store.items().search(&search).await.unwrap();
        assert!((found[0].score.expect("scored") - 1.0).abs() < 1e-6);
    }
}
