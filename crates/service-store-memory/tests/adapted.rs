//! The shared conformance suite with the store items kept by a [`StoreAdapter`]
//! (SPEC's store adapter): a plain map that knows nothing of filters, ordering, paging
//! or namespace rules, so every item rule passing here is the service's own semantics
//! applied over the adapter's candidates ([`service_store::AdaptedItems`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use service_conformance::{TestEnv, TestStore};
use service_graph::InMemorySaver;
use service_store::{Clock, ManualClock, StoreAdapter, StoreResult, with_adapter};
use service_store_memory::{MemoryOptions, memory_store};
use service_types::{Item, Metadata, Timestamp};

/// An item, its ttl in minutes and when it expires.
type Kept = (Item, Option<f64>, Option<Timestamp>);

/// Items in a map, expiring by the test's clock.
struct MapAdapter {
    clock: Arc<ManualClock>,
    items: Mutex<BTreeMap<(Vec<String>, String), Kept>>,
}

impl MapAdapter {
    fn live(&self, kept: &Kept) -> bool {
        kept.2.is_none_or(|expires| expires > self.clock.now())
    }

    fn under(&self, prefix: &[String]) -> Vec<Item> {
        let items = self.items.lock().unwrap();
        items
            .values()
            .filter(|kept| self.live(kept) && kept.0.namespace.starts_with(prefix))
            .map(|kept| kept.0.clone())
            .collect()
    }
}

#[async_trait]
impl StoreAdapter for MapAdapter {
    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: &Metadata,
        ttl_minutes: Option<f64>,
    ) -> StoreResult<()> {
        let now = self.clock.now();
        let mut items = self.items.lock().unwrap();
        let id = (namespace.to_vec(), key.to_owned());
        let created_at = match items.get(&id) {
            Some(kept) if self.live(kept) => kept.0.created_at,
            _ => now,
        };
        let item = Item {
            namespace: namespace.to_vec(),
            key: key.to_owned(),
            value: value.clone(),
            created_at,
            updated_at: now,
        };
        let expires = ttl_minutes.map(|minutes| now.plus_minutes(minutes));
        items.insert(id, (item, ttl_minutes, expires));
        Ok(())
    }

    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>> {
        let now = self.clock.now();
        let mut items = self.items.lock().unwrap();
        let Some(kept) = items.get_mut(&(namespace.to_vec(), key.to_owned())) else {
            return Ok(None);
        };
        if kept.2.is_some_and(|expires| expires <= now) {
            return Ok(None);
        }
        if let (true, Some(minutes)) = (refresh, kept.1) {
            kept.2 = Some(now.plus_minutes(minutes));
        }
        Ok(Some(kept.0.clone()))
    }

    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()> {
        let id = (namespace.to_vec(), key.to_owned());
        self.items.lock().unwrap().remove(&id);
        Ok(())
    }

    async fn items(&self, prefix: &[String]) -> StoreResult<Vec<Item>> {
        Ok(self.under(prefix))
    }

    async fn namespaces(&self, prefix: &[String]) -> StoreResult<Vec<Vec<String>>> {
        Ok(self
            .under(prefix)
            .into_iter()
            .map(|item| item.namespace)
            .collect())
    }

    fn supports_ttl(&self) -> bool {
        true
    }

    fn sweeps(&self) -> bool {
        true
    }

    async fn sweep_expired(&self) -> StoreResult<u64> {
        let now = self.clock.now();
        let mut items = self.items.lock().unwrap();
        let before = items.len();
        items.retain(|_, kept| kept.2.is_none_or(|expires| expires > now));
        Ok((before - items.len()) as u64)
    }
}

async fn factory(env: TestEnv) -> TestStore {
    let adapter = Arc::new(MapAdapter {
        clock: env.clock.clone(),
        items: Mutex::new(BTreeMap::new()),
    });
    let saver = Arc::new(InMemorySaver::new());
    let store = memory_store(MemoryOptions {
        clock: env.clock,
        limits: env.limits,
        index: None,
        checkpoints: Some(saver.clone()),
    });
    TestStore {
        store: with_adapter(&store, adapter, env.limits),
        checkpointer: saver,
    }
}

service_conformance::conformance_tests!(factory, without: [semantic_search]);
