use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use parking_lot::RwLock;
use service_store::namespace::{literal_prefix, matches_prefix, validate_namespace};
use service_store::page::paginate;
use service_store::semantic::{check_vector, compare_scored};
use service_store::text::refuse_nul;
use service_store::{
    FieldVector, ItemSearch, ItemsRepo, NamespaceQuery, PutItem, StoreError, StoreFilter,
    StoreResult, validate_item_ttl,
};
use service_types::{Item, SearchItem, Timestamp};

use crate::Env;
use crate::item_index::ItemIndex;
use crate::vector_arena::{Query, VectorArena};

/// Items in a `BTreeMap` keyed by namespace path, so a prefix is a range scan. A
/// read-write lock lets searches and reads run in parallel.
#[derive(Debug)]
pub(crate) struct MemoryItems {
    env: Env,
    state: RwLock<BTreeMap<Vec<String>, Namespace>>,
}

/// One namespace's items by key, the equality index over their values, and their
/// vectors.
#[derive(Debug, Default)]
struct Namespace {
    items: BTreeMap<String, Stored>,
    index: ItemIndex,
    vectors: VectorArena,
}

impl Namespace {
    fn insert(&mut self, mut stored: Stored, vectors: Vec<FieldVector>) {
        self.remove(&stored.item.key);
        stored.slots = vectors
            .iter()
            .map(|field| self.vectors.insert(&field.vector))
            .collect();
        self.index.insert(&stored.item.key, &stored.item.value);
        self.items.insert(stored.item.key.clone(), stored);
    }

    fn remove(&mut self, key: &str) {
        if let Some(removed) = self.items.remove(key) {
            self.index.remove(key, &removed.item.value);
            for slot in removed.slots {
                self.vectors.remove(slot);
            }
        }
    }

    /// The live items matching `filter`, each with its best similarity to `query`
    /// (`None` without vectors), appended to `out`.
    fn scored<'a>(
        &'a self,
        filter: &'a StoreFilter,
        now: Timestamp,
        query: &Query,
        out: &mut Vec<(Option<f64>, &'a Item)>,
    ) {
        // Without an index to narrow the candidates, every vector is read anyway:
        // score them all in one pass over the arena.
        let candidates = self.index.candidates(filter);
        let all = candidates
            .is_none()
            .then(|| self.vectors.similarities(query));
        for stored in self.matching_among(candidates, filter, now) {
            let score = stored
                .slots
                .iter()
                .map(|&slot| match &all {
                    Some(all) => all[slot],
                    None => self.vectors.similarity(slot, query),
                })
                .max_by(f64::total_cmp);
            out.push((score, &stored.item));
        }
    }

    /// The live items matching `filter`, read through the index when it can narrow.
    fn matching<'a>(
        &'a self,
        filter: &'a StoreFilter,
        now: Timestamp,
    ) -> Box<dyn Iterator<Item = &'a Stored> + 'a> {
        self.matching_among(self.index.candidates(filter), filter, now)
    }

    /// [`Namespace::matching`] with the index's `candidates` for `filter` already read.
    fn matching_among<'a>(
        &'a self,
        candidates: Option<BTreeSet<&'a str>>,
        filter: &'a StoreFilter,
        now: Timestamp,
    ) -> Box<dyn Iterator<Item = &'a Stored> + 'a> {
        let selected = move |stored: &'a Stored| {
            (stored.is_live(now) && filter.matches(&stored.item.value)).then_some(stored)
        };
        match candidates {
            Some(keys) => Box::new(
                keys.into_iter()
                    .filter_map(move |key| self.items.get(key).and_then(selected)),
            ),
            None => Box::new(self.items.values().filter_map(selected)),
        }
    }
}

#[derive(Debug)]
struct Stored {
    item: Item,
    ttl_minutes: Option<f64>,
    expires_at: Option<Timestamp>,
    /// Its vectors' slots in the namespace's arena.
    slots: Vec<usize>,
}

impl Stored {
    fn is_live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    fn refresh(&mut self, now: Timestamp) {
        if let Some(minutes) = self.ttl_minutes {
            self.expires_at = Some(now.plus_minutes(minutes));
        }
    }
}

impl MemoryItems {
    pub(crate) fn new(env: Env) -> Self {
        Self {
            env,
            state: RwLock::default(),
        }
    }

    /// Refuses a vector this store cannot hold: any without an index, or one of other
    /// dims than the index's.
    fn check(&self, vector: &[f32]) -> StoreResult<()> {
        match self.env.index {
            Some(spec) => check_vector(vector, spec.dims),
            None => Err(StoreError::unsupported(
                "semantic search is not configured: set store.index",
            )),
        }
    }
}

/// Namespaces starting with the literal part of `prefix`, in path order.
fn under<'a, V>(
    map: &'a BTreeMap<Vec<String>, V>,
    prefix: &'a [String],
) -> impl Iterator<Item = (&'a Vec<String>, &'a V)> + 'a {
    let literal = literal_prefix(prefix);
    map.range(literal.to_vec()..)
        .take_while(move |(namespace, _)| namespace.starts_with(literal))
        .filter(move |(namespace, _)| matches_prefix(namespace, prefix))
}

#[async_trait]
impl ItemsRepo for MemoryItems {
    async fn put(&self, put: PutItem) -> StoreResult<()> {
        validate_namespace(&put.namespace)?;
        refuse_nul("", &put)?;
        validate_item_ttl(put.ttl_minutes)?;
        for field in &put.vectors {
            self.check(&field.vector)?;
        }
        let now = self.env.clock.now();
        let mut map = self.state.write();
        let namespace = map.entry(put.namespace.clone()).or_default();
        let created_at = namespace
            .items
            .get(&put.key)
            .filter(|stored| stored.is_live(now))
            .map_or(now, |stored| stored.item.created_at);
        let stored = Stored {
            item: Item {
                namespace: put.namespace,
                key: put.key,
                value: put.value,
                created_at,
                updated_at: now,
            },
            ttl_minutes: put.ttl_minutes,
            expires_at: put.ttl_minutes.map(|minutes| now.plus_minutes(minutes)),
            slots: Vec::new(),
        };
        namespace.insert(stored, put.vectors);
        Ok(())
    }

    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>> {
        refuse_nul("namespace", namespace)?;
        refuse_nul("key", key)?;
        let now = self.env.clock.now();
        if !refresh {
            let map = self.state.read();
            let stored = map.get(namespace).and_then(|space| space.items.get(key));
            return Ok(stored
                .filter(|stored| stored.is_live(now))
                .map(|stored| stored.item.clone()));
        }
        let mut map = self.state.write();
        let Some(stored) = map
            .get_mut(namespace)
            .and_then(|space| space.items.get_mut(key))
        else {
            return Ok(None);
        };
        if !stored.is_live(now) {
            return Ok(None);
        }
        stored.refresh(now);
        Ok(Some(stored.item.clone()))
    }

    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()> {
        refuse_nul("namespace", namespace)?;
        refuse_nul("key", key)?;
        let mut map = self.state.write();
        if let Some(space) = map.get_mut(namespace) {
            space.remove(key);
            if space.items.is_empty() {
                map.remove(namespace);
            }
        }
        Ok(())
    }

    async fn search(&self, search: &ItemSearch) -> StoreResult<Vec<SearchItem>> {
        refuse_nul("", search)?;
        let limit = self.env.limits.search(search.limit)?;
        if let Some(query) = &search.query {
            self.check(query)?;
        }
        let now = self.env.clock.now();
        let page: Vec<SearchItem> = {
            let map = self.state.read();
            let spaces = under(&map, &search.namespace_prefix);
            // Sorted and paged by reference: only the page's items are cloned.
            let mut scored: Vec<(Option<f64>, &Item)> = Vec::new();
            match &search.query {
                Some(query) => {
                    let query = Query::new(query);
                    for (_, space) in spaces {
                        space.scored(&search.filter, now, &query, &mut scored);
                    }
                }
                None => scored.extend(
                    spaces
                        .flat_map(|(_, space)| space.matching(&search.filter, now))
                        .map(|stored| (None, &stored.item)),
                ),
            }
            // Only the rows up to the page's end need their order: select them first.
            // Without a query nothing is scored: the plain order.
            let end = search.offset.saturating_add(limit);
            if end < scored.len() {
                scored.select_nth_unstable_by(end, |a, b| compare_scored(*a, *b));
                scored.truncate(end);
            }
            scored.sort_by(|a, b| compare_scored(*a, *b));
            paginate(scored, search.offset, Some(limit))
                .into_iter()
                .map(|(score, item)| SearchItem {
                    item: item.clone(),
                    score,
                })
                .collect()
        };
        if search.refresh_ttl {
            let mut map = self.state.write();
            for found in &page {
                if let Some(stored) = map
                    .get_mut(&found.item.namespace)
                    .and_then(|space| space.items.get_mut(&found.item.key))
                {
                    stored.refresh(now);
                }
            }
        }
        Ok(page)
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> StoreResult<Vec<Vec<String>>> {
        let now = self.env.clock.now();
        let map = self.state.read();
        let prefix = query.prefix.as_deref().unwrap_or_default();
        let live = under(&map, prefix)
            .filter(|(_, space)| space.items.values().any(|stored| stored.is_live(now)))
            .map(|(namespace, _)| namespace.as_slice());
        query.collect(live, self.env.limits)
    }

    async fn sweep_expired(&self, now: Timestamp) -> StoreResult<u64> {
        let mut map = self.state.write();
        let mut removed = 0;
        for space in map.values_mut() {
            let expired: Vec<String> = space
                .items
                .values()
                .filter(|stored| !stored.is_live(now))
                .map(|stored| stored.item.key.clone())
                .collect();
            for key in &expired {
                space.remove(key);
            }
            removed += expired.len();
        }
        map.retain(|_, space| !space.items.is_empty());
        Ok(removed as u64)
    }
}
