//! Crons: scheduled runs, with `next_run_date` kept by the store.

use async_trait::async_trait;
use serde_json::Value;
use service_types::{Cron, Metadata, OnCompletion, SortOrder, Timestamp};
use uuid::Uuid;

use crate::StoreResult;
use crate::containment::{self, Enforced};
use crate::ordering::{SortField, SortKey};
use crate::schedule::Schedule;
pub use service_types::CronSortBy;

/// A new cron; its schedule and timezone are validated and `next_run_date` computed.
#[derive(Clone, Debug, PartialEq)]
pub struct NewCron {
    /// Identifier chosen by the caller.
    pub cron_id: Uuid,
    /// Assistant each firing runs.
    pub assistant_id: Option<Uuid>,
    /// Target thread (must exist); `None` for stateless crons.
    pub thread_id: Option<Uuid>,
    /// Owner.
    pub user_id: Option<String>,
    /// 5-field expression.
    pub schedule: String,
    /// IANA zone; `None` is UTC.
    pub timezone: Option<String>,
    /// No firings after it.
    pub end_time: Option<Timestamp>,
    /// Run-creation body of each firing.
    pub payload: Value,
    /// Free-form metadata.
    pub metadata: Metadata,
    /// Stateless firings' thread policy.
    pub on_run_completed: Option<OnCompletion>,
    /// Paused when false.
    pub enabled: bool,
}

/// A cron patch; absent fields are unchanged, `Some(None)` clears.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CronPatch {
    /// New expression.
    pub schedule: Option<String>,
    /// New zone, or back to UTC.
    pub timezone: Option<Option<String>>,
    /// New end, or none.
    pub end_time: Option<Option<Timestamp>>,
    /// Replaces the payload.
    pub payload: Option<Value>,
    /// Shallow-merged into the metadata.
    pub metadata: Option<Metadata>,
    /// New thread policy.
    pub on_run_completed: Option<Option<OnCompletion>>,
    /// Pause or resume.
    pub enabled: Option<bool>,
}

/// The next firing of `cron` after `after` (none past its end time).
pub fn next_run(cron: &Cron, after: Timestamp) -> StoreResult<Option<Timestamp>> {
    Ok(Schedule::parse(&cron.schedule, cron.timezone.as_deref())?.next_after(after, cron.end_time))
}

impl CronPatch {
    /// Applies the patch: metadata shallow-merged, other fields replaced; a change of
    /// schedule, time zone or end time reschedules from `now`.
    pub fn apply(self, cron: &mut Cron, now: Timestamp) -> StoreResult<()> {
        let reschedule =
            self.schedule.is_some() || self.timezone.is_some() || self.end_time.is_some();
        if let Some(schedule) = self.schedule {
            cron.schedule = schedule;
        }
        if let Some(timezone) = self.timezone {
            cron.timezone = timezone;
        }
        if let Some(end_time) = self.end_time {
            cron.end_time = end_time;
        }
        if let Some(payload) = self.payload {
            cron.payload = payload;
        }
        if let Some(metadata) = self.metadata {
            cron.metadata.extend(metadata);
        }
        if let Some(on_run_completed) = self.on_run_completed {
            cron.on_run_completed = on_run_completed;
        }
        if let Some(enabled) = self.enabled {
            cron.enabled = enabled;
        }
        if reschedule {
            cron.next_run_date = next_run(cron, now)?;
        }
        cron.updated_at = now;
        Ok(())
    }
}

impl SortField<Cron> for CronSortBy {
    fn key(self, cron: &Cron) -> SortKey {
        match self {
            Self::CronId => SortKey::Id(cron.cron_id),
            Self::AssistantId => cron.assistant_id.into(),
            Self::ThreadId => cron.thread_id.into(),
            Self::CreatedAt => SortKey::Time(cron.created_at),
            Self::UpdatedAt => SortKey::Time(cron.updated_at),
            Self::NextRunDate => cron.next_run_date.into(),
            Self::EndTime => cron.end_time.into(),
        }
    }
}

/// Which crons a search or count selects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CronFilter {
    /// Only this assistant's.
    pub assistant_id: Option<Uuid>,
    /// Only this thread's.
    pub thread_id: Option<Uuid>,
    /// Only enabled (or only paused) ones.
    pub enabled: Option<bool>,
    /// Containment on metadata.
    pub metadata: Option<Metadata>,
    /// Server-set containment (ownership); a key also in `metadata` matches nothing.
    pub enforced: Option<Enforced>,
}

impl CronFilter {
    /// True when `cron` is selected.
    pub fn matches(&self, cron: &Cron) -> bool {
        self.assistant_id
            .is_none_or(|id| cron.assistant_id == Some(id))
            && self.thread_id.is_none_or(|id| cron.thread_id == Some(id))
            && self.enabled.is_none_or(|enabled| cron.enabled == enabled)
            && containment::visible(
                &cron.metadata,
                self.metadata.as_ref(),
                self.enforced.as_ref(),
            )
    }
}

/// A cron search: filter, sort (ties by id), page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CronQuery {
    /// Selection.
    pub filter: CronFilter,
    /// Sort field.
    pub sort_by: CronSortBy,
    /// Sort direction, also of the id tie-break.
    pub sort_order: SortOrder,
    /// Page size; above 1000 is rejected, absent means the max page size.
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
}

/// The crons repository.
#[async_trait]
pub trait CronsRepo: Send + Sync {
    /// Validates the schedule and zone (`Invalid` with the contract's texts), computes
    /// `next_run_date` after now, inserts. Unknown thread: `NotFound`; existing id:
    /// `Conflict`.
    async fn create(&self, new: NewCron) -> StoreResult<Cron>;

    /// The row.
    async fn get(&self, cron_id: Uuid) -> StoreResult<Option<Cron>>;

    /// Applies the patch; a changed schedule, zone or end recomputes `next_run_date`
    /// from now. Unknown: `NotFound` ("Not Found").
    async fn update(&self, cron_id: Uuid, patch: CronPatch) -> StoreResult<Cron>;

    /// Deletes it. Unknown: `NotFound` ("Not Found").
    async fn delete(&self, cron_id: Uuid) -> StoreResult<()>;

    /// Filters, sorts and pages.
    async fn search(&self, query: &CronQuery) -> StoreResult<Vec<Cron>>;

    /// Number of matches, not bounded by the page size.
    async fn count(&self, filter: &CronFilter) -> StoreResult<u64>;

    /// Pauses or resumes; resuming a cron whose `next_run_date` passed recomputes it
    /// from now so a long pause does not fire at once. Unknown: `NotFound`.
    async fn set_enabled(&self, cron_id: Uuid, enabled: bool) -> StoreResult<Cron>;

    /// Enabled crons with `next_run_date <= now`, earliest first (ties by id), at most
    /// `limit` (bounded by the max page size).
    async fn due(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Cron>>;

    /// Claims one firing: if `next_run_date` still equals `fired_for`, moves it to the
    /// next occurrence after now and returns the cron; `None` when another scheduler
    /// already advanced it (so each firing happens once across instances).
    async fn advance(&self, cron_id: Uuid, fired_for: Timestamp) -> StoreResult<Option<Cron>>;
}
