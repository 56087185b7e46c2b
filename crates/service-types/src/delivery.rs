use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Timestamp;

/// State of a webhook delivery: pending → delivering → delivered | dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Waiting for its next attempt.
    Pending,
    /// An attempt is in flight.
    Delivering,
    /// A 2xx answered; the payload is cleared.
    Delivered,
    /// Attempts exhausted or host refused; the payload is kept for retain_hours.
    Dead,
}

impl DeliveryStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivering => "delivering",
            Self::Delivered => "delivered",
            Self::Dead => "dead",
        }
    }
}

/// A webhook delivery row as the deliveries route lists it (never with its payload).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Delivery {
    /// Stable across attempts; the receiver's deduplication key.
    pub delivery_id: Uuid,
    /// The settled run.
    pub run_id: Uuid,
    /// The run's thread.
    pub thread_id: Uuid,
    /// Current state.
    pub status: DeliveryStatus,
    /// Attempts made so far; the first inline attempt counts as 1.
    pub attempt: u32,
    /// Last failure reason.
    #[serde(default)]
    pub last_error: Option<String>,
    /// When the next retry is due.
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
    /// True when the body was cut to the payload cap.
    pub payload_truncated: bool,
    /// True while the payload is kept and a replay can send it.
    pub replayable: bool,
    /// When the row was written (at settle).
    pub created_at: Timestamp,
    /// Bumps on every state change.
    pub updated_at: Timestamp,
    /// Where it goes, redacted: an HTTP callback's host and whether its URL has a
    /// path, a channel reply's channel name (`channel <name>`). Set by the deliveries
    /// route from the run's webhook; absent when the run is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
}
