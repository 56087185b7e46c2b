use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::Utc;
use service_types::{Item, Metadata, Timestamp};

use crate::GraphError;

/// The long-term key/value store as a graph run sees it (LangGraph's `get_store()`).
/// The engine implements it over its store repository; this crate only defines it.
#[async_trait]
pub trait LongTermStore: Send + Sync {
    /// Creates or replaces the item at `namespace` / `key`.
    async fn put(&self, namespace: &[String], key: &str, value: Metadata)
    -> Result<(), GraphError>;

    /// The item at `namespace` / `key`, if any.
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, GraphError>;

    /// Deletes the item at `namespace` / `key` (absent is fine).
    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), GraphError>;

    /// Items whose namespace starts with `namespace_prefix`, at most `limit`.
    async fn search(
        &self,
        namespace_prefix: &[String],
        limit: usize,
    ) -> Result<Vec<Item>, GraphError>;
}

/// A process-local [`LongTermStore`] for tests and embedders without a store.
#[derive(Debug, Default)]
pub struct InMemoryLongTermStore {
    items: Mutex<BTreeMap<(Vec<String>, String), Item>>,
}

impl InMemoryLongTermStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(Vec<String>, String), Item>> {
        // A poisoned lock only means another test thread panicked; the map is intact.
        self.items
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl LongTermStore for InMemoryLongTermStore {
    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Metadata,
    ) -> Result<(), GraphError> {
        let now = Timestamp::new(Utc::now());
        let mut items = self.lock();
        let created_at = items
            .get(&(namespace.to_vec(), key.to_owned()))
            .map_or(now, |item| item.created_at);
        items.insert(
            (namespace.to_vec(), key.to_owned()),
            Item {
                namespace: namespace.to_vec(),
                key: key.to_owned(),
                value,
                created_at,
                updated_at: now,
            },
        );
        Ok(())
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, GraphError> {
        Ok(self
            .lock()
            .get(&(namespace.to_vec(), key.to_owned()))
            .cloned())
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), GraphError> {
        self.lock().remove(&(namespace.to_vec(), key.to_owned()));
        Ok(())
    }

    async fn search(
        &self,
        namespace_prefix: &[String],
        limit: usize,
    ) -> Result<Vec<Item>, GraphError> {
        Ok(self
            .lock()
            .values()
            .filter(|item| item.namespace.starts_with(namespace_prefix))
            .take(limit)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|part| (*part).to_owned()).collect()
    }

    #[tokio::test]
    async fn search_matches_namespace_prefixes_only() {
        let store = InMemoryLongTermStore::new();
        let value = json!({"text": "hi"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        store
            .put(&ns(&["memories", "u1"]), "a", value.clone())
            .await
            .unwrap();
        store
            .put(&ns(&["memories", "u2"]), "b", value.clone())
            .await
            .unwrap();
        store.put(&ns(&["other"]), "c", value).await.unwrap();
        assert_eq!(store.search(&ns(&["memories"]), 10).await.unwrap().len(), 2);
        assert_eq!(
            store
                .search(&ns(&["memories", "u1"]), 10)
                .await
                .unwrap()
                .len(),
            1
        );
        store.delete(&ns(&["other"]), "c").await.unwrap();
        assert!(store.get(&ns(&["other"]), "c").await.unwrap().is_none());
    }
}
