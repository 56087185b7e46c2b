//! Long-term store items: namespaced key/value with optional per-item ttl and, when
//! the store has a semantic index, the item's vectors.

use std::cmp::Ordering;

use async_trait::async_trait;
use service_types::{Item, Metadata, SearchItem, Timestamp, ttl_minutes_valid};

use crate::StoreResult;
use crate::filter::StoreFilter;
use crate::namespace::NamespaceQuery;
use crate::semantic::FieldVector;
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
    /// The item's vectors, replacing any it had; empty leaves it unindexed. Embedded
    /// by the caller (see [`crate::SemanticIndex::vectors`]) before the put.
    pub vectors: Vec<FieldVector>,
}

/// A search: namespace prefix, filter (applied before paging), page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ItemSearch {
    /// Prefix (with `*` wildcards) the namespace must start with; empty matches all.
    pub namespace_prefix: Vec<String>,
    /// Conditions on the value's top-level keys.
    pub filter: StoreFilter,
    /// The embedded semantic query: rank by cosine similarity, best first, unscored
    /// items after every scored one (see [`crate::semantic::compare_scored`]).
    /// `None` is the plain order, with `score: null` on every item.
    pub query: Option<Vec<f32>>,
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
    /// Inserts or replaces, vectors included, in one step; the expiry restarts from
    /// now. Bad namespace: `Invalid`. Vectors on a store without a semantic index:
    /// `Unsupported`; a vector of other dims than the index's: `Invalid` (see
    /// [`crate::semantic::check_vector`]); either writes nothing.
    async fn put(&self, item: PutItem) -> StoreResult<()>;

    /// The live item; with `refresh`, a live item's expiry moves to now + its ttl.
    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>>;

    /// Deletes it and its vectors (absent is fine).
    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()>;

    /// Live items under the prefix matching the filter, sorted and paged; with a
    /// query vector, ranked by it and scored. A query on a store without a semantic
    /// index: `Unsupported`; of other dims than the index's: `Invalid`.
    async fn search(&self, search: &ItemSearch) -> StoreResult<Vec<SearchItem>>;

    /// Distinct namespaces of live items per SPEC "Namespace rules".
    async fn list_namespaces(&self, query: &NamespaceQuery) -> StoreResult<Vec<Vec<String>>>;

    /// Removes items expired at or before `now`; returns how many.
    async fn sweep_expired(&self, now: Timestamp) -> StoreResult<u64>;
}
