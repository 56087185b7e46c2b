//! Turns runtime events into chunks, only for the stream modes the run requested.

use std::fmt;
use std::sync::Arc;

use chrono::Utc;
use serde_json::{Map, Value, json};
use service_graph::{Chunk, GraphError, StateSnapshot, StreamOptions};
use service_types::{Interrupt, RunError, StreamMode, Timestamp};
use tokio::sync::mpsc::UnboundedSender;

/// The run's outgoing chunks. Unbounded on purpose: SPEC wants the graph never slowed
/// by a slow client; the engine's bus applies the bounds.
pub(crate) type ChunkSender = UnboundedSender<Result<Chunk, GraphError>>;

#[derive(Clone)]
pub(crate) struct Emitter {
    inner: Arc<Inner>,
    /// The subgraph namespace this emitter reports for (empty at the root): its chunks
    /// carry it, and are sent only when the run streams subgraphs (events excepted).
    namespace: Vec<String>,
    /// The run ids enclosing this emitter's tasks: the run's, then each subgraph task's.
    lineage: Vec<String>,
}

struct Inner {
    tx: ChunkSender,
    modes: Vec<StreamMode>,
    subgraphs: bool,
    graph_name: String,
    run_id: String,
    tags: Vec<String>,
}

impl fmt::Debug for Emitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Emitter")
            .field("modes", &self.inner.modes)
            .finish()
    }
}

/// Interrupts as stream frames carry them: with LangGraph's `response_schema` (the
/// schema a resume value must match; these graphs declare none).
fn interrupts_json(interrupts: &[Interrupt]) -> Value {
    Value::Array(
        interrupts
            .iter()
            .map(|interrupt| {
                json!({"value": interrupt.value, "id": interrupt.id, "response_schema": null})
            })
            .collect(),
    )
}

impl Emitter {
    pub(crate) fn new(tx: ChunkSender, graph_name: &str, options: &StreamOptions) -> Self {
        let modes = StreamMode::ALL
            .into_iter()
            .filter(|mode| options.wants(*mode))
            .collect();
        let run_id = options
            .config
            .configurable
            .get("run_id")
            .and_then(Value::as_str)
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        Self {
            inner: Arc::new(Inner {
                tx,
                modes,
                subgraphs: options.subgraphs,
                graph_name: graph_name.to_owned(),
                run_id: run_id.clone(),
                tags: options.config.tags.clone(),
            }),
            namespace: Vec::new(),
            lineage: vec![run_id],
        }
    }

    /// The emitter of the subgraph run by task `task_id` of node `node`: its namespace
    /// gains `node:task_id`, and its tasks' events name that task as a parent.
    pub(crate) fn nested(&self, node: &str, task_id: &str) -> Self {
        let mut namespace = self.namespace.clone();
        namespace.push(format!("{node}:{task_id}"));
        let mut lineage = self.lineage.clone();
        lineage.push(task_id.to_owned());
        Self {
            inner: Arc::clone(&self.inner),
            namespace,
            lineage,
        }
    }

    /// Events of a subgraph are sent whether or not the run streams subgraphs, as
    /// LangGraph's event stream holds every nested run (their parent ids tell them
    /// apart); other modes only then.
    fn wants(&self, mode: StreamMode) -> bool {
        (self.namespace.is_empty() || self.inner.subgraphs || mode == StreamMode::Events)
            && self.inner.modes.contains(&mode)
    }

    /// Sends `chunk`, labelled with this emitter's namespace (events are not: they
    /// carry it in their metadata).
    fn send_chunk(&self, chunk: Chunk) {
        let chunk = if self.namespace.is_empty() || chunk.mode() == StreamMode::Events.as_str() {
            chunk
        } else {
            chunk.with_namespace(self.namespace.clone())
        };
        // The receiver lives as long as the run (`DrivenRun` holds both).
        let _ = self.inner.tx.send(Ok(chunk));
    }

    fn send(&self, mode: StreamMode, data: Value) {
        if self.wants(mode) {
            self.send_chunk(Chunk::new(mode.as_str(), data));
        }
    }

    /// Ends the stream with an error.
    pub(crate) fn fail(&self, error: GraphError) {
        let _ = self.inner.tx.send(Err(error));
    }

    /// The state after a superstep, written as JSON text at once: a copy of a large
    /// state, serialised later and then dropped, cost more than the text.
    pub(crate) fn values(&self, values: &Map<String, Value>) {
        if !self.wants(StreamMode::Values) {
            return;
        }
        match Chunk::encoded(StreamMode::Values.as_str(), values) {
            Ok(chunk) => self.send_chunk(chunk),
            Err(error) => self.fail(GraphError::Other(Box::new(RunError::from_error(
                "SerializationError",
                &error,
            )))),
        }
    }

    /// The pause frames: `updates` with `__interrupt__`, then the values carrying it.
    pub(crate) fn interrupted(&self, values: &Map<String, Value>, interrupts: &[Interrupt]) {
        let list = interrupts_json(interrupts);
        self.send(StreamMode::Updates, json!({"__interrupt__": list}));
        let mut values = values.clone();
        values.insert("__interrupt__".into(), list);
        self.send(StreamMode::Values, Value::Object(values));
    }

    pub(crate) fn updates(&self, node: &str, update: &Value) {
        self.send(StreamMode::Updates, json!({ node: update }));
    }

    pub(crate) fn custom(&self, value: Value) {
        self.send(StreamMode::Custom, value);
    }

    /// A custom chunk on the channel `name`: its mode is `custom:<name>`.
    pub(crate) fn custom_named(&self, name: &str, value: Value) {
        if self.wants(StreamMode::Custom) {
            self.send_chunk(Chunk::new(format!("custom:{name}"), value));
        }
    }

    fn debug(&self, step: i64, kind: &str, payload: Value) {
        if !self.wants(StreamMode::Debug) {
            return;
        }
        let timestamp = Timestamp::new(Utc::now()).to_string();
        self.send(
            StreamMode::Debug,
            json!({"step": step, "timestamp": timestamp, "type": kind, "payload": payload}),
        );
    }

    fn event(&self, event: &str, name: &str, run_id: &str, mut metadata: Value, data: Value) {
        let parents: &[String] = if run_id == self.inner.run_id {
            &[]
        } else {
            &self.lineage
        };
        if let (false, Value::Object(metadata)) = (self.namespace.is_empty(), &mut metadata) {
            let namespace = Value::String(self.namespace.join("|"));
            metadata.insert("langgraph_checkpoint_ns".into(), namespace.clone());
            metadata.insert("checkpoint_ns".into(), namespace);
        }
        self.send(
            StreamMode::Events,
            json!({
                "event": event, "name": name, "run_id": run_id, "tags": self.inner.tags,
                "metadata": metadata, "parent_ids": parents, "data": data,
            }),
        );
    }

    /// The run's own start event; a subgraph's run is its parent task's events.
    pub(crate) fn run_started(&self, input: &Value) {
        if !self.namespace.is_empty() || !self.wants(StreamMode::Events) {
            return;
        }
        let (name, run_id) = (&self.inner.graph_name, &self.inner.run_id);
        self.event(
            "on_chain_start",
            name,
            run_id,
            json!({}),
            json!({"input": input}),
        );
    }

    pub(crate) fn run_finished(&self, output: &Map<String, Value>) {
        if !self.namespace.is_empty() || !self.wants(StreamMode::Events) {
            return;
        }
        let (name, run_id) = (&self.inner.graph_name, &self.inner.run_id);
        self.event(
            "on_chain_end",
            name,
            run_id,
            json!({}),
            json!({"output": output}),
        );
    }

    pub(crate) fn task_started(&self, step: i64, id: &str, node: &str, input: &Map<String, Value>) {
        // Payloads carry a copy of the node's input: built only for modes requested.
        if self.wants(StreamMode::Tasks) || self.wants(StreamMode::Debug) {
            let payload = json!({
                "id": id, "name": node, "input": input, "triggers": [format!("branch:to:{node}")],
            });
            self.send(StreamMode::Tasks, payload.clone());
            self.debug(step, "task", payload);
        }
        if !self.wants(StreamMode::Events) {
            return;
        }
        let metadata = json!({"langgraph_step": step, "langgraph_node": node});
        self.event(
            "on_chain_start",
            node,
            id,
            metadata,
            json!({"input": input}),
        );
    }

    pub(crate) fn task_finished(
        &self,
        step: i64,
        id: &str,
        node: &str,
        result: Option<&Value>,
        error: Option<&RunError>,
        interrupts: &[Interrupt],
    ) {
        let wanted = [StreamMode::Tasks, StreamMode::Debug, StreamMode::Events];
        if !wanted.into_iter().any(|mode| self.wants(mode)) {
            return;
        }
        let result = result
            .filter(|value| !value.is_null())
            .cloned()
            .unwrap_or_else(|| json!({}));
        let error = error.map(|error| json!({"error": error.error, "message": error.message}));
        let payload = json!({
            "id": id, "name": node, "error": error, "result": result,
            "interrupts": interrupts_json(interrupts),
        });
        self.send(StreamMode::Tasks, payload.clone());
        self.debug(step, "task_result", payload);
        if error.is_none() && interrupts.is_empty() {
            let metadata = json!({"langgraph_step": step, "langgraph_node": node});
            self.event(
                "on_chain_end",
                node,
                id,
                metadata,
                json!({"output": result}),
            );
        }
    }

    /// Emits the checkpoint's snapshot, built only when a mode asks for it.
    pub(crate) fn checkpoint(&self, step: i64, snapshot: impl FnOnce() -> StateSnapshot) {
        if !self.wants(StreamMode::Checkpoints) && !self.wants(StreamMode::Debug) {
            return;
        }
        let snapshot = snapshot();
        let config = |c: &Option<service_graph::CheckpointConfig>| {
            c.as_ref().map_or(Value::Null, |c| c.to_config_value())
        };
        let tasks: Vec<Value> = snapshot
            .tasks
            .iter()
            .map(|task| {
                json!({"id": task.id, "name": task.name, "interrupts": task.interrupts, "state": null})
            })
            .collect();
        let mut payload = json!({
            "config": config(&snapshot.config), "parent_config": config(&snapshot.parent_config),
            "values": snapshot.values, "metadata": snapshot.metadata,
            "next": snapshot.next, "tasks": tasks,
        });
        self.send(StreamMode::Checkpoints, payload.clone());
        if let Value::Object(map) = &mut payload {
            let wire = |c: &Option<service_graph::CheckpointConfig>| {
                c.as_ref()
                    .and_then(|c| serde_json::to_value(c.to_wire()).ok())
                    .unwrap_or(Value::Null)
            };
            map.insert("checkpoint".into(), wire(&snapshot.config));
            map.insert("parent_checkpoint".into(), wire(&snapshot.parent_config));
        }
        self.debug(step, "checkpoint", payload);
    }
}
