use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use service_graph::{GraphError, LongTermStore, RunnableConfig};
use service_types::Metadata;
use tokio_util::sync::CancellationToken;

use crate::emit::Emitter;
use crate::node::NodeError;
use crate::stored::{RaisedInterrupt, interrupt_id};

/// Writes to the run's `custom` stream (LangGraph's `get_stream_writer()`).
#[derive(Clone, Debug)]
pub struct StreamWriter {
    emitter: Emitter,
}

impl StreamWriter {
    pub(crate) fn new(emitter: Emitter) -> Self {
        Self { emitter }
    }

    /// Emits `value` verbatim as a `custom` frame (dropped unless `custom` was
    /// requested).
    pub fn write(&self, value: Value) {
        self.emitter.custom(value);
    }

    /// Emits `value` on the custom channel `name` (protocol v2's `custom:<name>`, which
    /// a client reads by name); dropped unless `custom` was requested.
    pub fn write_named(&self, name: &str, value: Value) {
        self.emitter.custom_named(name, value);
    }
}

/// What a running node can reach: interrupts, the custom stream, the long-term
/// store, the run's config and context, and the cancellation signal.
#[derive(Clone)]
pub struct NodeContext {
    scope: Arc<TaskScope>,
}

pub(crate) struct TaskScope {
    pub(crate) node: String,
    pub(crate) task_id: String,
    pub(crate) step: i64,
    /// Resume values by interrupt index within this task.
    pub(crate) resume: BTreeMap<usize, Value>,
    pub(crate) writer: StreamWriter,
    pub(crate) store: Option<Arc<dyn LongTermStore>>,
    pub(crate) config: RunnableConfig,
    pub(crate) context: Metadata,
    pub(crate) cancel: CancellationToken,
    pub(crate) next_index: AtomicUsize,
    pub(crate) raised: Mutex<Vec<RaisedInterrupt>>,
}

impl NodeContext {
    pub(crate) fn new(scope: Arc<TaskScope>) -> Self {
        Self { scope }
    }

    /// Pauses the run with `value` unless this interrupt was resumed: the n-th call
    /// in a node returns the resume value sent for the n-th interrupt. Propagate the
    /// error with `?`; the node is re-run from the start on resume.
    pub fn interrupt(&self, value: Value) -> Result<Value, NodeError> {
        let index = self.scope.next_index.fetch_add(1, Ordering::SeqCst);
        if let Some(resumed) = self.scope.resume.get(&index) {
            return Ok(resumed.clone());
        }
        let raised = RaisedInterrupt {
            id: interrupt_id(&self.scope.task_id, index),
            index,
            value,
        };
        self.scope
            .raised
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(raised);
        Err(NodeError::interrupted())
    }

    /// The custom stream writer.
    pub fn writer(&self) -> StreamWriter {
        self.scope.writer.clone()
    }

    /// Emits `value` on the custom stream.
    pub fn write(&self, value: Value) {
        self.scope.writer.write(value);
    }

    /// Emits `value` on the custom channel `name`.
    pub fn write_named(&self, name: &str, value: Value) {
        self.scope.writer.write_named(name, value);
    }

    /// The long-term store; an error when the server embeds none.
    pub fn store(&self) -> Result<Arc<dyn LongTermStore>, GraphError> {
        self.scope
            .store
            .clone()
            .ok_or_else(|| GraphError::store("No long-term store is available to this run"))
    }

    /// The run's config (thread and run keys in `configurable`).
    pub fn config(&self) -> &RunnableConfig {
        &self.scope.config
    }

    /// The run's context object.
    pub fn context(&self) -> &Metadata {
        &self.scope.context
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.scope.node
    }

    /// The task id of this node run.
    pub fn task_id(&self) -> &str {
        &self.scope.task_id
    }

    /// The superstep number.
    pub fn step(&self) -> i64 {
        self.scope.step
    }

    /// Cancelled when the run is; the runtime also stops the node at its next await.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.scope.cancel
    }
}

impl fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeContext")
            .field("node", &self.scope.node)
            .field("task_id", &self.scope.task_id)
            .field("step", &self.scope.step)
            .finish()
    }
}
