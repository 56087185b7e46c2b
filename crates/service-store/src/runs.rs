//! Runs: the run row is the queue. A queued run is a pending row; workers claim rows.

use async_trait::async_trait;
use serde_json::Value;
use service_types::{Metadata, MultitaskStrategy, Run, RunError, RunStatus, Thread, Timestamp};
use uuid::Uuid;

use crate::containment::Enforced;
use crate::deliveries::DeliveryRecord;
use crate::{NewThread, StoreError, StoreResult, ThreadMirror};

/// A new run: pending, or claimed by its creator.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// Identifier chosen by the caller.
    pub run_id: Uuid,
    /// Thread it runs on; must exist.
    pub thread_id: Uuid,
    /// Resolved assistant id.
    pub assistant_id: Uuid,
    /// Merged metadata.
    pub metadata: Metadata,
    /// Effective multitask strategy.
    pub multitask_strategy: Option<MultitaskStrategy>,
    /// Creation options (input, command, config, stream_mode, webhook...).
    pub kwargs: Value,
    /// Not claimable before this instant (`after_seconds`).
    pub available_at: Timestamp,
    /// The assistant as the run's options were built from it: the run is queued only
    /// while the assistant is still in that state (else nothing is written and the
    /// error is `Stale`), so a caller may build runs from an assistant it read
    /// earlier. `None` queues the run whatever the assistant's state.
    pub assistant_as_read: Option<AssistantStamp>,
    /// Inserted running and started, as claimed by its creator, which runs it at once:
    /// no claim follows. Due now. A run made with its thread
    /// ([`RunsRepo::create_with_thread`]) is; one on an existing thread
    /// ([`RunsRepo::create`]) only when, at its insert, that thread has no other
    /// pending or running run and no live state hold, else it is queued pending (its
    /// status says which). False queues the run pending.
    pub claimed: bool,
    /// The W3C `traceparent` of the request creating the run ([`Run::traceparent`]).
    pub traceparent: Option<String>,
}

/// Which state of an assistant something was built from: every change of an assistant
/// (an update mints a version, `set_latest` picks one, a re-creation starts again at
/// 1) changes its version or its `updated_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssistantStamp {
    /// The active version.
    pub version: i64,
    /// When the assistant row last changed.
    pub updated_at: Timestamp,
}

impl AssistantStamp {
    /// The state `assistant` is in.
    pub fn of(assistant: &service_types::Assistant) -> Self {
        Self {
            version: assistant.version,
            updated_at: assistant.updated_at,
        }
    }

    /// The `Stale` error of a run whose assistant is no longer in the state it was
    /// built from (or is gone).
    pub fn changed(assistant_id: Uuid) -> StoreError {
        StoreError::stale(format!(
            "Assistant {assistant_id} changed since it was read"
        ))
    }
}

/// A thread's run listing: newest first, ties by run id descending.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunListQuery {
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// Page size; above 1000 is clamped, absent means every run.
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
}

/// Active (pending or running) runs across threads, in queue order: oldest first, ties
/// by run id ascending. Always bounded by the max page size.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ActiveRunsQuery {
    /// Only this thread's runs.
    pub thread_id: Option<Uuid>,
    /// `Pending` or `Running` only; absent means both (other statuses select nothing).
    pub status: Option<RunStatus>,
    /// Page size, clamped to the max page size.
    pub limit: Option<usize>,
    /// Only runs whose metadata is within this ownership filter.
    pub enforced: Option<Enforced>,
}

impl ActiveRunsQuery {
    /// True when `status` is selected.
    pub fn selects(&self, status: RunStatus) -> bool {
        !status.is_terminal() && self.status.is_none_or(|wanted| wanted == status)
    }

    /// True when a run with `metadata` is within the ownership filter.
    pub fn admits(&self, metadata: &Metadata) -> bool {
        self.enforced
            .as_ref()
            .is_none_or(|enforced| enforced.admits(metadata))
    }
}

/// What a cancel request did.
#[derive(Clone, Debug, PartialEq)]
pub enum CancelOutcome {
    /// The run was pending and is now cancelled (it never started: no webhook).
    Cancelled(Run),
    /// The run is running; a durable cancel mark was set and the engine must stop it.
    Requested(Run),
    /// The run had already settled; nothing changed.
    AlreadyTerminal(Run),
}

impl CancelOutcome {
    /// The run as it is now.
    pub fn run(&self) -> &Run {
        match self {
            Self::Cancelled(run) | Self::Requested(run) | Self::AlreadyTerminal(run) => run,
        }
    }
}

/// The webhook a settling run carried.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookRequest {
    /// Target URL.
    pub url: String,
    /// The callback body (already capped); the store inserts `"status"`.
    pub payload: Metadata,
    /// True when the body was cut to the payload cap.
    pub payload_truncated: bool,
    /// The run's metadata (its owner's stamp among it), kept on the delivery row.
    pub run_metadata: Metadata,
    /// The caller attempts the delivery at once: the row is inserted with that first
    /// attempt begun (delivering, attempt 1) and leased for this long from the settle,
    /// so no claim precedes it; past the lease it is due again (the sender died).
    /// `None` inserts it pending and due now.
    pub inline_lease: Option<std::time::Duration>,
}

impl WebhookRequest {
    /// When the inline lease of a row inserted at `now` ends, if it is leased.
    pub fn lease_end(&self, now: Timestamp) -> Option<Timestamp> {
        self.inline_lease
            .map(|lease| now.plus_millis(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)))
    }
}

/// How a run ended, as the engine reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Settlement {
    /// Terminal status (success, error, cancelled or timeout).
    pub status: RunStatus,
    /// The failure, stored on the run.
    pub error: Option<RunError>,
    /// True when the run paused on an interrupt (webhook status `interrupted`).
    pub interrupted: bool,
    /// The run's webhook, if it carried one.
    pub webhook: Option<WebhookRequest>,
}

/// A run [`RunsRepo::claim_next`] took.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed {
    /// The run, now running.
    pub run: Run,
    /// Whether another pending run may be due now: false only when none is, so a
    /// worker that claimed wakes another only when there may be work for it.
    pub more_pending: bool,
}

/// A run [`RunsRepo::claim`] took by id (or a settle's [`ClaimNext`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedRun {
    /// The run, now running.
    pub run: Run,
    /// Its thread had no checkpoint, as read in the claim's own step (no run of the
    /// thread runs meanwhile, and a state edit is refused while a run is pending): the
    /// run has nothing to read. `false` when the store cannot see the checkpoints.
    pub thread_has_no_checkpoint: bool,
}

/// What [`RunsRepo::create_with_thread`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum ThreadRunCreated {
    /// The thread and its run were inserted.
    Created(Run),
    /// The thread existed already, so nothing was written: the thread as read in the
    /// same step, or `None` when it appeared too late for that read (made concurrently).
    ThreadExists(Option<Thread>),
}

/// A thread with its active runs, read in one step ([`RunsRepo::thread_and_active`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadAndActive {
    /// The thread.
    pub thread: Thread,
    /// Its pending and running runs in queue order (oldest first, ties by run id),
    /// bounded by the max page size.
    pub active: Vec<Run>,
}

/// What a settle reports of the run: its new state, not its options (reading those
/// back cost the settle a parse of the run's kwargs, and no caller needs them).
#[derive(Clone, Debug, PartialEq)]
pub struct SettledRun {
    /// The run.
    pub run_id: Uuid,
    /// Its thread.
    pub thread_id: Uuid,
    /// Its status as stored now.
    pub status: RunStatus,
    /// Its error as stored now.
    pub error: Option<RunError>,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl From<&Run> for SettledRun {
    fn from(run: &Run) -> Self {
        Self {
            run_id: run.run_id,
            thread_id: run.thread_id,
            status: run.status,
            error: run.error.clone(),
            updated_at: run.updated_at,
        }
    }
}

/// The result of [`RunsRepo::settle`].
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The run as stored now.
    pub run: SettledRun,
    /// False when the run had already settled and nothing was written.
    pub changed: bool,
    /// The delivery row written in the same step, when the run had started, carried a
    /// webhook and the store records deliveries.
    pub delivery: Option<DeliveryRecord>,
}

/// A run to claim in the same step as a settle ([`RunsRepo::settle_and_mirror`]), so a
/// worker that finishes one run and starts the next its instance queued makes one
/// round trip of the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimNext {
    /// The run to claim.
    pub run_id: Uuid,
    /// The instant it is claimed at, as [`RunsRepo::claim`] takes it.
    pub now: Timestamp,
}

/// What [`RunsRepo::settle_and_mirror`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct SettledAndMirrored {
    /// The settle's outcome.
    pub settled: Settled,
    /// Whether other runs wait on the thread, when the mirror was written; `None` when
    /// the run did not settle with the settlement's status and nothing was mirrored.
    pub others_wait: Option<bool>,
    /// The [`ClaimNext`] run, now running, when it was claimed in this step; `None`
    /// when it was not (it may still be claimable by id).
    pub next: Option<ClaimedRun>,
}

/// The status a webhook body reports for a run that settled as `status`.
pub fn webhook_status(status: RunStatus, interrupted: bool) -> &'static str {
    match status {
        RunStatus::Success if interrupted => "interrupted",
        other => other.as_str(),
    }
}

/// The terminal status a settlement results in: a cancel requested earlier wins.
pub fn final_status(settlement: &Settlement, cancel_requested: bool) -> StoreResult<RunStatus> {
    if !settlement.status.is_terminal() {
        return Err(StoreError::invalid(format!(
            "cannot settle a run as {}",
            settlement.status.as_str()
        )));
    }
    Ok(if cancel_requested {
        RunStatus::Cancelled
    } else {
        settlement.status
    })
}

/// The runs repository.
#[async_trait]
pub trait RunsRepo: Send + Sync {
    /// Inserts a pending run stamped now (or running, when `claimed` and its thread is
    /// free: see [`NewRun::claimed`]) and, in the same step, marks its thread busy and
    /// merges `thread_metadata` into the thread's metadata (the graph and assistant of
    /// its latest run), so a create that fails changes nothing. Unknown thread:
    /// `NotFound` ("Thread with ID <id> not found"); existing id: `Conflict`.
    async fn create(&self, new: NewRun, thread_metadata: Metadata) -> StoreResult<Run>;

    /// The thread and its active runs as [`RunsRepo::active`] lists them for the
    /// thread, in one step: what a run queued on the thread is checked against (its
    /// caller's scope, its multitask strategy). `None` for an unknown thread.
    async fn thread_and_active(&self, thread_id: Uuid) -> StoreResult<Option<ThreadAndActive>>;

    /// Creates a thread and its first run, pending (or running when `claimed`), in one
    /// step: a run queued on a thread made for it (stateless, or `if_not_exists:
    /// create`). `run.thread_id` must
    /// be `thread.thread_id`. The thread exists already: nothing is written and that
    /// thread is returned, so a caller that would queue the run on it anyway needs no
    /// other read; existing run id: `Conflict`.
    async fn create_with_thread(
        &self,
        thread: NewThread,
        run: NewRun,
    ) -> StoreResult<ThreadRunCreated>;

    /// The row.
    async fn get(&self, run_id: Uuid) -> StoreResult<Option<Run>>;

    /// A thread's runs, newest first (ties by run id descending).
    async fn list(&self, thread_id: Uuid, query: &RunListQuery) -> StoreResult<Vec<Run>>;

    /// The newest run of a thread (created_at then run_id descending).
    async fn latest(&self, thread_id: Uuid) -> StoreResult<Option<Run>>;

    /// Pending and running runs in queue order, bounded.
    async fn active(&self, query: &ActiveRunsQuery) -> StoreResult<Vec<Run>>;

    /// Atomically takes the oldest pending run (created_at, then run_id) with
    /// `available_at <= now` whose thread has no running run and no live state hold
    /// ([`ThreadsRepo::hold_state`]), marks it running and records that it started.
    ///
    /// [`ThreadsRepo::hold_state`]: crate::ThreadsRepo::hold_state
    async fn claim_next(&self, now: Timestamp) -> StoreResult<Option<Claimed>>;

    /// Takes one run as [`RunsRepo::claim_next`] would, when it is pending, due and its
    /// thread has no running run or state hold; `None` otherwise (taken, cancelled,
    /// delayed, or its thread busy). Lets an instance start the runs it queued without
    /// searching the queue. Says, in the same step, whether its thread has no
    /// checkpoint ([`ClaimedRun::thread_has_no_checkpoint`]).
    async fn claim(&self, run_id: Uuid, now: Timestamp) -> StoreResult<Option<ClaimedRun>>;

    /// The earliest `available_at` after `now` among pending runs, so a worker can
    /// sleep until a delayed run is due.
    async fn next_available_at(&self, now: Timestamp) -> StoreResult<Option<Timestamp>>;

    /// Cancels a pending run at once, or marks a running one cancel-requested, in the
    /// same step recording `reason` as its `cancel_reason` (a reason recorded by an
    /// earlier request stays). A terminal run is left as it is. Unknown: `NotFound`
    /// ("No runs found to cancel.").
    async fn request_cancel(&self, run_id: Uuid, reason: &str) -> StoreResult<CancelOutcome>;

    /// True when a cancel was requested for this running run.
    async fn cancel_requested(&self, run_id: Uuid) -> StoreResult<bool>;

    /// Atomically writes the terminal status (cancelled if a cancel was requested),
    /// the error, `updated_at` and, when the run had started and carries a webhook,
    /// the delivery row whose payload gets `"status"` ([`DeliveryRecord::at_settle`]:
    /// leased for its first attempt when the webhook asks for it). A terminal run is
    /// returned unchanged. Unknown: `NotFound` ("Run not found").
    async fn settle(&self, run_id: Uuid, settlement: Settlement) -> StoreResult<Settled>;

    /// Settles the run as [`RunsRepo::settle`] does and, in the same step, mirrors
    /// `mirror` onto its thread as [`ThreadsRepo::mirror_after_run`] does, but only when
    /// the run settles with the settlement's own status (it was still active and no
    /// cancel won the race): the mirror was computed for that outcome. `others_wait`
    /// is `None` when nothing was mirrored, so the caller mirrors what really happened.
    ///
    /// With `next`, also claims that run as [`RunsRepo::claim`] would, when this call
    /// settled the run (`settled.changed`) and `next` runs on another thread: a run of
    /// the settled run's own thread is left to a claim by id afterwards, as that thread
    /// was busy until this settle.
    ///
    /// [`ThreadsRepo::mirror_after_run`]: crate::ThreadsRepo::mirror_after_run
    async fn settle_and_mirror(
        &self,
        run_id: Uuid,
        settlement: Settlement,
        mirror: ThreadMirror,
        next: Option<ClaimNext>,
    ) -> StoreResult<SettledAndMirrored>;

    /// Deletes the run (its deliveries stay). Unknown: `NotFound` ("Run not found").
    async fn delete(&self, run_id: Uuid) -> StoreResult<()>;
}
