use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use parking_lot::Mutex;
use service_store::ordering::SortField;
use service_store::ordering::sort_rows;
use service_store::page::paginate;
use service_store::text::refuse_nul;
use service_store::{
    AssistantFilter, AssistantPage, AssistantPatch, AssistantQuery, AssistantStamp, AssistantsRepo,
    NewAssistant, StoreError, StoreResult, VersionQuery, containment,
};
use service_types::{Assistant, AssistantVersion, IfExists};
use uuid::Uuid;

use crate::Env;

/// Live rows and their version snapshots.
#[derive(Debug)]
pub(crate) struct MemoryAssistants {
    env: Env,
    state: Mutex<Tables>,
}

#[derive(Debug, Default)]
struct Tables {
    live: HashMap<Uuid, Assistant>,
    versions: HashMap<Uuid, BTreeMap<i64, AssistantVersion>>,
}

impl MemoryAssistants {
    pub(crate) fn new(env: Env) -> Self {
        Self {
            env,
            state: Mutex::default(),
        }
    }

    /// The state the live assistant is in, if it exists.
    pub(crate) fn stamp(&self, id: Uuid) -> Option<AssistantStamp> {
        self.state.lock().live.get(&id).map(AssistantStamp::of)
    }
}

impl Tables {
    /// Makes `version` of `id` the live row, stamped `updated_at = now`.
    fn activate(
        &mut self,
        id: Uuid,
        version: &AssistantVersion,
        now: service_types::Timestamp,
    ) -> StoreResult<Assistant> {
        let live = self.live.get_mut(&id).ok_or_else(|| not_found(id))?;
        live.version = version.version;
        live.graph_id = version.graph_id.clone();
        live.config = version.config.clone();
        live.context = version.context.clone();
        live.metadata = version.metadata.clone();
        live.name = version.name.clone();
        live.description = version.description.clone();
        live.updated_at = now;
        Ok(live.clone())
    }
}

fn not_found(id: Uuid) -> StoreError {
    StoreError::not_found(format!("Assistant {id} not found"))
}

#[async_trait]
impl AssistantsRepo for MemoryAssistants {
    async fn create(&self, new: NewAssistant, if_exists: IfExists) -> StoreResult<Assistant> {
        refuse_nul("", &new)?;
        let now = self.env.clock.now();
        let mut tables = self.state.lock();
        if let Some(existing) = tables.live.get(&new.assistant_id) {
            return match if_exists {
                IfExists::Raise => Err(StoreError::conflict(format!(
                    "Assistant {} already exists",
                    new.assistant_id
                ))),
                IfExists::DoNothing => Ok(existing.clone()),
            };
        }
        let assistant = Assistant {
            assistant_id: new.assistant_id,
            graph_id: new.graph_id,
            config: new.config,
            context: new.context,
            metadata: new.metadata,
            name: new.name,
            description: new.description,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        tables
            .versions
            .entry(assistant.assistant_id)
            .or_default()
            .insert(1, assistant.snapshot());
        tables
            .live
            .insert(assistant.assistant_id, assistant.clone());
        Ok(assistant)
    }

    async fn get(&self, assistant_id: Uuid) -> StoreResult<Option<Assistant>> {
        Ok(self.state.lock().live.get(&assistant_id).cloned())
    }

    async fn update(&self, assistant_id: Uuid, patch: AssistantPatch) -> StoreResult<Assistant> {
        refuse_nul("", &patch)?;
        let now = self.env.clock.now();
        let mut tables = self.state.lock();
        let version = tables
            .versions
            .get(&assistant_id)
            .and_then(|versions| versions.keys().next_back().copied())
            .unwrap_or(0)
            + 1;
        let live = tables
            .live
            .get(&assistant_id)
            .ok_or_else(|| not_found(assistant_id))?;
        let snapshot = patch.mint(live, version, now);
        tables
            .versions
            .entry(assistant_id)
            .or_default()
            .insert(snapshot.version, snapshot.clone());
        tables.activate(assistant_id, &snapshot, now)
    }

    async fn set_latest(&self, assistant_id: Uuid, version: i64) -> StoreResult<Assistant> {
        let now = self.env.clock.now();
        let mut tables = self.state.lock();
        let snapshot = tables
            .versions
            .get(&assistant_id)
            .and_then(|versions| versions.get(&version))
            .cloned()
            .ok_or_else(|| {
                StoreError::not_found(format!(
                    "Version {version} not found for assistant {assistant_id}"
                ))
            })?;
        tables.activate(assistant_id, &snapshot, now)
    }

    async fn delete(&self, assistant_id: Uuid) -> StoreResult<()> {
        let mut tables = self.state.lock();
        if tables.live.remove(&assistant_id).is_none() {
            return Err(StoreError::not_found(format!(
                "Assistant with ID {assistant_id} not found"
            )));
        }
        tables.versions.remove(&assistant_id);
        Ok(())
    }

    async fn search(&self, query: &AssistantQuery) -> StoreResult<AssistantPage> {
        refuse_nul("", &query.filter)?;
        let limit = self.env.limits.search(query.limit)?;
        let mut rows = self.matching(&query.filter);
        let total = rows.len() as u64;
        sort_rows(&mut rows, query.sort_order, |row| {
            (query.sort_by.key(row), row.assistant_id)
        });
        Ok(AssistantPage {
            items: paginate(rows, query.offset, Some(limit)),
            total,
        })
    }

    async fn count(&self, filter: &AssistantFilter) -> StoreResult<u64> {
        refuse_nul("", filter)?;
        let tables = self.state.lock();
        Ok(tables
            .live
            .values()
            .filter(|row| filter.matches(row))
            .count() as u64)
    }

    async fn versions(
        &self,
        assistant_id: Uuid,
        query: &VersionQuery,
    ) -> StoreResult<Vec<AssistantVersion>> {
        refuse_nul("metadata", &query.metadata)?;
        let limit = self.env.limits.search(query.limit)?;
        let tables = self.state.lock();
        let versions = tables
            .versions
            .get(&assistant_id)
            .ok_or_else(|| not_found(assistant_id))?;
        let matching = versions.values().rev().filter(|version| {
            query
                .metadata
                .as_ref()
                .is_none_or(|wanted| containment::contains_object(&version.metadata, wanted))
        });
        Ok(paginate(matching.cloned(), query.offset, Some(limit)))
    }
}

impl MemoryAssistants {
    fn matching(&self, filter: &AssistantFilter) -> Vec<Assistant> {
        let tables = self.state.lock();
        tables
            .live
            .values()
            .filter(|row| filter.matches(row))
            .cloned()
            .collect()
    }
}
