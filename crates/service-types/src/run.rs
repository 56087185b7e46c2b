use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Metadata, RunError, Timestamp};

/// Status of a run as the store keeps it.
///
/// SPEC adds `cancelled`; the SDKs' `interrupted` (what the reference server calls a
/// cancelled run) is accepted on input as an alias of it.
#[derive(
    Clone,
    Copy,
    Debug,
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
pub enum RunStatus {
    /// Queued, waiting for a worker or for its thread.
    Pending,
    /// A worker is executing it.
    Running,
    /// Finished (including a pause on an interrupt).
    Success,
    /// The graph failed.
    Error,
    /// Cancelled, or displaced by a multitask strategy.
    #[serde(alias = "interrupted")]
    Cancelled,
    /// Ran longer than the configured run timeout.
    Timeout,
}

impl RunStatus {
    /// True for the statuses a run never leaves.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Success => "success",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
            Self::Timeout => "timeout",
        }
    }
}

/// What a new run does when its thread is already busy.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MultitaskStrategy {
    /// Refuse with 409.
    Reject,
    /// Cancel the in-flight run, keep its checkpoints, run the new one.
    Interrupt,
    /// Cancel and delete the in-flight run and its checkpoints, run the new one.
    Rollback,
    /// Wait until the thread is free.
    #[default]
    Enqueue,
}

/// What a run on a missing thread does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IfNotExists {
    /// Create the thread.
    Create,
    /// Answer 404.
    #[default]
    Reject,
}

/// What happens to a stateless run's temporary thread once the run settles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnCompletion {
    /// Delete it.
    #[default]
    Delete,
    /// Keep it.
    Keep,
}

/// What closing a stream or wait connection does to its run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnDisconnect {
    /// Cancel the run.
    Cancel,
    /// Let it run; the client may rejoin.
    #[default]
    Continue,
}

/// When checkpoints are persisted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Before the next step starts.
    Sync,
    /// While the next step runs.
    #[default]
    Async,
    /// Only when the run exits.
    Exit,
}

/// How a cancelled run is treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelAction {
    /// Stop it and keep the checkpoints written so far.
    #[default]
    Interrupt,
    /// Stop it, then delete the run and its checkpoints.
    Rollback,
}

/// A stream mode a client may request.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
pub enum StreamMode {
    /// Whole state after each step.
    #[serde(rename = "values")]
    Values,
    /// Accumulated message events (`messages/partial` and friends).
    #[serde(rename = "messages")]
    Messages,
    /// `[chunk, metadata]` pairs, emitted under the event name `messages`.
    #[serde(rename = "messages-tuple")]
    MessagesTuple,
    /// Per-node updates.
    #[serde(rename = "updates")]
    Updates,
    /// Runtime callback events.
    #[serde(rename = "events")]
    Events,
    /// Checkpoint and task debug events.
    #[serde(rename = "debug")]
    Debug,
    /// Task start and end.
    #[serde(rename = "tasks")]
    Tasks,
    /// Checkpoints as they are written.
    #[serde(rename = "checkpoints")]
    Checkpoints,
    /// Whatever nodes write to the stream writer.
    #[serde(rename = "custom")]
    Custom,
    /// Tool calls starting, streaming output and finishing (`tool-started`,
    /// `tool-output-delta`, `tool-finished`, `tool-error`), as LangGraph emits them.
    #[serde(rename = "tools")]
    Tools,
}

impl StreamMode {
    /// Every mode, in wire order.
    pub const ALL: [StreamMode; 10] = [
        Self::Values,
        Self::Messages,
        Self::MessagesTuple,
        Self::Updates,
        Self::Events,
        Self::Debug,
        Self::Tasks,
        Self::Checkpoints,
        Self::Custom,
        Self::Tools,
    ];

    /// The requested name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Values => "values",
            Self::Messages => "messages",
            Self::MessagesTuple => "messages-tuple",
            Self::Updates => "updates",
            Self::Events => "events",
            Self::Debug => "debug",
            Self::Tasks => "tasks",
            Self::Checkpoints => "checkpoints",
            Self::Custom => "custom",
            Self::Tools => "tools",
        }
    }

    /// Parses a requested name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == name)
    }
}

/// One execution of an assistant, on a thread or stateless.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Run {
    /// Identifier (UUID v7).
    pub run_id: Uuid,
    /// Thread it runs on (a temporary thread for stateless runs).
    pub thread_id: Uuid,
    /// Always the assistant's UUID, even when created with a graph id.
    pub assistant_id: Uuid,
    /// Creation time; runs order by it, ties by run id.
    pub created_at: Timestamp,
    /// Bumps on every status change.
    pub updated_at: Timestamp,
    /// Current status.
    pub status: RunStatus,
    /// Assistant, thread and request metadata merged.
    #[schema(value_type = Object)]
    #[schema(required = true)]
    #[serde(default)]
    pub metadata: Metadata,
    /// Effective multitask strategy.
    #[schema(required = true)]
    #[serde(default)]
    pub multitask_strategy: Option<MultitaskStrategy>,
    /// The creation options (input, command, config, stream_mode, webhook, ...).
    #[schema(required = true)]
    #[serde(default)]
    pub kwargs: serde_json::Value,
    /// Present on failed runs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// Why the run was cancelled, written by the server when it cancels it; `null`
    /// for a run nobody cancelled (the peer always sends the key).
    #[serde(default)]
    pub cancel_reason: Option<String>,
    /// The W3C `traceparent` of the request that created the run, when traces are
    /// exported: the run executes later, maybe on another instance, and its spans are
    /// children of that request's. Kept beside the run, not in what clients read.
    #[serde(skip)]
    #[schema(ignore)]
    pub traceparent: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupted_is_read_as_cancelled() {
        let status: RunStatus = serde_json::from_str("\"interrupted\"").unwrap();
        assert_eq!(status, RunStatus::Cancelled);
        assert_eq!(serde_json::to_string(&status).unwrap(), "\"cancelled\"");
    }

    #[test]
    fn stream_mode_names_round_trip() {
        for mode in StreamMode::ALL {
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{}\"", mode.as_str()));
            assert_eq!(StreamMode::parse(mode.as_str()), Some(mode));
        }
    }
}
