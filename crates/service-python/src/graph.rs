//! The Python graphs as the engine sees them: one [`AgentGraph`] per graph id, every
//! method a request to the worker pool, and the resolver that finds them.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use service_graph::{
    AgentGraph, CheckpointConfig, Chunk, ChunkStream, GraphError, GraphResolver, HistoryOptions,
    RunContext, RunInput, RunnableConfig, StateOptions, StateSnapshot, StateUpdate, StreamOptions,
    TaskSnapshot,
};
use service_types::{GraphSchema, Interrupt, RunError, StreamMode, Timestamp};

use crate::worker::{Frame, Pool, Request};

/// One Python graph.
#[derive(Debug)]
pub(crate) struct PythonGraph {
    graph_id: String,
    pool: Arc<Pool>,
}

fn malformed(what: &str, error: impl std::fmt::Display) -> GraphError {
    GraphError::Other(Box::new(RunError::new(
        "BridgeProtocolError",
        format!("the graph worker sent a malformed {what}: {error}"),
    )))
}

fn input(input: RunInput) -> Value {
    match input {
        RunInput::None => Value::Null,
        RunInput::Values(values) => json!({ "values": values }),
        RunInput::Command(command) => json!({ "command": command }),
    }
}

/// LangGraph's stream modes for the requested ones (`messages` serves both message
/// modes; the engine shapes each from the same chunks; `events` is a separate call).
fn python_modes(options: &StreamOptions) -> Vec<&'static str> {
    let requested: Vec<StreamMode> = if options.stream_mode.is_empty() {
        vec![StreamMode::Values]
    } else {
        options.stream_mode.clone()
    };
    let mut modes = Vec::new();
    for mode in requested {
        let name = match mode {
            StreamMode::Messages | StreamMode::MessagesTuple => "messages",
            StreamMode::Events => continue,
            other => other.as_str(),
        };
        if !modes.contains(&name) {
            modes.push(name);
        }
    }
    if modes.is_empty() {
        // A run must still advance the graph; `values` frames nobody asked for are
        // dropped by the engine.
        modes.push("values");
    }
    modes
}

/// `[mode, namespace, data]` from the worker as a chunk.
fn chunk(frame: Value) -> Result<Chunk, GraphError> {
    let (mode, namespace, data): (String, Vec<String>, Value) =
        serde_json::from_value(frame).map_err(|error| malformed("chunk", error))?;
    Ok(Chunk::Mode {
        mode,
        data,
        namespace,
    })
}

/// The chunks of a stream request, ending with its result (the state the run ended
/// in, handed to the engine); cancelling `ctx.cancel` cancels the Python task (dropping
/// the request sends the cancel).
fn chunks(request: Request, ctx: RunContext) -> ChunkStream {
    Box::pin(futures::stream::unfold(
        Some((request, ctx)),
        |state| async move {
            let (mut request, ctx) = state?;
            let frame = tokio::select! {
                frame = request.next() => frame,
                () = ctx.cancel.cancelled() => return Some((Err(GraphError::Cancelled), None)),
            };
            match frame {
                Frame::Chunk(frame) => Some((chunk(frame), Some((request, ctx)))),
                Frame::Done(Ok(Value::Null)) => None,
                Frame::Done(Ok(ended)) => match snapshot(ended) {
                    Ok(ended) => {
                        ctx.final_state.set(ended);
                        None
                    }
                    Err(error) => Some((Err(error), None)),
                },
                Frame::Done(Err(error)) => Some((Err(error), None)),
            }
        },
    ))
}

#[derive(Deserialize)]
struct WireTask {
    id: String,
    name: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    interrupts: Vec<Interrupt>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    checkpoint: Option<CheckpointConfig>,
    #[serde(default)]
    state: Option<WireSnapshot>,
}

#[derive(Deserialize)]
struct WireSnapshot {
    #[serde(default)]
    values: Value,
    #[serde(default)]
    next: Vec<String>,
    #[serde(default)]
    tasks: Vec<WireTask>,
    #[serde(default)]
    config: Option<CheckpointConfig>,
    #[serde(default)]
    parent_config: Option<CheckpointConfig>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    created_at: Option<String>,
}

impl WireSnapshot {
    fn into_snapshot(self) -> StateSnapshot {
        StateSnapshot {
            values: if self.values.is_null() {
                json!({})
            } else {
                self.values
            },
            next: self.next,
            tasks: self
                .tasks
                .into_iter()
                .map(|task| TaskSnapshot {
                    id: task.id,
                    name: task.name,
                    error: task.error,
                    interrupts: task.interrupts,
                    result: task.result,
                    checkpoint: task.checkpoint,
                    state: task.state.map(|state| Box::new(state.into_snapshot())),
                })
                .collect(),
            config: self.config,
            parent_config: self.parent_config,
            metadata: self.metadata,
            created_at: self
                .created_at
                .and_then(|at| DateTime::parse_from_rfc3339(&at).ok())
                .map(|at| Timestamp::new(at.with_timezone(&Utc))),
        }
    }
}

fn snapshot(value: Value) -> Result<StateSnapshot, GraphError> {
    serde_json::from_value::<WireSnapshot>(value)
        .map(WireSnapshot::into_snapshot)
        .map_err(|error| malformed("state", error))
}

fn coordinates(value: Value) -> Result<CheckpointConfig, GraphError> {
    serde_json::from_value(value).map_err(|error| malformed("checkpoint", error))
}

impl PythonGraph {
    fn ask(&self, op: &str, fields: Value) -> Result<Request, GraphError> {
        let mut message = json!({"op": op, "graph_id": self.graph_id});
        if let (Value::Object(message), Value::Object(fields)) = (&mut message, fields) {
            message.extend(fields);
        }
        self.pool.request(message, None)
    }

    fn run(
        &self,
        op: &str,
        input_value: RunInput,
        options: &StreamOptions,
        ctx: &RunContext,
    ) -> Result<Request, GraphError> {
        let message = json!({
            "op": op,
            "graph_id": self.graph_id,
            "input": input(input_value),
            "config": options.config,
            "metadata": options.metadata,
            "context": options.context,
            "modes": python_modes(options),
            "interrupt_before": options.interrupt_before,
            "interrupt_after": options.interrupt_after,
        });
        self.pool.request(message, ctx.store.clone())
    }
}

#[async_trait]
impl AgentGraph for PythonGraph {
    async fn stream(
        &self,
        input: RunInput,
        options: StreamOptions,
        ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        let request = self.run("stream", input, &options, &ctx)?;
        Ok(chunks(request, ctx))
    }

    async fn stream_events(
        &self,
        input: RunInput,
        options: StreamOptions,
        ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        let request = self.run("events", input, &options, &ctx)?;
        Ok(chunks(request, ctx))
    }

    /// Streams `values` only and answers the last one, which is what LangGraph's
    /// `ainvoke` returns (the output channels); else the state the run ended in.
    async fn invoke(
        &self,
        input: RunInput,
        mut options: StreamOptions,
        ctx: RunContext,
    ) -> Result<Value, GraphError> {
        options.stream_mode = vec![StreamMode::Values];
        let final_state = ctx.final_state.clone();
        let mut stream = chunks(self.run("stream", input, &options, &ctx)?, ctx);
        let mut last = None;
        while let Some(chunk) = stream.next().await {
            if let Chunk::Mode { mode, data, .. } = chunk?
                && mode == "values"
            {
                last = Some(data);
            }
        }
        Ok(match (last, final_state.take()) {
            (Some(values), _) => values,
            (None, Some(ended)) => ended.values,
            (None, None) => json!({}),
        })
    }

    async fn get_state(
        &self,
        config: &RunnableConfig,
        options: StateOptions,
    ) -> Result<StateSnapshot, GraphError> {
        let request = self.ask(
            "state",
            json!({"config": config, "subgraphs": options.subgraphs}),
        )?;
        snapshot(request.result().await?)
    }

    async fn get_state_history(
        &self,
        config: &RunnableConfig,
        options: HistoryOptions,
    ) -> Result<Vec<StateSnapshot>, GraphError> {
        let request = self.ask(
            "history",
            json!({
                "config": config,
                "limit": options.limit,
                "before": options.before,
                "filter": options.filter,
            }),
        )?;
        match request.result().await? {
            Value::Array(items) => items.into_iter().map(snapshot).collect(),
            other => Err(malformed("history", other)),
        }
    }

    async fn update_state(
        &self,
        config: &RunnableConfig,
        values: Value,
        as_node: Option<String>,
    ) -> Result<CheckpointConfig, GraphError> {
        let request = self.ask(
            "update",
            json!({"config": config, "values": values, "as_node": as_node}),
        )?;
        coordinates(request.result().await?)
    }

    async fn bulk_update_state(
        &self,
        config: &RunnableConfig,
        supersteps: Vec<Vec<StateUpdate>>,
    ) -> Result<CheckpointConfig, GraphError> {
        let request = self.ask("bulk", json!({"config": config, "supersteps": supersteps}))?;
        coordinates(request.result().await?)
    }

    async fn get_graph(&self, xray: u32) -> Result<Value, GraphError> {
        self.ask("graph", json!({"xray": xray}))?.result().await
    }

    async fn get_subgraphs(
        &self,
        namespace: Option<String>,
        recurse: bool,
    ) -> Result<Vec<(String, GraphSchema)>, GraphError> {
        let request = self.ask(
            "subgraphs",
            json!({"namespace": namespace, "recurse": recurse}),
        )?;
        serde_json::from_value(request.result().await?)
            .map_err(|error| malformed("subgraph listing", error))
    }
}

/// The Python graphs by id; a graph that failed to load stays listed and answers with
/// its load failure.
#[derive(Debug)]
pub(crate) struct PythonGraphs {
    graphs: BTreeMap<String, Result<Arc<PythonGraph>, RunError>>,
}

impl PythonGraphs {
    pub(crate) fn new(
        pool: Arc<Pool>,
        ids: Vec<String>,
        failures: &std::collections::HashMap<String, RunError>,
    ) -> Self {
        let graphs = ids
            .into_iter()
            .map(|graph_id| {
                let graph = match failures.get(&graph_id) {
                    Some(failure) => Err(failure.clone()),
                    None => Ok(Arc::new(PythonGraph {
                        graph_id: graph_id.clone(),
                        pool: Arc::clone(&pool),
                    })),
                };
                (graph_id, graph)
            })
            .collect();
        Self { graphs }
    }

    fn graph(&self, graph_id: &str) -> Result<&Arc<PythonGraph>, GraphError> {
        match self.graphs.get(graph_id) {
            None => Err(GraphError::NotFound(format!(
                "Graph '{graph_id}' not found"
            ))),
            Some(Err(failure)) => Err(GraphError::LoadFailed {
                graph_id: graph_id.to_owned(),
                reason: failure
                    .stack
                    .clone()
                    .unwrap_or_else(|| failure.chain_summary()),
            }),
            Some(Ok(graph)) => Ok(graph),
        }
    }
}

#[async_trait]
impl GraphResolver for PythonGraphs {
    fn graph_ids(&self) -> Vec<String> {
        self.graphs.keys().cloned().collect()
    }

    async fn load(&self, graph_id: &str) -> Result<Arc<dyn AgentGraph>, GraphError> {
        Ok(self.graph(graph_id)?.clone())
    }

    async fn schemas(&self, graph_id: &str) -> Result<GraphSchema, GraphError> {
        let graph = self.graph(graph_id)?;
        let request = graph.ask("schemas", json!({}))?;
        let mut schema: GraphSchema = serde_json::from_value(request.result().await?)
            .map_err(|error| malformed("schema", error))?;
        schema.graph_id = Some(graph_id.to_owned());
        Ok(schema)
    }
}
