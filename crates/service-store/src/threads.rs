//! Threads: metadata, ttl, mirrored graph state, and searches with enforced metadata.

use async_trait::async_trait;
use serde_json::Value;
use service_types::{
    IfExists, MAX_TTL_MINUTES, Metadata, PendingInterrupts, SortOrder, Thread, ThreadStatus,
    Timestamp, TtlSetting,
};
use uuid::Uuid;

use crate::containment::{self, Enforced};
use crate::ordering::{SortField, SortKey};
use crate::{StoreError, StoreResult};
pub use service_types::ThreadSortBy;

/// A new thread; values null.
#[derive(Clone, Debug, PartialEq)]
pub struct NewThread {
    /// Identifier chosen by the caller.
    pub thread_id: Uuid,
    /// Free-form metadata.
    pub metadata: Metadata,
    /// Idle, or busy for a thread made to run something at once.
    pub status: ThreadStatus,
    /// Lifetime; the caller resolves configured defaults. `None` lives until deleted.
    pub ttl: Option<TtlSetting>,
}

/// How a patch treats the ttl.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum TtlChange {
    /// Leave it (field absent).
    #[default]
    Keep,
    /// Remove it, pinning the thread (explicit null).
    Clear,
    /// Set it; the clock restarts now.
    Set(TtlSetting),
}

/// A thread patch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadPatch {
    /// Shallow-merged into the metadata.
    pub metadata: Option<Metadata>,
    /// The ttl change.
    pub ttl: TtlChange,
}

/// Graph state the engine mirrors onto the thread row after a turn.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadMirror {
    /// New status.
    pub status: ThreadStatus,
    /// New state values; `None` leaves them (and `state_updated_at`) unchanged.
    pub values: Option<Value>,
    /// Pending interrupts keyed by task id (replaces the previous set).
    pub interrupts: PendingInterrupts,
    /// Failure message: sets `error` and `metadata.error`; `None` clears both.
    pub error: Option<String>,
}

impl SortField<Thread> for ThreadSortBy {
    fn key(self, thread: &Thread) -> SortKey {
        match self {
            Self::ThreadId => SortKey::Id(thread.thread_id),
            Self::Status => SortKey::Text(thread.status.as_str().to_owned()),
            Self::CreatedAt => SortKey::Time(thread.created_at),
            Self::UpdatedAt => SortKey::Time(thread.updated_at),
            Self::StateUpdatedAt => SortKey::Time(thread.state_updated_at),
        }
    }
}

/// Which threads a search or count selects; every field is ANDed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadFilter {
    /// Only these ids.
    pub ids: Option<Vec<Uuid>>,
    /// Containment on metadata, from the request.
    pub metadata: Option<Metadata>,
    /// Server-set containment (ownership); a key also in `metadata` matches nothing.
    pub enforced: Option<Enforced>,
    /// Exact status.
    pub status: Option<ThreadStatus>,
    /// Containment on values (a thread with null values never matches).
    pub values: Option<Metadata>,
    /// Threads whose metadata contains any of these are left out.
    pub exclude_metadata: Vec<Metadata>,
}

impl ThreadFilter {
    /// The request and enforced metadata merged: a row must contain one of them (none:
    /// the filter matches nothing).
    pub fn effective_metadata(&self) -> Vec<Metadata> {
        containment::merge_enforced(self.metadata.as_ref(), self.enforced.as_ref())
    }

    /// A matcher with the metadata merge done once.
    pub fn matcher(&self) -> ThreadMatcher<'_> {
        ThreadMatcher {
            filter: self,
            metadata: self.effective_metadata(),
        }
    }
}

/// A [`ThreadFilter`] ready to test rows.
#[derive(Debug)]
pub struct ThreadMatcher<'a> {
    filter: &'a ThreadFilter,
    metadata: Vec<Metadata>,
}

impl ThreadMatcher<'_> {
    /// True when `thread` is selected.
    pub fn matches(&self, thread: &Thread) -> bool {
        let filter = self.filter;
        filter
            .ids
            .as_ref()
            .is_none_or(|ids| ids.contains(&thread.thread_id))
            && containment::contains_any(&thread.metadata, &self.metadata)
            && !filter
                .exclude_metadata
                .iter()
                .any(|excluded| containment::contains_object(&thread.metadata, excluded))
            && filter.status.is_none_or(|status| thread.status == status)
            && filter
                .values
                .as_ref()
                .is_none_or(|wanted| match &thread.values {
                    Some(Value::Object(values)) => containment::contains_object(values, wanted),
                    _ => false,
                })
    }
}

/// A thread search: filter, sort (ties by id), page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadQuery {
    /// Selection.
    pub filter: ThreadFilter,
    /// Sort field.
    pub sort_by: ThreadSortBy,
    /// Sort direction, also of the id tie-break.
    pub sort_order: SortOrder,
    /// Page size; above 1000 is rejected, absent means the max page size.
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
}

/// A thread's state hold, taken by [`ThreadsRepo::hold_state`]: while it lives no run
/// of the thread is claimed, so a state edit never races the thread's graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateHold {
    /// The held thread.
    pub thread_id: Uuid,
    /// This hold, so a release never ends a later hold of the same thread.
    pub hold_id: Uuid,
}

impl StateHold {
    /// The `Conflict` of a state edit on a thread with an active run or another edit
    /// (the reference servers' text).
    pub fn thread_busy() -> StoreError {
        StoreError::conflict("Thread is busy with a running job. Cannot update state.")
    }
}

/// Checks a ttl value before it is stored.
pub fn validate_ttl(ttl: TtlSetting) -> StoreResult<()> {
    if ttl.is_valid() {
        Ok(())
    } else {
        Err(ttl_refused())
    }
}

/// The `Invalid` error of a ttl out of bounds (threads and store items).
pub(crate) fn ttl_refused() -> StoreError {
    StoreError::invalid(format!(
        "ttl must be a positive number of minutes, at most {MAX_TTL_MINUTES} (100 years)"
    ))
}

/// The threads repository. Thread rows carry `ttl` (strategy, minutes, expires_at);
/// the HTTP layer drops it unless the client asked for it.
#[async_trait]
pub trait ThreadsRepo: Send + Sync {
    /// Creates an idle thread. An existing id is `Conflict` ("Thread with ID <id>
    /// already exists") with [`IfExists::Raise`], or returns the existing row.
    async fn create(&self, new: NewThread, if_exists: IfExists) -> StoreResult<Thread>;

    /// The row, expired or not (expired threads stay readable until swept).
    async fn get(&self, thread_id: Uuid) -> StoreResult<Option<Thread>>;

    /// Merges metadata and changes the ttl; bumps `updated_at`. Unknown: `NotFound`.
    async fn patch(&self, thread_id: Uuid, patch: ThreadPatch) -> StoreResult<Thread>;

    /// Sets the status only (e.g. busy when a run is queued). Unknown: `NotFound`.
    async fn set_status(&self, thread_id: Uuid, status: ThreadStatus) -> StoreResult<()>;

    /// Mirrors a turn's outcome (status, values, interrupts, error and
    /// `metadata.error`). Unknown: `NotFound`.
    async fn mirror(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<()>;

    /// Mirrors a finished run's outcome as [`ThreadsRepo::mirror`] does, except that
    /// the thread stays busy while other runs (pending or running) wait on it; returns
    /// whether any do. One step, so a run queued meanwhile is either seen here or finds
    /// the thread already released. Unknown: `NotFound`.
    async fn mirror_after_run(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<bool>;

    /// Takes the thread's state hold until `until`, in one step with the check that no
    /// run is pending or running on the thread and no other hold lives (else
    /// `Conflict`, [`StateHold::thread_busy`]). Until it is released or `until` passes
    /// (the lease a crashed holder leaves behind), claims skip the thread's runs; runs
    /// created meanwhile stay pending. Unknown thread: `NotFound`.
    async fn hold_state(&self, thread_id: Uuid, until: Timestamp) -> StoreResult<StateHold>;

    /// Ends `hold` (nothing when it already ended or the thread is gone), so the
    /// thread's pending runs can be claimed again.
    async fn release_state(&self, hold: StateHold) -> StoreResult<()>;

    /// Deletes the thread, its runs and its thread-scoped crons, in one step (its
    /// deliveries stay). Unknown: `NotFound` ("Thread with ID <id> not found").
    async fn delete(&self, thread_id: Uuid) -> StoreResult<()>;

    /// Filters, sorts and pages.
    async fn search(&self, query: &ThreadQuery) -> StoreResult<Vec<Thread>>;

    /// Number of matches, not bounded by the page size.
    async fn count(&self, filter: &ThreadFilter) -> StoreResult<u64>;

    /// Copies metadata, config, values, interrupts and error of `source` into a new
    /// idle thread `new_id` without a ttl. Unknown source: `NotFound`.
    async fn copy(&self, source: Uuid, new_id: Uuid) -> StoreResult<Thread>;

    /// Ids of threads whose ttl expired at or before `now`, earliest expiry first (ties
    /// by id), at most `limit` (bounded by the max page size).
    async fn expired(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Uuid>>;
}
