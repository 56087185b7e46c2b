use async_trait::async_trait;
use service_types::{Item, SearchItem, StoreListNamespaces, StorePut, StoreSearch};

use crate::GraphError;

/// The long-term key/value store as a graph run sees it (LangGraph's `get_store()`):
/// everything the HTTP store offers, in its wire shapes. The engine implements it over
/// the same code its store routes call; this crate only defines it.
#[async_trait]
pub trait LongTermStore: Send + Sync {
    /// Creates or replaces an item (`index`: the fields to embed, `false` for none;
    /// `ttl`: minutes, the configured default, or never).
    async fn put(&self, put: StorePut) -> Result<(), GraphError>;

    /// The item at `namespace` / `key`, if any; `refresh_ttl` (default: the configured
    /// `refresh_on_read`) extends its expiry.
    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, GraphError>;

    /// Deletes the item at `namespace` / `key` (absent is fine).
    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), GraphError>;

    /// Items under a namespace prefix that pass the filter, ranked by `query` when the
    /// store has a semantic index; `limit` defaults to 10, as LangGraph's does, and is
    /// not capped: a graph gets every item it asks for.
    async fn search(&self, search: StoreSearch) -> Result<Vec<SearchItem>, GraphError>;

    /// Namespaces matching a prefix and suffix, cut at `max_depth`; `limit` defaults
    /// to 100, as LangGraph's does, and is not capped.
    async fn list_namespaces(
        &self,
        query: StoreListNamespaces,
    ) -> Result<Vec<Vec<String>>, GraphError>;
}
