use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Interrupt, Metadata, Timestamp};

/// Pending interrupts of a thread, keyed by task id.
pub type PendingInterrupts = BTreeMap<String, Vec<Interrupt>>;

/// Status of a thread; it mirrors the latest turn.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    /// No run pending or running, last turn succeeded (or none ran).
    #[default]
    Idle,
    /// A run is pending or running on it.
    Busy,
    /// The last turn paused on an interrupt.
    Interrupted,
    /// The last turn failed.
    Error,
}

impl ThreadStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Busy => "busy",
            Self::Interrupted => "interrupted",
            Self::Error => "error",
        }
    }
}

/// How a thread is collected when its ttl expires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PruneStrategy {
    /// Delete the thread with its runs and checkpoints.
    #[default]
    Delete,
    /// Keep only the latest checkpoint.
    KeepLatest,
}

/// A thread ttl as clients send it: the SDK object `{ttl, strategy}` or a bare number
/// of minutes. `null` (clear / pin) is modelled as `Option::None` by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum TtlSetting {
    /// `{"ttl": minutes, "strategy": "delete"}` as both SDKs send it.
    Spec {
        /// Minutes until expiry.
        ttl: f64,
        /// What expiry does.
        #[serde(default)]
        strategy: PruneStrategy,
    },
    /// A bare number of minutes.
    Minutes(f64),
}

impl TtlSetting {
    /// Minutes until expiry.
    pub fn minutes(self) -> f64 {
        match self {
            Self::Spec { ttl, .. } | Self::Minutes(ttl) => ttl,
        }
    }

    /// Strategy applied at expiry.
    pub fn strategy(self) -> PruneStrategy {
        match self {
            Self::Spec { strategy, .. } => strategy,
            Self::Minutes(_) => PruneStrategy::Delete,
        }
    }

    /// True when the value is usable: positive and at most [`MAX_TTL_MINUTES`].
    pub fn is_valid(self) -> bool {
        ttl_minutes_valid(self.minutes())
    }
}

/// The longest ttl (threads and store items) in minutes: 100 years, so an expiry
/// stays a valid timestamp and a PostgreSQL interval.
pub const MAX_TTL_MINUTES: f64 = 100.0 * 365.25 * 24.0 * 60.0;

/// True when `minutes` is a usable ttl: positive and at most [`MAX_TTL_MINUTES`].
pub fn ttl_minutes_valid(minutes: f64) -> bool {
    minutes > 0.0 && minutes <= MAX_TTL_MINUTES
}

/// The ttl a thread carries, reported with `?include=ttl`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ThreadTtl {
    /// What expiry does.
    pub strategy: PruneStrategy,
    /// Configured lifetime in minutes.
    pub ttl_minutes: f64,
    /// When the thread expires; restarts when the ttl is set again.
    pub expires_at: Timestamp,
}

/// A container with persisted state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Thread {
    /// Identifier (UUID v7 when the server makes it).
    pub thread_id: Uuid,
    /// Creation time.
    pub created_at: Timestamp,
    /// Bumps on any change.
    pub updated_at: Timestamp,
    /// Bumps when values change.
    pub state_updated_at: Timestamp,
    /// Free-form metadata, filterable by containment.
    #[schema(value_type = Object)]
    #[schema(required = true)]
    #[serde(default)]
    pub metadata: Metadata,
    /// Mirrors the latest turn.
    pub status: ThreadStatus,
    /// `{}` fresh, `{"configurable":{}}` after runs.
    #[schema(required = true)]
    #[serde(default)]
    pub config: serde_json::Value,
    /// Mirrored current graph state; null until the first checkpoint.
    #[schema(required = true)]
    #[serde(default)]
    pub values: Option<serde_json::Value>,
    /// Pending interrupts keyed by task id.
    #[schema(value_type = BTreeMap<String, Vec<Interrupt>>)]
    #[schema(required = true)]
    #[serde(default)]
    pub interrupts: PendingInterrupts,
    /// Message of the latest turn's failure.
    #[serde(default)]
    pub error: Option<String>,
    /// Present only when the client asked for it (`?include=ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<ThreadTtl>,
}
