use async_trait::async_trait;
use serde_json::Value;
use service_store::ordering::SortField;
use service_store::ordering::sort_rows;
use service_store::page::paginate;
use service_store::text::refuse_nul;
use service_store::{
    NewThread, StateHold, StoreError, StoreResult, ThreadFilter, ThreadMirror, ThreadPatch,
    ThreadQuery, ThreadsRepo, TtlChange, validate_ttl,
};
use service_types::{
    IfExists, JsonText, Metadata, Thread, ThreadStatus, ThreadTtl, Timestamp, TtlSetting,
};
use uuid::Uuid;

use crate::core::{Core, MemoryCore, ThreadRow};

pub(crate) fn ttl_from(setting: TtlSetting, now: Timestamp) -> StoreResult<ThreadTtl> {
    validate_ttl(setting)?;
    Ok(ThreadTtl {
        strategy: setting.strategy(),
        ttl_minutes: setting.minutes(),
        expires_at: now.plus_minutes(setting.minutes()),
    })
}

fn missing(thread_id: Uuid) -> StoreError {
    StoreError::not_found(format!("Thread with ID {thread_id} not found"))
}

impl Core {
    pub(crate) fn thread_mut(&mut self, thread_id: Uuid) -> StoreResult<&mut ThreadRow> {
        self.threads
            .get_mut(&thread_id)
            .map(|row| &mut **row)
            .ok_or_else(|| missing(thread_id))
    }

    /// Mirrors a finished run (see [`ThreadsRepo::mirror_after_run`]).
    pub(crate) fn mirror_after_run(
        &mut self,
        thread_id: Uuid,
        status: ThreadStatus,
        mirror: Mirrored,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let runs_wait = self.runs_by_thread.get(&thread_id).is_some_and(|keys| {
            keys.iter()
                .filter_map(|(_, run_id)| self.runs.get(run_id))
                .any(|row| !row.run.status.is_terminal())
        });
        let status = if runs_wait {
            ThreadStatus::Busy
        } else {
            status
        };
        apply_mirror(self.thread_mut(thread_id)?, status, mirror, now);
        Ok(runs_wait)
    }
}

#[async_trait]
impl ThreadsRepo for MemoryCore {
    async fn create(&self, new: NewThread, if_exists: IfExists) -> StoreResult<Thread> {
        refuse_nul("", &new)?;
        let now = self.env.clock.now();
        let ttl = new.ttl.map(|setting| ttl_from(setting, now)).transpose()?;
        let mut core = self.state.lock();
        if let Some(existing) = core.threads.get(&new.thread_id) {
            return match if_exists {
                IfExists::Raise => Err(StoreError::conflict(format!(
                    "Thread with ID {} already exists",
                    new.thread_id
                ))),
                IfExists::DoNothing => Ok(existing.to_thread()),
            };
        }
        let thread = new_thread(new, ttl, now);
        core.threads
            .insert(thread.thread_id, Box::new(ThreadRow::new(thread.clone())));
        Ok(thread)
    }

    async fn get(&self, thread_id: Uuid) -> StoreResult<Option<Thread>> {
        Ok(self
            .state
            .lock()
            .threads
            .get(&thread_id)
            .map(|row| row.to_thread()))
    }

    async fn patch(&self, thread_id: Uuid, patch: ThreadPatch) -> StoreResult<Thread> {
        refuse_nul("", &patch)?;
        let now = self.env.clock.now();
        let ttl = match patch.ttl {
            TtlChange::Set(setting) => Some(Some(ttl_from(setting, now)?)),
            TtlChange::Clear => Some(None),
            TtlChange::Keep => None,
        };
        let mut core = self.state.lock();
        let row = core
            .threads
            .get_mut(&thread_id)
            .ok_or_else(|| StoreError::not_found("Not Found"))?;
        let thread = &mut row.thread;
        if let Some(metadata) = patch.metadata {
            thread.metadata.extend(metadata);
        }
        if let Some(ttl) = ttl {
            thread.ttl = ttl;
        }
        thread.updated_at = now;
        Ok(row.to_thread())
    }

    async fn set_status(&self, thread_id: Uuid, status: ThreadStatus) -> StoreResult<()> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let thread = &mut core.thread_mut(thread_id)?.thread;
        thread.status = status;
        thread.updated_at = now;
        Ok(())
    }

    async fn mirror(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<()> {
        let now = self.env.clock.now();
        // Serialised before taking the lock.
        let (status, mirror) = (mirror.status, Mirrored::from(mirror));
        let mut core = self.state.lock();
        apply_mirror(core.thread_mut(thread_id)?, status, mirror, now);
        Ok(())
    }

    async fn mirror_after_run(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<bool> {
        let now = self.env.clock.now();
        let (status, mirror) = (mirror.status, Mirrored::from(mirror));
        self.state
            .lock()
            .mirror_after_run(thread_id, status, mirror, now)
    }

    async fn hold_state(&self, thread_id: Uuid, until: Timestamp) -> StoreResult<StateHold> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        if !core.threads.contains_key(&thread_id) {
            return Err(missing(thread_id));
        }
        let runs_active = core.runs_by_thread.get(&thread_id).is_some_and(|keys| {
            keys.iter()
                .filter_map(|(_, run_id)| core.runs.get(run_id))
                .any(|row| !row.run.status.is_terminal())
        });
        let held = core
            .state_holds
            .get(&thread_id)
            .is_some_and(|(_, lease)| *lease > now);
        if runs_active || held {
            return Err(StateHold::thread_busy());
        }
        let hold = StateHold {
            thread_id,
            hold_id: Uuid::now_v7(),
        };
        core.state_holds.insert(thread_id, (hold.hold_id, until));
        Ok(hold)
    }

    async fn release_state(&self, hold: StateHold) -> StoreResult<()> {
        let mut core = self.state.lock();
        if core
            .state_holds
            .get(&hold.thread_id)
            .is_some_and(|(hold_id, _)| *hold_id == hold.hold_id)
        {
            core.state_holds.remove(&hold.thread_id);
        }
        Ok(())
    }

    async fn delete(&self, thread_id: Uuid) -> StoreResult<()> {
        let mut core = self.state.lock();
        core.threads
            .remove(&thread_id)
            .ok_or_else(|| missing(thread_id))?;
        core.state_holds.remove(&thread_id);
        let run_ids: Vec<Uuid> = core
            .runs_by_thread
            .get(&thread_id)
            .map(|keys| keys.iter().map(|(_, id)| *id).collect())
            .unwrap_or_default();
        for run_id in run_ids {
            core.remove_run(run_id);
        }
        let cron_ids: Vec<Uuid> = core
            .crons_by_thread
            .get(&thread_id)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        for cron_id in cron_ids {
            core.remove_cron(cron_id);
        }
        Ok(())
    }

    async fn search(&self, query: &ThreadQuery) -> StoreResult<Vec<Thread>> {
        refuse_nul("", &query.filter)?;
        let limit = self.env.limits.search(query.limit)?;
        let core = self.state.lock();
        let mut rows = matching(&core, &query.filter);
        sort_rows(&mut rows, query.sort_order, |row| {
            (query.sort_by.key(&row.thread), row.thread.thread_id)
        });
        // Only the page is parsed back.
        Ok(paginate(rows, query.offset, Some(limit))
            .into_iter()
            .map(ThreadRow::to_thread)
            .collect())
    }

    async fn count(&self, filter: &ThreadFilter) -> StoreResult<u64> {
        refuse_nul("", filter)?;
        Ok(matching(&self.state.lock(), filter).len() as u64)
    }

    async fn copy(&self, source: Uuid, new_id: Uuid) -> StoreResult<Thread> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let original = core.threads.get(&source).ok_or_else(|| missing(source))?;
        let values = original.values.clone();
        let original = &original.thread;
        if core.threads.contains_key(&new_id) {
            return Err(StoreError::conflict(format!(
                "Thread with ID {new_id} already exists"
            )));
        }
        let status = match original.status {
            ThreadStatus::Busy => ThreadStatus::Idle,
            other => other,
        };
        let copy = Thread {
            thread_id: new_id,
            created_at: now,
            updated_at: now,
            state_updated_at: now,
            status,
            ttl: None,
            ..original.clone()
        };
        let copy = ThreadRow {
            thread: copy,
            values,
        };
        let thread = copy.to_thread();
        core.threads.insert(new_id, Box::new(copy));
        Ok(thread)
    }

    async fn expired(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Uuid>> {
        let limit = self.env.limits.bounded(Some(limit));
        let core = self.state.lock();
        let mut rows: Vec<(Timestamp, Uuid)> = core
            .threads
            .values()
            .map(|row| &row.thread)
            .filter_map(|thread| thread.ttl.map(|ttl| (ttl.expires_at, thread.thread_id)))
            .filter(|(expires_at, _)| *expires_at <= now)
            .collect();
        rows.sort();
        Ok(rows.into_iter().take(limit).map(|(_, id)| id).collect())
    }
}

/// The rows `filter` selects. Values are parsed only when the filter looks at them.
fn matching<'a>(core: &'a Core, filter: &ThreadFilter) -> Vec<&'a ThreadRow> {
    let matcher = filter.matcher();
    let selected = |row: &&ThreadRow| {
        if filter.values.is_some() {
            matcher.matches(&row.to_thread())
        } else {
            matcher.matches(&row.thread)
        }
    };
    match &filter.ids {
        // An id list is a point lookup per id, not a scan.
        Some(ids) => {
            let mut unique = ids.clone();
            unique.sort();
            unique.dedup();
            unique
                .iter()
                .filter_map(|id| core.threads.get(id).map(|row| &**row))
                .filter(selected)
                .collect()
        }
        None => core
            .threads
            .values()
            .map(|row| &**row)
            .filter(selected)
            .collect(),
    }
}

/// A turn's outcome with its values serialised, ready to write under the lock.
pub(crate) struct Mirrored {
    values: Option<JsonText>,
    interrupts: service_types::PendingInterrupts,
    error: Option<String>,
}

impl From<ThreadMirror> for Mirrored {
    fn from(mirror: ThreadMirror) -> Self {
        Self {
            values: mirror.values.as_ref().map(JsonText::new),
            interrupts: mirror.interrupts,
            error: mirror.error,
        }
    }
}

/// Writes a turn's outcome onto a thread row with `status`.
fn apply_mirror(row: &mut ThreadRow, status: ThreadStatus, mirror: Mirrored, now: Timestamp) {
    let thread = &mut row.thread;
    thread.status = status;
    if let Some(values) = mirror.values {
        row.values = Some(values);
        thread.state_updated_at = now;
    }
    thread.interrupts = mirror.interrupts;
    match &mirror.error {
        Some(message) => {
            thread
                .metadata
                .insert("error".to_owned(), Value::from(message.clone()));
        }
        None => {
            thread.metadata.remove("error");
        }
    }
    thread.error = mirror.error;
    thread.updated_at = now;
}

/// A new thread as created now, with no state yet.
pub(crate) fn new_thread(new: NewThread, ttl: Option<ThreadTtl>, now: Timestamp) -> Thread {
    Thread {
        thread_id: new.thread_id,
        created_at: now,
        updated_at: now,
        state_updated_at: now,
        metadata: new.metadata,
        status: new.status,
        config: Value::Object(Metadata::new()),
        values: None,
        interrupts: Default::default(),
        error: None,
        ttl,
    }
}
