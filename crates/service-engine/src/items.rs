//! The long-term store's engine calls, behind the items view (`views/items.rs`).

use serde_json::Value;
use service_store::{ItemSearch, NamespaceQuery, PutItem, StoreFilter};
use service_types::{Item, SearchItem, StoreListNamespaces, StorePut, StoreSearch};

use crate::limits::{clamped_limit, offset, search_limit};
use crate::namespaces::validate_namespace;
use crate::{Engine, EngineError, EngineResult};

impl Engine {
    /// Stores an item; the configured default ttl applies when none is given.
    pub(crate) async fn put_item(&self, body: StorePut) -> EngineResult<()> {
        validate_namespace(&body.namespace)?;
        let Value::Object(value) = body.value else {
            return Err(EngineError::unprocessable("value must be an object"));
        };
        let ttl_minutes = body.ttl.or(self.config().store_default_ttl_minutes);
        crate::limits::check_ttl_minutes(ttl_minutes)?;
        let item = PutItem {
            namespace: body.namespace,
            key: body.key,
            value,
            ttl_minutes,
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

    /// Filtered search under a namespace prefix.
    pub(crate) async fn search_items(&self, body: StoreSearch) -> EngineResult<Vec<SearchItem>> {
        let filter = match &body.filter {
            Some(filter) => StoreFilter::from_object(filter)?,
            None => StoreFilter::default(),
        };
        let search = ItemSearch {
            namespace_prefix: body.namespace_prefix,
            filter,
            query: body.query,
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
}
