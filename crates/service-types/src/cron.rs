use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Metadata, OnCompletion, Timestamp};

/// A scheduled run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Cron {
    /// Identifier (UUID v7).
    pub cron_id: Uuid,
    /// Assistant each firing runs.
    #[schema(required = true)]
    pub assistant_id: Option<Uuid>,
    /// Target thread; null for stateless crons.
    #[schema(required = true)]
    pub thread_id: Option<Uuid>,
    /// Owner (`""` without authentication).
    #[schema(required = true)]
    #[serde(default)]
    pub user_id: Option<String>,
    /// 5-field cron expression.
    pub schedule: String,
    /// IANA time zone the schedule is read in; null means UTC.
    #[schema(required = true)]
    #[serde(default)]
    pub timezone: Option<String>,
    /// No firings after this instant.
    #[schema(required = true)]
    #[serde(default)]
    pub end_time: Option<Timestamp>,
    /// Next firing; null when the schedule never fires again.
    #[schema(required = true)]
    #[serde(default)]
    pub next_run_date: Option<Timestamp>,
    /// Run-creation body used for each firing.
    #[schema(required = true)]
    #[serde(default)]
    pub payload: serde_json::Value,
    /// Free-form metadata.
    #[schema(value_type = Object)]
    #[schema(required = true)]
    #[serde(default)]
    pub metadata: Metadata,
    /// What a stateless firing does with its thread; null for thread crons.
    #[schema(required = true)]
    #[serde(default)]
    pub on_run_completed: Option<OnCompletion>,
    /// Disabled crons are paused.
    pub enabled: bool,
    /// Creation time.
    pub created_at: Timestamp,
    /// Bumps on every change.
    pub updated_at: Timestamp,
}
