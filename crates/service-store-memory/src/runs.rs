use async_trait::async_trait;
use service_graph::InMemorySaver;
use service_store::page::paginate;
use service_store::text::refuse_nul;
use service_store::{
    ActiveRunsQuery, AssistantStamp, CancelOutcome, ClaimNext, Claimed, ClaimedRun, DeliveryRecord,
    ErrorKind, NewRun, NewThread, RunListQuery, RunsRepo, Settled, SettledAndMirrored, SettledRun,
    Settlement, StoreError, StoreResult, ThreadAndActive, ThreadMirror, ThreadRunCreated,
    final_status,
};
use service_types::{JsonText, Metadata, Run, RunStatus, ThreadStatus, Timestamp};
use uuid::Uuid;

use crate::core::{Core, MemoryCore, RunKey, RunRow, ThreadRow};
use crate::threads::{Mirrored, new_thread, ttl_from};

fn run_not_found() -> StoreError {
    StoreError::not_found("Run not found")
}

impl Core {
    /// The pending and running runs of a thread, oldest first (ties by run id).
    fn active_of(&self, thread_id: Uuid) -> impl Iterator<Item = &RunRow> {
        self.runs_by_thread
            .get(&thread_id)
            .into_iter()
            .flatten()
            .filter_map(|(_, id)| self.runs.get(id))
            .filter(|row| !row.run.status.is_terminal())
            .map(|row| &**row)
    }

    /// True when a run created on `thread_id` may start at once: no other run of the
    /// thread is pending or running and no state hold lives.
    fn thread_idle(&self, thread_id: Uuid, now: Timestamp) -> bool {
        self.active_of(thread_id).next().is_none() && self.thread_free(thread_id, now)
    }

    /// The oldest pending run due by `now` whose thread has no running run.
    fn next_claimable(&self, now: Timestamp) -> Option<Uuid> {
        self.pending
            .iter()
            .filter_map(|(_, id)| self.runs.get(id))
            .find(|row| row.available_at <= now && self.thread_free(row.run.thread_id, now))
            .map(|row| row.run.run_id)
    }

    /// Claims one run (see [`RunsRepo::claim`]), asking `checkpoints` (when the store
    /// sees them) whether its thread has any.
    fn claim(
        &mut self,
        run_id: Uuid,
        now: Timestamp,
        checkpoints: Option<&InMemorySaver>,
    ) -> Option<ClaimedRun> {
        let row = self.runs.get(&run_id)?;
        let thread_id = row.run.thread_id;
        let claimable = row.run.status == RunStatus::Pending
            && row.available_at <= now
            && self.thread_free(thread_id, now);
        if !claimable {
            return None;
        }
        let thread_has_no_checkpoint =
            checkpoints.is_some_and(|saver| !saver.has_checkpoints(&thread_id.to_string()));
        let row = self.set_run_status(run_id, RunStatus::Running, now)?;
        row.started = true;
        Some(ClaimedRun {
            run: row.to_run(),
            thread_has_no_checkpoint,
        })
    }

    /// Settles a run (see [`RunsRepo::settle`]).
    fn settle(
        &mut self,
        run_id: Uuid,
        settlement: Settlement,
        now: Timestamp,
    ) -> StoreResult<Settled> {
        let row = self.runs.get(&run_id).ok_or_else(run_not_found)?;
        if row.run.status.is_terminal() {
            return Ok(Settled {
                run: SettledRun::from(&row.run),
                changed: false,
                delivery: None,
            });
        }
        let cancel_won = row.cancel_requested;
        let status = final_status(&settlement, cancel_won)?;
        let started = row.started;
        let row = self
            .set_run_status(run_id, status, now)
            .ok_or_else(run_not_found)?;
        row.run.error = if cancel_won { None } else { settlement.error };
        let run = SettledRun::from(&row.run);
        let delivery = match settlement.webhook {
            Some(webhook) if started => {
                let record = DeliveryRecord::at_settle(
                    run.run_id,
                    run.thread_id,
                    status,
                    settlement.interrupted,
                    webhook,
                    now,
                );
                self.insert_delivery(record.clone());
                Some(record)
            }
            _ => None,
        };
        Ok(Settled {
            run,
            changed: true,
            delivery,
        })
    }
}

#[async_trait]
impl RunsRepo for MemoryCore {
    async fn create(&self, new: NewRun, thread_metadata: Metadata) -> StoreResult<Run> {
        refuse_nul("", &new)?;
        refuse_nul("metadata", &thread_metadata)?;
        let now = self.env.clock.now();
        self.check_assistant(&new)?;
        // Serialised before taking the store's lock.
        let (mut run, mut row, kwargs) = new_run(new, now);
        let mut core = self.state.lock();
        if !core.threads.contains_key(&run.thread_id) {
            return Err(StoreError::not_found(format!(
                "Thread with ID {} not found",
                run.thread_id
            )));
        }
        check_new_run_id(&core, run.run_id)?;
        if run.status == RunStatus::Running
            && (row.available_at > now || !core.thread_idle(run.thread_id, now))
        {
            // Asked to be claimed, but the thread is not free for it: queued.
            run.status = RunStatus::Pending;
            row.run.status = RunStatus::Pending;
            row.started = false;
        }
        // Every check passed: the thread and the run change together, under one lock.
        let thread = &mut core.thread_mut(run.thread_id)?.thread;
        thread.metadata.extend(thread_metadata);
        thread.status = ThreadStatus::Busy;
        thread.updated_at = now;
        core.insert_run(row);
        run.kwargs = kwargs;
        Ok(run)
    }

    async fn create_with_thread(
        &self,
        thread: NewThread,
        new: NewRun,
    ) -> StoreResult<ThreadRunCreated> {
        if thread.thread_id != new.thread_id {
            return Err(StoreError::invalid(
                "a new thread's run must name that thread",
            ));
        }
        refuse_nul("", &thread)?;
        refuse_nul("", &new)?;
        let now = self.env.clock.now();
        let ttl = thread
            .ttl
            .map(|setting| ttl_from(setting, now))
            .transpose()?;
        let thread = new_thread(thread, ttl, now);
        let stale = self.check_assistant(&new);
        let (mut run, row, kwargs) = new_run(new, now);
        let mut core = self.state.lock();
        if let Some(existing) = core.threads.get(&thread.thread_id) {
            return Ok(ThreadRunCreated::ThreadExists(Some(existing.to_thread())));
        }
        stale?;
        check_new_run_id(&core, run.run_id)?;
        core.threads
            .insert(thread.thread_id, Box::new(ThreadRow::new(thread)));
        core.insert_run(row);
        run.kwargs = kwargs;
        Ok(ThreadRunCreated::Created(run))
    }

    async fn thread_and_active(&self, thread_id: Uuid) -> StoreResult<Option<ThreadAndActive>> {
        let limit = self.env.limits.bounded(None);
        let core = self.state.lock();
        let Some(thread) = core.threads.get(&thread_id) else {
            return Ok(None);
        };
        let active = core
            .active_of(thread_id)
            .take(limit)
            .map(|row| row.to_run())
            .collect();
        Ok(Some(ThreadAndActive {
            thread: thread.to_thread(),
            active,
        }))
    }

    async fn get(&self, run_id: Uuid) -> StoreResult<Option<Run>> {
        Ok(self.state.lock().runs.get(&run_id).map(|row| row.to_run()))
    }

    async fn list(&self, thread_id: Uuid, query: &RunListQuery) -> StoreResult<Vec<Run>> {
        let limit = self.env.limits.runs(query.limit);
        let core = self.state.lock();
        let Some(keys) = core.runs_by_thread.get(&thread_id) else {
            return Ok(Vec::new());
        };
        let rows = keys
            .iter()
            .rev()
            .filter_map(|(_, id)| core.runs.get(id))
            .filter(|row| query.status.is_none_or(|status| row.run.status == status))
            .map(|row| row.to_run());
        Ok(paginate(rows, query.offset, limit))
    }

    async fn latest(&self, thread_id: Uuid) -> StoreResult<Option<Run>> {
        let core = self.state.lock();
        let newest = core
            .runs_by_thread
            .get(&thread_id)
            .and_then(|keys| keys.last());
        Ok(newest
            .and_then(|(_, id)| core.runs.get(id))
            .map(|row| row.to_run()))
    }

    async fn active(&self, query: &ActiveRunsQuery) -> StoreResult<Vec<Run>> {
        let limit = self.env.limits.bounded(query.limit);
        let core = self.state.lock();
        let mut keys: Vec<RunKey> = match query.thread_id {
            Some(thread_id) => core
                .runs_by_thread
                .get(&thread_id)
                .into_iter()
                .flatten()
                .copied()
                .collect(),
            // An ownership filter is checked on every active run, not on a first page.
            None if query.enforced.is_some() => core
                .pending
                .iter()
                .chain(core.running.iter())
                .copied()
                .collect(),
            None => core
                .pending
                .iter()
                .take(limit)
                .chain(core.running.iter().take(limit))
                .copied()
                .collect(),
        };
        keys.sort();
        let rows = keys
            .iter()
            .filter_map(|(_, id)| core.runs.get(id))
            .filter(|row| query.selects(row.run.status))
            .map(|row| row.to_run())
            .filter(|run| query.admits(&run.metadata))
            .take(limit);
        Ok(rows.collect())
    }

    async fn claim_next(&self, now: Timestamp) -> StoreResult<Option<Claimed>> {
        let mut core = self.state.lock();
        let Some(run_id) = core.next_claimable(now) else {
            return Ok(None);
        };
        let row = core
            .set_run_status(run_id, RunStatus::Running, now)
            .ok_or_else(run_not_found)?;
        row.started = true;
        let run = row.to_run();
        Ok(Some(Claimed {
            run,
            more_pending: core.next_claimable(now).is_some(),
        }))
    }

    async fn claim(&self, run_id: Uuid, now: Timestamp) -> StoreResult<Option<ClaimedRun>> {
        let checkpoints = self.env.checkpoints.as_deref();
        Ok(self.state.lock().claim(run_id, now, checkpoints))
    }

    async fn next_available_at(&self, now: Timestamp) -> StoreResult<Option<Timestamp>> {
        let core = self.state.lock();
        let earliest = core
            .pending
            .iter()
            .filter_map(|(_, id)| core.runs.get(id))
            .map(|row| row.available_at)
            .filter(|at| *at > now)
            .min();
        Ok(earliest)
    }

    async fn request_cancel(&self, run_id: Uuid, reason: &str) -> StoreResult<CancelOutcome> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let row = core
            .runs
            .get_mut(&run_id)
            .ok_or_else(|| StoreError::not_found("No runs found to cancel."))?;
        if !row.run.status.is_terminal() {
            row.run
                .cancel_reason
                .get_or_insert_with(|| reason.to_owned());
        }
        match row.run.status {
            RunStatus::Pending => {
                let row = core
                    .set_run_status(run_id, RunStatus::Cancelled, now)
                    .ok_or_else(run_not_found)?;
                Ok(CancelOutcome::Cancelled(row.to_run()))
            }
            RunStatus::Running => {
                row.cancel_requested = true;
                Ok(CancelOutcome::Requested(row.to_run()))
            }
            _ => Ok(CancelOutcome::AlreadyTerminal(row.to_run())),
        }
    }

    async fn cancel_requested(&self, run_id: Uuid) -> StoreResult<bool> {
        let core = self.state.lock();
        Ok(core
            .runs
            .get(&run_id)
            .ok_or_else(run_not_found)?
            .cancel_requested)
    }

    async fn settle(&self, run_id: Uuid, settlement: Settlement) -> StoreResult<Settled> {
        let now = self.env.clock.now();
        self.state.lock().settle(run_id, settlement, now)
    }

    async fn settle_and_mirror(
        &self,
        run_id: Uuid,
        settlement: Settlement,
        mirror: ThreadMirror,
        next: Option<ClaimNext>,
    ) -> StoreResult<SettledAndMirrored> {
        let now = self.env.clock.now();
        let requested = settlement.status;
        // Serialised before taking the lock.
        let (status, mirror) = (mirror.status, Mirrored::from(mirror));
        let mut core = self.state.lock();
        let settled = core.settle(run_id, settlement, now)?;
        let others_wait = if settled.changed && settled.run.status == requested {
            match core.mirror_after_run(settled.run.thread_id, status, mirror, now) {
                Ok(others_wait) => Some(others_wait),
                Err(error) if error.kind == ErrorKind::NotFound => Some(false),
                Err(error) => return Err(error),
            }
        } else {
            None
        };
        let next = next
            .filter(|next| {
                settled.changed
                    && core
                        .runs
                        .get(&next.run_id)
                        .is_some_and(|row| row.run.thread_id != settled.run.thread_id)
            })
            .and_then(|next| core.claim(next.run_id, next.now, self.env.checkpoints.as_deref()));
        Ok(SettledAndMirrored {
            settled,
            others_wait,
            next,
        })
    }

    async fn delete(&self, run_id: Uuid) -> StoreResult<()> {
        let mut core = self.state.lock();
        core.remove_run(run_id)
            .map(|_| ())
            .ok_or_else(run_not_found)
    }
}

impl MemoryCore {
    /// A new run's assistant precondition. Checked before the run is inserted, not
    /// atomically with it: in one process the engine that queues runs also sees every
    /// assistant change, and two writes racing here were never ordered anyway.
    fn check_assistant(&self, new: &NewRun) -> StoreResult<()> {
        match new.assistant_as_read {
            Some(as_read) if self.assistants.stamp(new.assistant_id) != Some(as_read) => {
                Err(AssistantStamp::changed(new.assistant_id))
            }
            _ => Ok(()),
        }
    }
}

/// A run as inserted now (pending, or running and started when its creator claimed
/// it): the run (kwargs left out), its row, and the kwargs.
fn new_run(new: NewRun, now: Timestamp) -> (Run, RunRow, serde_json::Value) {
    let run = Run {
        run_id: new.run_id,
        thread_id: new.thread_id,
        assistant_id: new.assistant_id,
        created_at: now,
        updated_at: now,
        status: if new.claimed {
            RunStatus::Running
        } else {
            RunStatus::Pending
        },
        metadata: new.metadata,
        multitask_strategy: new.multitask_strategy,
        kwargs: serde_json::Value::Null,
        error: None,
        cancel_reason: None,
        traceparent: new.traceparent,
    };
    let mut row = RunRow::new(run.clone(), JsonText::new(&new.kwargs), new.available_at);
    row.started = new.claimed;
    (run, row, new.kwargs)
}

fn check_new_run_id(core: &Core, run_id: Uuid) -> StoreResult<()> {
    if core.runs.contains_key(&run_id) {
        return Err(StoreError::conflict(format!("Run {run_id} already exists")));
    }
    Ok(())
}
