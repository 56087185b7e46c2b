//! Threads, runs, crons and deliveries: one lock, because their changes are atomic
//! together (a thread delete cascades to runs and crons; a settle writes a delivery).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use service_store::DeliveryRecord;
use service_types::{Cron, JsonText, Run, RunStatus, Thread, Timestamp};
use uuid::Uuid;

use crate::Env;
use crate::assistants::MemoryAssistants;

/// The shared repository object behind the threads, runs, crons and deliveries traits.
#[derive(Debug)]
pub(crate) struct MemoryCore {
    pub(crate) env: Env,
    pub(crate) state: Mutex<Core>,
    /// Read for a new run's assistant precondition (`NewRun::assistant_as_read`).
    pub(crate) assistants: Arc<MemoryAssistants>,
}

impl MemoryCore {
    pub(crate) fn new(env: Env, assistants: Arc<MemoryAssistants>) -> Self {
        Self {
            env,
            state: Mutex::default(),
            assistants,
        }
    }
}

/// A thread as the store keeps it.
#[derive(Debug)]
pub(crate) struct ThreadRow {
    /// The thread with `values` left `None`; [`ThreadRow::to_thread`] puts them back.
    pub(crate) thread: Thread,
    /// The state values as text: a `Value` tree costs several times its JSON in
    /// memory, and only reads need it.
    pub(crate) values: Option<JsonText>,
}

impl ThreadRow {
    /// A row of `thread`, its values kept as text.
    pub(crate) fn new(mut thread: Thread) -> Self {
        let values = thread.values.take().map(|values| JsonText::new(&values));
        Self { thread, values }
    }

    /// The whole thread, values included.
    pub(crate) fn to_thread(&self) -> Thread {
        Thread {
            // Written by `new` or `mirror` from a `Value`, so it reads back.
            values: self.values.as_ref().and_then(|text| text.parse().ok()),
            ..self.thread.clone()
        }
    }
}

/// A run row plus the queue columns the wire type does not show. The kwargs (input,
/// config, options) and the metadata are kept as JSON text: most rows sit finished and
/// are rarely read.
#[derive(Clone, Debug)]
pub(crate) struct RunRow {
    /// The run with `kwargs` left `Null` and `metadata` empty; [`RunRow::to_run`] puts
    /// them back.
    pub(crate) run: Run,
    kwargs: JsonText,
    metadata: JsonText,
    pub(crate) available_at: Timestamp,
    pub(crate) started: bool,
    pub(crate) cancel_requested: bool,
}

impl RunRow {
    /// A new, unstarted row of `run` (whose own `kwargs` are ignored), its kwargs and
    /// its metadata.
    pub(crate) fn new(mut run: Run, kwargs: JsonText, available_at: Timestamp) -> Self {
        run.kwargs = serde_json::Value::Null;
        let metadata = JsonText::new(&std::mem::take(&mut run.metadata));
        Self {
            run,
            kwargs,
            metadata,
            available_at,
            started: false,
            cancel_requested: false,
        }
    }

    /// The whole run, kwargs included.
    pub(crate) fn to_run(&self) -> Run {
        Run {
            // Written by `new` from `Value`s, so they read back.
            kwargs: self.kwargs.parse().unwrap_or_default(),
            metadata: self.metadata.parse().unwrap_or_default(),
            ..self.run.clone()
        }
    }
}

/// Queue order and per-thread order of runs: created_at, then run id.
pub(crate) type RunKey = (Timestamp, Uuid);

fn run_key(run: &Run) -> RunKey {
    (run.created_at, run.run_id)
}

/// What the status indexes need of a run, copied out so a status change never clones
/// the run's kwargs.
#[derive(Clone, Copy)]
struct Indexed {
    key: RunKey,
    thread_id: Uuid,
    status: RunStatus,
}

impl From<&Run> for Indexed {
    fn from(run: &Run) -> Self {
        Self {
            key: run_key(run),
            thread_id: run.thread_id,
            status: run.status,
        }
    }
}

/// The tables and their indexes.
#[derive(Debug, Default)]
pub(crate) struct Core {
    pub(crate) threads: HashMap<Uuid, Box<ThreadRow>>,
    pub(crate) runs: HashMap<Uuid, Box<RunRow>>,
    /// Every run of a thread, in key order. A sorted `Vec`: most threads have a few
    /// runs, and new keys (created now) go at the end.
    pub(crate) runs_by_thread: HashMap<Uuid, Vec<RunKey>>,
    /// Pending runs in claim order.
    pub(crate) pending: BTreeSet<RunKey>,
    /// Running runs in start order.
    pub(crate) running: BTreeSet<RunKey>,
    /// Threads with a running run (the per-thread execution claim).
    pub(crate) busy_threads: HashMap<Uuid, Uuid>,
    /// State holds by thread: the hold's id and when its lease ends.
    pub(crate) state_holds: HashMap<Uuid, (Uuid, Timestamp)>,
    pub(crate) crons: HashMap<Uuid, Cron>,
    pub(crate) crons_by_thread: HashMap<Uuid, BTreeSet<Uuid>>,
    pub(crate) deliveries: HashMap<Uuid, DeliveryRecord>,
    /// Deliveries of a run, oldest first.
    pub(crate) deliveries_by_run: HashMap<Uuid, BTreeSet<(Timestamp, Uuid)>>,
}

impl Core {
    /// Inserts a run row and indexes it.
    pub(crate) fn insert_run(&mut self, row: RunRow) {
        let key = run_key(&row.run);
        let keys = self.runs_by_thread.entry(row.run.thread_id).or_default();
        if let Err(at) = keys.binary_search(&key) {
            keys.insert(at, key);
        }
        self.index_status(Indexed::from(&row.run), true);
        self.runs.insert(row.run.run_id, Box::new(row));
    }

    /// Removes a run row and its index entries.
    pub(crate) fn remove_run(&mut self, run_id: Uuid) -> Option<RunRow> {
        let row = self.runs.remove(&run_id)?;
        let key = run_key(&row.run);
        if let Some(keys) = self.runs_by_thread.get_mut(&row.run.thread_id) {
            if let Ok(at) = keys.binary_search(&key) {
                keys.remove(at);
            }
            if keys.is_empty() {
                self.runs_by_thread.remove(&row.run.thread_id);
            }
        }
        self.index_status(Indexed::from(&row.run), false);
        Some(*row)
    }

    /// Moves a run to `status`, keeping the queue indexes in step.
    pub(crate) fn set_run_status(
        &mut self,
        run_id: Uuid,
        status: RunStatus,
        now: Timestamp,
    ) -> Option<&mut RunRow> {
        let before = Indexed::from(&self.runs.get(&run_id)?.run);
        self.index_status(before, false);
        self.index_status(Indexed { status, ..before }, true);
        let row = self.runs.get_mut(&run_id)?;
        row.run.status = status;
        row.run.updated_at = now;
        Some(row)
    }

    fn index_status(&mut self, run: Indexed, present: bool) {
        let Indexed { key, thread_id, .. } = run;
        let run_id = key.1;
        match (run.status, present) {
            (RunStatus::Pending, true) => {
                self.pending.insert(key);
            }
            (RunStatus::Pending, false) => {
                self.pending.remove(&key);
            }
            (RunStatus::Running, true) => {
                self.running.insert(key);
                self.busy_threads.insert(thread_id, run_id);
            }
            (RunStatus::Running, false) => {
                self.running.remove(&key);
                if self.busy_threads.get(&thread_id) == Some(&run_id) {
                    self.busy_threads.remove(&thread_id);
                }
            }
            _ => {}
        }
    }

    /// True when a run of `thread_id` may start at `now`: no run of the thread is
    /// running and no state hold lives.
    pub(crate) fn thread_free(&self, thread_id: Uuid, now: Timestamp) -> bool {
        !self.busy_threads.contains_key(&thread_id)
            && self
                .state_holds
                .get(&thread_id)
                .is_none_or(|(_, until)| *until <= now)
    }

    /// Removes a cron and its index entry.
    pub(crate) fn remove_cron(&mut self, cron_id: Uuid) -> Option<Cron> {
        let cron = self.crons.remove(&cron_id)?;
        if let Some(thread_id) = cron.thread_id
            && let Some(ids) = self.crons_by_thread.get_mut(&thread_id)
        {
            ids.remove(&cron_id);
            if ids.is_empty() {
                self.crons_by_thread.remove(&thread_id);
            }
        }
        Some(cron)
    }

    /// Inserts a delivery row and indexes it.
    pub(crate) fn insert_delivery(&mut self, record: DeliveryRecord) {
        let key = (record.delivery.created_at, record.delivery.delivery_id);
        self.deliveries_by_run
            .entry(record.delivery.run_id)
            .or_default()
            .insert(key);
        self.deliveries.insert(record.delivery.delivery_id, record);
    }
}
