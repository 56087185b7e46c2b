//! Long-term store items: namespaced key/value with optional per-item ttl.

use std::cmp::Ordering;

use async_trait::async_trait;
use service_types::{Item, Metadata, SearchItem, Timestamp, ttl_minutes_valid};

use crate::StoreResult;
use crate::filter::StoreFilter;
use crate::namespace::NamespaceQuery;
use crate::threads::ttl_refused;

/// A write.
#[derive(Clone, Debug, PartialEq)]
pub struct PutItem {
    /// Non-empty namespace, labels without dots.
    pub namespace: Vec<String>,
    /// Key within the namespace.
    pub key: String,
    /// The object stored.
    pub value: Metadata,
    /// Lifetime in minutes; the caller resolves `store.ttl.default_ttl`. `None` never
    /// expires.
    pub ttl_minutes: Option<f64>,
}

/// A search: namespace prefix, filter (applied before paging), page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ItemSearch {
    /// Prefix (with `*` wildcards) the namespace must start with; empty matches all.
    pub namespace_prefix: Vec<String>,
    /// Conditions on the value's top-level keys.
    pub filter: StoreFilter,
    /// Semantic query; ignored (score null) when no index is configured.
    pub query: Option<String>,
    /// Page size; above 1000 is rejected, absent means the max page size.
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
    /// Extend the expiry of returned items by their own ttl.
    pub refresh_ttl: bool,
}

/// Search order: `updated_at` descending, ties by namespace then key ascending.
pub fn compare_items(a: &Item, b: &Item) -> Ordering {
    b.updated_at
        .cmp(&a.updated_at)
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| a.key.cmp(&b.key))
}

/// Checks a per-item ttl before it is stored.
pub fn validate_item_ttl(ttl_minutes: Option<f64>) -> StoreResult<()> {
    match ttl_minutes {
        Some(minutes) if !ttl_minutes_valid(minutes) => Err(ttl_refused()),
        _ => Ok(()),
    }
}

/// The store-items repository. Results order by `updated_at` descending, ties by
/// namespace then key ascending. An expired item reads as absent at once.
#[async_trait]
pub trait ItemsRepo: Send + Sync {
    /// Inserts or replaces; the expiry restarts from now. Bad namespace: `Invalid`.
    async fn put(&self, item: PutItem) -> StoreResult<()>;

    /// The live item; with `refresh`, a live item's expiry moves to now + its ttl.
    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>>;

    /// Deletes it (absent is fine).
    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()>;

    /// Live items under the prefix matching the filter, sorted and paged.
    async fn search(&self, search: &ItemSearch) -> StoreResult<Vec<SearchItem>>;

    /// Distinct namespaces of live items per SPEC "Namespace rules".
    async fn list_namespaces(&self, query: &NamespaceQuery) -> StoreResult<Vec<Vec<String>>>;

    /// Removes items expired at or before `now`; returns how many.
    async fn sweep_expired(&self, now: Timestamp) -> StoreResult<u64>;
}
