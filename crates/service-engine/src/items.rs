//! The long-term store's operations, one implementation behind both doors: the items
//! view clients reach (`views/items.rs`) and the handle graphs get (`graph_store.rs`).

use serde_json::Value;
use service_store::{
    IndexFields, ItemSearch, NamespaceQuery, PutItem, SemanticIndex, Store, StoreFilter,
};
use service_types::{Item, SearchItem, StoreListNamespaces, StorePut, StoreSearch};

use crate::EngineConfig;
use crate::embedding::{embed, embedding_failed, ignored_query};
use crate::limits::{clamped_limit, offset, search_limit};
use crate::namespaces::validate_namespace;
use crate::{EngineError, EngineResult};

/// The store items repository with the configured index, default ttl and
/// refresh-on-read applied. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ItemOps {
    store: Store,
    default_ttl_minutes: Option<f64>,
    refresh_on_read: bool,
    index: Option<SemanticIndex>,
}

impl ItemOps {
    pub(crate) fn new(store: Store, config: &EngineConfig) -> Self {
        Self {
            store,
            default_ttl_minutes: config.store_default_ttl_minutes,
            refresh_on_read: config.store_refresh_on_read,
            index: config.store_index.clone(),
        }
    }

    /// Stores an item, embedded first when the store has an index (`index: false`
    /// skips, a list of paths replaces the configured fields); the configured default
    /// ttl applies when none is given. An embedder failure fails the put and writes
    /// nothing.
    pub(crate) async fn put(&self, body: StorePut) -> EngineResult<()> {
        validate_namespace(&body.namespace)?;
        let Value::Object(value) = body.value else {
            return Err(EngineError::unprocessable("value must be an object"));
        };
        let which = IndexFields::from_request(body.index.as_ref())
            .map_err(|error| EngineError::unprocessable(error.message))?;
        let ttl_minutes = body.ttl.resolve(self.default_ttl_minutes);
        crate::limits::check_ttl_minutes(ttl_minutes)?;
        let vectors = embed(self.index.as_ref(), &value, &which)
            .await
            .map_err(embedding_failed)?;
        let item = PutItem {
            namespace: body.namespace,
            key: body.key,
            value,
            ttl_minutes,
            vectors,
        };
        Ok(self.store.items().put(item).await?)
    }

    /// Reads an item; `refresh` (default: the configured refresh_on_read) extends a
    /// live item's expiry.
    pub(crate) async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: Option<bool>,
    ) -> EngineResult<Option<Item>> {
        let refresh = refresh.unwrap_or(self.refresh_on_read);
        Ok(self.store.items().get(namespace, key, refresh).await?)
    }

    /// Deletes an item (absent is fine).
    pub(crate) async fn delete(&self, namespace: &[String], key: &str) -> EngineResult<()> {
        Ok(self.store.items().delete(namespace, key).await?)
    }

    /// Filtered search under a namespace prefix, ranked by `query` when the store has
    /// an index.
    pub(crate) async fn search(&self, body: StoreSearch) -> EngineResult<Vec<SearchItem>> {
        let filter = match &body.filter {
            Some(filter) => StoreFilter::from_object(filter)?,
            None => StoreFilter::default(),
        };
        // An empty query is no query, as on the peers (`if op.query`).
        let query = match (body.query.filter(|text| !text.is_empty()), &self.index) {
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
        Ok(self.store.items().search(&search).await?)
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
        Ok(self.store.items().list_namespaces(&query).await?)
    }
}
