//! The checkpoint body this runtime writes, the pending-write channels it uses, and
//! the deterministic task and interrupt ids derived from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use service_graph::checkpoint::CheckpointTuple;
use service_graph::{GraphError, StateSnapshot, TaskSnapshot};
use service_types::{Interrupt, Metadata, RunError};
use uuid::Uuid;

/// A finished task's output: `{"update": ..., "goto": [...]}`.
pub(crate) const WRITE_OUTPUT: &str = "__output__";
/// Interrupts a task raised: `[{id, index, value}]`.
pub(crate) const WRITE_INTERRUPT: &str = "__interrupt__";
/// A task's failure: a RunError object.
pub(crate) const WRITE_ERROR: &str = "__error__";
/// Resume values of a task by interrupt index: `{"0": value}`.
pub(crate) const WRITE_RESUME: &str = "__resume__";

/// The checkpoint body: channel values, the nodes of the next superstep, and for an
/// input checkpoint the input still to apply (by the `__start__` task).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Body {
    pub(crate) v: u32,
    pub(crate) channel_values: Map<String, Value>,
    pub(crate) next: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input: Option<Value>,
}

impl Body {
    pub(crate) fn new(channel_values: Map<String, Value>, next: Vec<String>) -> Self {
        Self {
            v: 1,
            channel_values,
            next,
            input: None,
        }
    }
}

/// An interrupt a task raised, with its index among the task's interrupt calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RaisedInterrupt {
    pub(crate) id: String,
    pub(crate) index: usize,
    pub(crate) value: Value,
}

impl RaisedInterrupt {
    pub(crate) fn to_interrupt(&self) -> Interrupt {
        Interrupt {
            id: self.id.clone(),
            value: self.value.clone(),
        }
    }
}

/// A finished task's writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Output {
    pub(crate) update: Value,
    #[serde(default)]
    pub(crate) goto: Vec<String>,
}

/// Everything one task wrote against a checkpoint.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TaskWrites {
    pub(crate) output: Option<Output>,
    pub(crate) interrupts: Vec<RaisedInterrupt>,
    pub(crate) error: Option<RunError>,
    pub(crate) resume: BTreeMap<usize, Value>,
}

/// A checkpoint read back: the tuple with its body and step decoded.
#[derive(Clone, Debug)]
pub(crate) struct Loaded {
    /// The stored tuple, its `checkpoint` left `Null`: `body` is its decoded form.
    pub(crate) tuple: CheckpointTuple,
    pub(crate) body: Body,
    pub(crate) step: i64,
}

impl Loaded {
    pub(crate) fn new(mut tuple: CheckpointTuple) -> Result<Self, GraphError> {
        let checkpoint = std::mem::take(&mut tuple.checkpoint);
        let body = serde_json::from_value(checkpoint).map_err(|error| {
            let message = format!("Checkpoint {} is unreadable: {error}", tuple.id());
            GraphError::checkpointer_caused_by(message, error)
        })?;
        let step = tuple
            .metadata
            .get("step")
            .and_then(Value::as_i64)
            .unwrap_or(-1);
        Ok(Self { tuple, body, step })
    }

    pub(crate) fn id(&self) -> &str {
        self.tuple.id()
    }

    /// Ids of the next superstep's tasks, in `next` order.
    pub(crate) fn task_ids(&self) -> Vec<String> {
        self.body
            .next
            .iter()
            .enumerate()
            .map(|(index, node)| task_id(self.id(), node, index))
            .collect()
    }

    /// What task `task_id` wrote against this checkpoint (unreadable writes ignored).
    pub(crate) fn writes_of(&self, task_id: &str) -> TaskWrites {
        let mut writes = TaskWrites::default();
        for write in self
            .tuple
            .pending_writes
            .iter()
            .filter(|w| w.task_id == task_id)
        {
            let value = write.value.clone();
            match write.channel.as_str() {
                WRITE_OUTPUT => writes.output = serde_json::from_value(value).ok(),
                WRITE_INTERRUPT => {
                    writes.interrupts = serde_json::from_value(value).unwrap_or_default()
                }
                WRITE_ERROR => writes.error = Some(RunError::from_value(&value)),
                WRITE_RESUME => writes.resume = serde_json::from_value(value).unwrap_or_default(),
                _ => {}
            }
        }
        writes
    }

    /// The snapshot of this checkpoint: values, next, and one task per next node with
    /// its error, unresolved interrupts and result.
    pub(crate) fn snapshot(&self) -> StateSnapshot {
        let tasks = self
            .body
            .next
            .iter()
            .zip(self.task_ids())
            .map(|(node, id)| {
                let writes = self.writes_of(&id);
                let mut task = TaskSnapshot::new(id, node.clone());
                task.error = writes.error.as_ref().map(RunError::to_json_string);
                if writes.output.is_none() {
                    task.interrupts = writes
                        .interrupts
                        .iter()
                        .map(RaisedInterrupt::to_interrupt)
                        .collect();
                }
                task.result = writes
                    .output
                    .map(|output| output.update)
                    .filter(|update| !update.is_null());
                task
            })
            .collect();
        StateSnapshot {
            values: Value::Object(self.body.channel_values.clone()),
            next: self.body.next.clone(),
            tasks,
            config: Some(self.tuple.config.clone()),
            parent_config: self.tuple.parent_config.clone(),
            metadata: Some(Value::Object(self.tuple.metadata.clone())),
            created_at: Some(self.tuple.created_at),
        }
    }
}

/// Checkpoint metadata: `source`, `step`, `writes`, `parents`, then the run extras.
pub(crate) fn metadata(source: &str, step: i64, writes: Value, extras: &Metadata) -> Metadata {
    let mut metadata = Metadata::new();
    metadata.insert("source".into(), json!(source));
    metadata.insert("step".into(), json!(step));
    metadata.insert("writes".into(), writes);
    metadata.insert("parents".into(), json!({}));
    for (key, value) in extras {
        metadata.entry(key.clone()).or_insert_with(|| value.clone());
    }
    metadata
}

/// Deterministic task id: the same checkpoint, node and position give the same task,
/// so a resumed task finds its interrupts and resume values again.
pub(crate) fn task_id(checkpoint_id: &str, node: &str, index: usize) -> String {
    let name = format!("{checkpoint_id}:{node}:{index}");
    Uuid::new_v5(&Uuid::NAMESPACE_OID, name.as_bytes()).to_string()
}

/// Deterministic interrupt id (32 hex chars) of the `index`-th interrupt of a task.
pub(crate) fn interrupt_id(task_id: &str, index: usize) -> String {
    let name = format!("{task_id}:{index}");
    Uuid::new_v5(&Uuid::NAMESPACE_OID, name.as_bytes())
        .simple()
        .to_string()
}
