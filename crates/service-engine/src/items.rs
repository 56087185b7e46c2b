//! The long-term store routes' logic, and the handle graphs get to the same store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::Value;
use service_graph::{GraphError, LongTermStore};
use service_store::{
    FieldVector, IndexFields, ItemSearch, NamespaceQuery, PutItem, SemanticIndex, Store,
    StoreError, StoreFilter,
};
use service_types::{Item, Metadata, SearchItem, StoreListNamespaces, StorePut, StoreSearch};

use crate::limits::{clamped_limit, offset, search_limit};
use crate::{Engine, EngineError, EngineResult, ErrorKind};

/// Checks a namespace: non-empty, every label a non-empty string without `.`.
pub fn validate_namespace(namespace: &[String]) -> EngineResult<()> {
    if namespace.is_empty() {
        return Err(EngineError::bad_request("Namespace cannot be empty."));
    }
    if let Some(label) = namespace
        .iter()
        .find(|label| label.is_empty() || label.contains('.'))
    {
        return Err(EngineError::unprocessable(format!(
            "Namespace label '{label}' must be a non-empty string without periods"
        )));
    }
    Ok(())
}

/// The first label of every tenant's namespaces. The engine adds it for a caller
/// whose scope is a namespace; no request and no graph may name it, so a tenant's
/// items can be neither reached nor planted from outside.
pub const TENANT_ROOT: &str = "@tenant";

/// Refuses a namespace (or prefix) under the reserved root.
pub(crate) fn refuse_reserved_root(namespace: &[String]) -> EngineResult<()> {
    if namespace.first().is_some_and(|label| label == TENANT_ROOT) {
        return Err(EngineError::unprocessable(format!(
            "Namespace label '{TENANT_ROOT}' is reserved for the server"
        )));
    }
    Ok(())
}

/// A tenant's place in the store: the reserved root, then its labels escaped so that
/// no label can be a wildcard (`*`), hold a period, or equal another tenant's.
pub(crate) struct Tenant(Vec<String>);

impl Tenant {
    pub(crate) fn new(labels: &[String]) -> Self {
        let escaped = labels.iter().map(|label| escape_label(label));
        Self(
            std::iter::once(TENANT_ROOT.to_owned())
                .chain(escaped)
                .collect(),
        )
    }

    /// How many labels the tenant's place adds.
    pub(crate) fn depth(&self) -> usize {
        self.0.len()
    }

    /// `namespace` moved under the tenant's place.
    pub(crate) fn inside(&self, namespace: Vec<String>) -> Vec<String> {
        self.0.iter().cloned().chain(namespace).collect()
    }

    /// A stored namespace as the tenant sees it: without its place.
    pub(crate) fn outside(&self, mut namespace: Vec<String>) -> Vec<String> {
        if namespace.starts_with(&self.0) {
            namespace.drain(..self.0.len());
        }
        namespace
    }
}

/// Percent-escapes what a label may not hold or mean: `%` (the escape itself), `.`
/// (the store's separator) and `*` (a wildcard); an empty label becomes `%`, which no
/// escaped label can be.
fn escape_label(label: &str) -> String {
    if label.is_empty() {
        return "%".to_owned();
    }
    let mut escaped = String::with_capacity(label.len());
    for char in label.chars() {
        match char {
            '%' => escaped.push_str("%25"),
            '.' => escaped.push_str("%2E"),
            '*' => escaped.push_str("%2A"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// The vectors of a put, embedded before the store is called (so never inside a
/// database transaction); none without an index, where `index` is ignored as on the
/// peers.
async fn embed(
    index: Option<&SemanticIndex>,
    value: &Metadata,
    which: &IndexFields,
) -> Result<Vec<FieldVector>, StoreError> {
    match index {
        Some(index) => index.vectors(value, which).await,
        None => Ok(Vec::new()),
    }
}

/// An embedder's failure as a client sees it: its cause in the message, 422 when the
/// input was refused, else 503 (`embedding_failed`); nothing was written.
fn embedding_failed(error: StoreError) -> EngineError {
    let kind = match error.kind {
        service_store::ErrorKind::Invalid => ErrorKind::Unprocessable,
        _ => ErrorKind::Unavailable,
    };
    let mut failed = EngineError::new(kind, error.message.clone());
    failed.code = Some("embedding_failed");
    failed.with_source(error)
}

/// A `query` on a store without an index is ignored, as on the peers; said once.
fn ignored_query() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "a store search carried a query but store.index is not configured: results come in recency order with score null"
        );
    }
}

impl Engine {
    /// Stores an item, embedded first when the store has an index (`index: false`
    /// skips, a list of paths replaces the configured fields); the configured default
    /// ttl applies when none is given. An embedder failure fails the put and writes
    /// nothing.
    pub(crate) async fn put_item(&self, body: StorePut) -> EngineResult<()> {
        validate_namespace(&body.namespace)?;
        let Value::Object(value) = body.value else {
            return Err(EngineError::unprocessable("value must be an object"));
        };
        let which = IndexFields::from_request(body.index.as_ref())
            .map_err(|error| EngineError::unprocessable(error.message))?;
        let ttl_minutes = body.ttl.or(self.config().store_default_ttl_minutes);
        crate::limits::check_ttl_minutes(ttl_minutes)?;
        let vectors = embed(self.config().store_index.as_ref(), &value, &which)
            .await
            .map_err(embedding_failed)?;
        let item = PutItem {
            namespace: body.namespace,
            key: body.key,
            value,
            ttl_minutes,
            vectors,
        };
        Ok(self.store().items().put(item).await?)
    }

    /// Reads an item; `refresh` (default: the configured refresh_on_read) extends a
    /// live item's expiry.
    pub(crate) async fn get_item(
        &self,
        namespace: &[String],
        key: &str,
        refresh: Option<bool>,
    ) -> EngineResult<Option<Item>> {
        let refresh = refresh.unwrap_or(self.config().store_refresh_on_read);
        Ok(self.store().items().get(namespace, key, refresh).await?)
    }

    /// Deletes an item (absent is fine).
    pub(crate) async fn delete_item(&self, namespace: &[String], key: &str) -> EngineResult<()> {
        Ok(self.store().items().delete(namespace, key).await?)
    }

    /// Filtered search under a namespace prefix, ranked by `query` when the store has
    /// an index.
    pub(crate) async fn search_items(&self, body: StoreSearch) -> EngineResult<Vec<SearchItem>> {
        let filter = match &body.filter {
            Some(filter) => StoreFilter::from_object(filter)?,
            None => StoreFilter::default(),
        };
        // An empty query is no query, as on the peers (`if op.query`).
        let query = match (
            body.query.filter(|text| !text.is_empty()),
            &self.config().store_index,
        ) {
            (Some(text), Some(index)) => Some(index.query(&text).await.map_err(embedding_failed)?),
            (Some(_), None) => {
                ignored_query();
                None
            }
            (None, _) => None,
        };
        let search = ItemSearch {
            namespace_prefix: body.namespace_prefix,
            filter,
            query,
            limit: search_limit(body.limit)?,
            offset: offset(body.offset)?,
            refresh_ttl: body.refresh_ttl.unwrap_or(false),
        };
        Ok(self.store().items().search(&search).await?)
    }

    /// Lists namespaces.
    pub(crate) async fn list_namespaces(
        &self,
        body: StoreListNamespaces,
    ) -> EngineResult<Vec<Vec<String>>> {
        let max_depth = match body.max_depth {
            Some(depth) if depth < 1 => {
                return Err(EngineError::unprocessable("max_depth must be at least 1"));
            }
            depth => depth.map(|depth| depth as usize),
        };
        let query = NamespaceQuery {
            prefix: body.prefix,
            suffix: body.suffix,
            max_depth,
            limit: Some(clamped_limit(body.limit, 100)?),
            offset: offset(body.offset)?,
        };
        Ok(self.store().items().list_namespaces(&query).await?)
    }

    /// The long-term store handle handed to graph runs.
    pub(crate) fn long_term_store(&self) -> Arc<dyn LongTermStore> {
        Arc::new(StoreBridge {
            store: self.store().clone(),
            default_ttl: self.config().store_default_ttl_minutes,
            index: self.config().store_index.clone(),
        })
    }
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

    #[test]
    fn namespace_labels_must_be_non_empty_without_periods() {
        assert!(validate_namespace(&["a".into(), "b".into()]).is_ok());
        assert_eq!(
            validate_namespace(&[]).unwrap_err().message,
            "Namespace cannot be empty."
        );
        assert!(validate_namespace(&["a.b".into()]).is_err());
        assert!(validate_namespace(&[String::new()]).is_err());
    }

    #[test]
    fn tenant_labels_are_escaped_so_none_is_a_wildcard_or_another_tenants() {
        let place = |label: &str| Tenant::new(&[label.to_owned()]).inside(Vec::new());
        assert_eq!(place("*"), vec![TENANT_ROOT, "%2A"]);
        assert_eq!(place("a.b"), vec![TENANT_ROOT, "a%2Eb"]);
        assert_ne!(place("a%2Eb"), place("a.b"));
        assert_ne!(place(""), place("%"));
        let tenant = Tenant::new(&["memories".to_owned()]);
        let stored = tenant.inside(vec!["memories".into()]);
        assert_eq!(stored, vec![TENANT_ROOT, "memories", "memories"]);
        assert_eq!(tenant.outside(stored), vec!["memories".to_owned()]);
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
        let bridge = StoreBridge {
            store: store.clone(),
            default_ttl: None,
            index: Some(index.clone()),
        };
        let value = serde_json::json!({"text": "a cat"});
        let Value::Object(value) = value else {
            unreachable!("an object literal")
        };
        bridge.put(&["m".to_owned()], "k", value).await.unwrap();
        let search = ItemSearch {
            query: Some(index.query("a cat").await.unwrap()),
            ..ItemSearch::default()
        };
        let found = store.items().search(&search).await.unwrap();
        assert!((found[0].score.expect("scored") - 1.0).abs() < 1e-6);
    }

    #[test]
    fn the_reserved_root_is_refused_to_requests_and_graphs() {
        assert!(refuse_reserved_root(&[TENANT_ROOT.to_owned(), "x".into()]).is_err());
        assert!(refuse_reserved_root(&["x".to_owned(), TENANT_ROOT.into()]).is_ok());
        assert!(graph_namespace(&[TENANT_ROOT.to_owned()]).is_err());
    }
}
