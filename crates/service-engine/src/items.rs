//! The long-term store routes' logic, and the handle graphs get to the same store.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use service_graph::{GraphError, LongTermStore};
use service_store::{ItemSearch, NamespaceQuery, PutItem, Store, StoreFilter};
use service_types::{Item, Metadata, SearchItem, StoreListNamespaces, StorePut, StoreSearch};

use crate::limits::{clamped_limit, offset, search_limit};
use crate::{Engine, EngineError, EngineResult};

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

impl Engine {
    /// Stores an item; the configured default ttl applies when none is given.
    pub async fn put_item(&self, body: StorePut) -> EngineResult<()> {
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
    pub async fn get_item(
        &self,
        namespace: &[String],
        key: &str,
        refresh: Option<bool>,
    ) -> EngineResult<Option<Item>> {
        let refresh = refresh.unwrap_or(self.config().store_refresh_on_read);
        Ok(self.store().items().get(namespace, key, refresh).await?)
    }

    /// Deletes an item (absent is fine).
    pub async fn delete_item(&self, namespace: &[String], key: &str) -> EngineResult<()> {
        Ok(self.store().items().delete(namespace, key).await?)
    }

    /// Filtered search under a namespace prefix.
    pub async fn search_items(&self, body: StoreSearch) -> EngineResult<Vec<SearchItem>> {
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
    pub async fn list_namespaces(
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
    pub fn long_term_store(&self) -> Arc<dyn LongTermStore> {
        Arc::new(StoreBridge {
            store: self.store().clone(),
            default_ttl: self.config().store_default_ttl_minutes,
        })
    }
}

/// [`LongTermStore`] over the items repository.
struct StoreBridge {
    store: Store,
    default_ttl: Option<f64>,
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
        let item = PutItem {
            namespace: namespace.to_vec(),
            key: key.to_owned(),
            value,
            ttl_minutes: self.default_ttl,
        };
        self.store.items().put(item).await.map_err(graph_error)
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, GraphError> {
        self.store
            .items()
            .get(namespace, key, true)
            .await
            .map_err(graph_error)
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), GraphError> {
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
}
