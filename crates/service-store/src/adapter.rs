//! SPEC's store adapter (`store.adapter`): store items kept by a store of the user's
//! (a LangGraph `BaseStore` through the Python bridge, or an embedder's own Rust
//! implementation) in place of the driver's items repository. The adapter only keeps
//! items and hands over candidates; [`AdaptedItems`] applies this service's filter,
//! ordering, paging and namespace rules over them, as every driver does, so clients
//! and graphs see the same answers whichever store keeps the items.

use std::sync::Arc;

use async_trait::async_trait;
use service_types::{Item, Metadata, SearchItem, Timestamp};

use crate::items::{ItemSearch, ItemsRepo, PutItem, compare_items, validate_item_ttl};
use crate::namespace::{NamespaceQuery, literal_prefix, matches_prefix, validate_namespace};
use crate::page::{PageLimits, paginate};
use crate::text::refuse_nul;
use crate::{Store, StoreError, StoreResult};

/// A store that keeps items for the service: plain storage, no query semantics.
#[async_trait]
pub trait StoreAdapter: Send + Sync {
    /// Creates or replaces an item; `ttl_minutes: None` never expires (asked for
    /// only when [`StoreAdapter::supports_ttl`]).
    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: &Metadata,
        ttl_minutes: Option<f64>,
    ) -> StoreResult<()>;

    /// The live item; with `refresh`, its expiry moves on by its own ttl.
    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>>;

    /// Deletes the item (absent is fine).
    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()>;

    /// Every live item whose namespace starts with `prefix` (literal labels; empty is
    /// every item), in any order: the candidates a search is answered from.
    async fn items(&self, prefix: &[String]) -> StoreResult<Vec<Item>>;

    /// Every namespace holding a live item under `prefix`, in any order.
    async fn namespaces(&self, prefix: &[String]) -> StoreResult<Vec<Vec<String>>>;

    /// Whether items may have a ttl.
    fn supports_ttl(&self) -> bool {
        false
    }

    /// Whether [`StoreAdapter::sweep_expired`] removes expired items: SPEC refuses
    /// `store.ttl` with an adapter that cannot.
    fn sweeps(&self) -> bool {
        false
    }

    /// Removes expired items; how many (0 when the adapter does not say).
    async fn sweep_expired(&self) -> StoreResult<u64> {
        Ok(0)
    }
}

/// The items repository over a [`StoreAdapter`].
pub struct AdaptedItems {
    adapter: Arc<dyn StoreAdapter>,
    limits: PageLimits,
}

impl std::fmt::Debug for AdaptedItems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdaptedItems")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl AdaptedItems {
    /// `adapter` behind the service's semantics, pages bounded by `limits`.
    pub fn new(adapter: Arc<dyn StoreAdapter>, limits: PageLimits) -> Self {
        Self { adapter, limits }
    }
}

/// `store` with its items kept by `adapter` (no semantic index: SPEC refuses
/// `store.index` with an adapter); its other repositories are unchanged.
pub fn with_adapter(store: &Store, adapter: Arc<dyn StoreAdapter>, limits: PageLimits) -> Store {
    let mut parts = store.parts();
    parts.items = Arc::new(AdaptedItems::new(adapter, limits));
    parts.semantic_search = false;
    Store::new(parts)
}

#[async_trait]
impl ItemsRepo for AdaptedItems {
    async fn put(&self, item: PutItem) -> StoreResult<()> {
        validate_namespace(&item.namespace)?;
        refuse_nul("", &item)?;
        validate_item_ttl(item.ttl_minutes)?;
        if !item.vectors.is_empty() {
            return Err(StoreError::unsupported(
                "the store adapter keeps no vectors (store.index is refused with store.adapter)",
            ));
        }
        if item.ttl_minutes.is_some() && !self.adapter.supports_ttl() {
            return Err(StoreError::invalid(
                "the store adapter does not support ttl: put the item without one",
            ));
        }
        self.adapter
            .put(&item.namespace, &item.key, &item.value, item.ttl_minutes)
            .await
    }

    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>> {
        refuse_nul("namespace", namespace)?;
        refuse_nul("key", key)?;
        self.adapter.get(namespace, key, refresh).await
    }

    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()> {
        refuse_nul("namespace", namespace)?;
        refuse_nul("key", key)?;
        self.adapter.delete(namespace, key).await
    }

    async fn search(&self, search: &ItemSearch) -> StoreResult<Vec<SearchItem>> {
        refuse_nul("", search)?;
        let limit = self.limits.search(search.limit)?;
        if search.query.is_some() {
            return Err(StoreError::unsupported(
                "the store adapter has no semantic index",
            ));
        }
        let prefix = &search.namespace_prefix;
        let mut items: Vec<Item> = self
            .adapter
            .items(literal_prefix(prefix))
            .await?
            .into_iter()
            .filter(|item| matches_prefix(&item.namespace, prefix))
            .filter(|item| search.filter.matches(&item.value))
            .collect();
        items.sort_by(compare_items);
        let page = paginate(items, search.offset, Some(limit));
        if search.refresh_ttl {
            for item in &page {
                self.adapter.get(&item.namespace, &item.key, true).await?;
            }
        }
        Ok(page
            .into_iter()
            .map(|item| SearchItem { item, score: None })
            .collect())
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> StoreResult<Vec<Vec<String>>> {
        query.validate()?;
        let prefix = query.prefix.as_deref().unwrap_or_default();
        let namespaces = self.adapter.namespaces(literal_prefix(prefix)).await?;
        query.collect(namespaces.iter().map(Vec::as_slice), self.limits)
    }

    async fn sweep_expired(&self, _now: Timestamp) -> StoreResult<u64> {
        // The adapter's own clock decides what expired.
        if self.adapter.sweeps() {
            self.adapter.sweep_expired().await
        } else {
            Ok(0)
        }
    }
}
