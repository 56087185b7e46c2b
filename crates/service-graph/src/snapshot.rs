use serde_json::Value;
use service_types::{Interrupt, Metadata, ThreadState, ThreadTask, Timestamp};

use crate::CheckpointConfig;

/// A graph's state at one checkpoint, as an agent reports it (SPEC "Thread state").
/// The minimal valid snapshot is values plus empty `next` and `tasks`.
#[derive(Clone, Debug, PartialEq)]
pub struct StateSnapshot {
    /// The state values.
    pub values: Value,
    /// Nodes still to run; non-empty means a pause (or a failure mid-graph).
    pub next: Vec<String>,
    /// Tasks of the pending step.
    pub tasks: Vec<TaskSnapshot>,
    /// This checkpoint's coordinates.
    pub config: Option<CheckpointConfig>,
    /// The parent checkpoint's coordinates.
    pub parent_config: Option<CheckpointConfig>,
    /// Checkpoint metadata (source, step, writes, run keys), passed through.
    pub metadata: Option<Value>,
    /// When the checkpoint was written.
    pub created_at: Option<Timestamp>,
}

/// One task of a snapshot: a node that ran or is about to run.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSnapshot {
    /// Task id.
    pub id: String,
    /// Node name.
    pub name: String,
    /// A JSON-encoded RunError when the task failed (see `RunError::to_json_string`).
    pub error: Option<String>,
    /// Interrupts the task raised and that are still pending.
    pub interrupts: Vec<Interrupt>,
    /// The task's writes, when it finished.
    pub result: Option<Value>,
    /// Set when the task is a subgraph: its checkpoint coordinates.
    pub checkpoint: Option<CheckpointConfig>,
    /// The subgraph's nested state, when asked for with `subgraphs`.
    pub state: Option<Box<StateSnapshot>>,
}

impl TaskSnapshot {
    /// A task with no error, interrupt or result yet.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            error: None,
            interrupts: Vec::new(),
            result: None,
            checkpoint: None,
            state: None,
        }
    }

    /// The wire task object.
    pub fn to_thread_task(&self) -> ThreadTask {
        ThreadTask {
            id: self.id.clone(),
            name: self.name.clone(),
            error: self.error.clone(),
            interrupts: self.interrupts.clone(),
            checkpoint: self.checkpoint.as_ref().map(CheckpointConfig::to_wire),
            state: self
                .state
                .as_ref()
                .map(|state| Box::new(state.to_thread_state())),
            result: self.result.clone(),
        }
    }
}

impl StateSnapshot {
    /// The minimal snapshot: these values, nothing pending.
    pub fn from_values(values: Value) -> Self {
        Self {
            values,
            next: Vec::new(),
            tasks: Vec::new(),
            config: None,
            parent_config: None,
            metadata: None,
            created_at: None,
        }
    }

    /// The snapshot of a thread without checkpoints: `{}`, nothing pending.
    pub fn empty() -> Self {
        Self::from_values(Value::Object(Metadata::new()))
    }

    /// Pending interrupts of every task, flattened in task order.
    pub fn interrupts(&self) -> Vec<Interrupt> {
        self.tasks
            .iter()
            .flat_map(|task| task.interrupts.iter().cloned())
            .collect()
    }

    /// Whether this snapshot reports a pause: nodes still to run or pending interrupts.
    pub fn is_paused(&self) -> bool {
        !self.next.is_empty() || self.tasks.iter().any(|task| !task.interrupts.is_empty())
    }

    /// The wire `ThreadState` (snake_case names, interrupts flattened, legacy
    /// `checkpoint_id`/`parent_checkpoint_id` duplicates).
    pub fn to_thread_state(&self) -> ThreadState {
        let checkpoint = self.config.as_ref().map(CheckpointConfig::to_wire);
        let parent_checkpoint = self.parent_config.as_ref().map(CheckpointConfig::to_wire);
        ThreadState {
            values: self.values.clone(),
            next: self.next.clone(),
            tasks: self
                .tasks
                .iter()
                .map(TaskSnapshot::to_thread_task)
                .collect(),
            checkpoint_id: checkpoint.as_ref().and_then(|c| c.checkpoint_id.clone()),
            parent_checkpoint_id: parent_checkpoint
                .as_ref()
                .and_then(|c| c.checkpoint_id.clone()),
            checkpoint,
            parent_checkpoint,
            metadata: self.metadata.clone(),
            created_at: self.created_at,
            interrupts: self.interrupts(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn thread_state_uses_wire_names_and_flattens_interrupts() {
        let mut task = TaskSnapshot::new("task-1", "review");
        task.interrupts.push(Interrupt {
            id: "i1".into(),
            value: json!({"question": "approve?"}),
        });
        let snapshot = StateSnapshot {
            values: json!({"topic": "x"}),
            next: vec!["review".into()],
            tasks: vec![task],
            config: Some(CheckpointConfig::new("t", Some("c2".into()))),
            parent_config: Some(CheckpointConfig::new("t", Some("c1".into()))),
            metadata: Some(json!({"step": 1})),
            created_at: None,
        };
        let wire = serde_json::to_value(snapshot.to_thread_state()).unwrap();
        assert_eq!(wire["checkpoint"]["checkpoint_id"], "c2");
        assert_eq!(wire["parent_checkpoint"]["checkpoint_id"], "c1");
        assert_eq!(wire["checkpoint_id"], "c2");
        assert_eq!(wire["parent_checkpoint_id"], "c1");
        assert_eq!(
            wire["interrupts"],
            json!([{"id": "i1", "value": {"question": "approve?"}}])
        );
        assert_eq!(wire["tasks"][0]["name"], "review");
        assert!(snapshot.is_paused());
    }

    #[test]
    fn minimal_snapshot_is_not_paused() {
        let snapshot = StateSnapshot::from_values(json!({"a": 1}));
        assert!(!snapshot.is_paused());
        assert_eq!(snapshot.to_thread_state().checkpoint, None);
    }
}
