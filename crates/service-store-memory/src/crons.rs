use async_trait::async_trait;
use service_store::ordering::SortField;
use service_store::ordering::sort_rows;
use service_store::page::paginate;
use service_store::schedule::Schedule;
use service_store::text::refuse_nul;
use service_store::{
    CronFilter, CronPatch, CronQuery, CronsRepo, NewCron, StoreError, StoreResult, next_run,
};
use service_types::{Cron, Timestamp};
use uuid::Uuid;

use crate::core::MemoryCore;

fn not_found() -> StoreError {
    StoreError::not_found("Not Found")
}

/// The next firing of `cron` after `after`, from its own schedule.
#[async_trait]
impl CronsRepo for MemoryCore {
    async fn create(&self, new: NewCron) -> StoreResult<Cron> {
        refuse_nul("", &new)?;
        let now = self.env.clock.now();
        let schedule = Schedule::parse(&new.schedule, new.timezone.as_deref())?;
        let mut core = self.state.lock();
        if let Some(thread_id) = new.thread_id
            && !core.threads.contains_key(&thread_id)
        {
            return Err(StoreError::not_found(format!(
                "Thread with ID {thread_id} not found"
            )));
        }
        if core.crons.contains_key(&new.cron_id) {
            return Err(StoreError::conflict(format!(
                "Cron {} already exists",
                new.cron_id
            )));
        }
        let cron = Cron {
            cron_id: new.cron_id,
            assistant_id: new.assistant_id,
            thread_id: new.thread_id,
            user_id: new.user_id,
            next_run_date: schedule.next_after(now, new.end_time),
            schedule: new.schedule,
            timezone: new.timezone,
            end_time: new.end_time,
            payload: new.payload,
            metadata: new.metadata,
            on_run_completed: new.on_run_completed,
            enabled: new.enabled,
            created_at: now,
            updated_at: now,
        };
        if let Some(thread_id) = cron.thread_id {
            core.crons_by_thread
                .entry(thread_id)
                .or_default()
                .insert(cron.cron_id);
        }
        core.crons.insert(cron.cron_id, cron.clone());
        Ok(cron)
    }

    async fn get(&self, cron_id: Uuid) -> StoreResult<Option<Cron>> {
        Ok(self.state.lock().crons.get(&cron_id).cloned())
    }

    async fn update(&self, cron_id: Uuid, patch: CronPatch) -> StoreResult<Cron> {
        refuse_nul("", &patch)?;
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let mut cron = core.crons.get(&cron_id).cloned().ok_or_else(not_found)?;
        patch.apply(&mut cron, now)?;
        core.crons.insert(cron_id, cron.clone());
        Ok(cron)
    }

    async fn delete(&self, cron_id: Uuid) -> StoreResult<()> {
        self.state
            .lock()
            .remove_cron(cron_id)
            .map(|_| ())
            .ok_or_else(not_found)
    }

    async fn search(&self, query: &CronQuery) -> StoreResult<Vec<Cron>> {
        refuse_nul("", &query.filter)?;
        let limit = self.env.limits.search(query.limit)?;
        let mut rows = self.matching_crons(&query.filter);
        sort_rows(&mut rows, query.sort_order, |row| {
            (query.sort_by.key(row), row.cron_id)
        });
        Ok(paginate(rows, query.offset, Some(limit)))
    }

    async fn count(&self, filter: &CronFilter) -> StoreResult<u64> {
        refuse_nul("", filter)?;
        Ok(self.matching_crons(filter).len() as u64)
    }

    async fn set_enabled(&self, cron_id: Uuid, enabled: bool) -> StoreResult<Cron> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let cron = core.crons.get_mut(&cron_id).ok_or_else(not_found)?;
        let overdue = cron.next_run_date.is_some_and(|at| at <= now);
        if enabled && !cron.enabled && overdue {
            cron.next_run_date = next_run(cron, now)?;
        }
        cron.enabled = enabled;
        cron.updated_at = now;
        Ok(cron.clone())
    }

    async fn due(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Cron>> {
        let limit = self.env.limits.bounded(Some(limit));
        let core = self.state.lock();
        let mut rows: Vec<(Timestamp, Uuid)> = core
            .crons
            .values()
            .filter(|cron| cron.enabled)
            .filter_map(|cron| {
                cron.next_run_date
                    .filter(|at| *at <= now)
                    .map(|at| (at, cron.cron_id))
            })
            .collect();
        rows.sort();
        Ok(rows
            .iter()
            .take(limit)
            .filter_map(|(_, id)| core.crons.get(id))
            .cloned()
            .collect())
    }

    async fn advance(&self, cron_id: Uuid, fired_for: Timestamp) -> StoreResult<Option<Cron>> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let cron = core.crons.get_mut(&cron_id).ok_or_else(not_found)?;
        if cron.next_run_date != Some(fired_for) {
            return Ok(None);
        }
        cron.next_run_date = next_run(cron, now.max(fired_for))?;
        cron.updated_at = now;
        Ok(Some(cron.clone()))
    }
}

impl MemoryCore {
    fn matching_crons(&self, filter: &CronFilter) -> Vec<Cron> {
        let core = self.state.lock();
        match filter.thread_id {
            Some(thread_id) => core
                .crons_by_thread
                .get(&thread_id)
                .into_iter()
                .flatten()
                .filter_map(|id| core.crons.get(id))
                .filter(|cron| filter.matches(cron))
                .cloned()
                .collect(),
            None => core
                .crons
                .values()
                .filter(|cron| filter.matches(cron))
                .cloned()
                .collect(),
        }
    }
}
