use serde::{Deserialize, Serialize};

use crate::{Metadata, Timestamp};

/// A pending interrupt: the value a node passed to `interrupt()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    /// Opaque id (32 hex chars); a resume map is keyed by it.
    pub id: String,
    /// The interrupt value.
    pub value: serde_json::Value,
}

/// Coordinates of a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Thread the checkpoint belongs to (absent in run-creation bodies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// `""` for the root graph.
    #[serde(default)]
    pub checkpoint_ns: String,
    /// The checkpoint id.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    /// Namespace to checkpoint id map for subgraphs; omitted when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_map: Option<Metadata>,
}

/// A task of a thread state: a node that ran or is about to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadTask {
    /// Task id.
    pub id: String,
    /// Node name.
    pub name: String,
    /// A JSON-encoded RunError, so clients can rebuild a stream error from it.
    #[serde(default)]
    pub error: Option<String>,
    /// Interrupts raised by this task.
    #[serde(default)]
    pub interrupts: Vec<Interrupt>,
    /// Set when the task is a subgraph.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// Nested subgraph state, when asked for.
    #[serde(default)]
    pub state: Option<Box<ThreadState>>,
    /// Writes of a finished task.
    #[serde(default)]
    pub result: Option<serde_json::Value>,
}

/// A thread's state at one checkpoint, as the state and history routes return it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadState {
    /// The state values (`{}` for an empty thread).
    pub values: serde_json::Value,
    /// Nodes still to run; non-empty when paused or failed mid-graph.
    #[serde(default)]
    pub next: Vec<String>,
    /// Tasks of this step.
    #[serde(default)]
    pub tasks: Vec<ThreadTask>,
    /// This checkpoint; null for an empty thread.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// The parent checkpoint; null for the first one.
    #[serde(default)]
    pub parent_checkpoint: Option<Checkpoint>,
    /// Checkpoint metadata (source, step, parents, run keys).
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    /// When the checkpoint was written.
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    /// Pending interrupts of this checkpoint, flattened.
    #[serde(default)]
    pub interrupts: Vec<Interrupt>,
    /// Legacy duplicate of `checkpoint.checkpoint_id`.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    /// Legacy duplicate of `parent_checkpoint.checkpoint_id`.
    #[serde(default)]
    pub parent_checkpoint_id: Option<String>,
}

impl ThreadState {
    /// The state of a thread that has no checkpoint yet.
    pub fn empty() -> Self {
        Self {
            values: serde_json::Value::Object(Metadata::new()),
            next: Vec::new(),
            tasks: Vec::new(),
            checkpoint: None,
            parent_checkpoint: None,
            metadata: None,
            created_at: None,
            interrupts: Vec::new(),
            checkpoint_id: None,
            parent_checkpoint_id: None,
        }
    }
}
