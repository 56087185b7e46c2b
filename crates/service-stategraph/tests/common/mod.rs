//! Helpers shared by the runtime tests: run a graph and collect its frames.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use service_graph::{
    AgentGraph, Checkpointer, FinalState, GraphError, HistoryOptions, InMemorySaver, NodeSelection,
    RunContext, RunInput, RunnableConfig, StateOptions, StateSnapshot, StreamOptions,
};
use service_types::StreamMode;

/// Frames of one run and the error it ended with, if any.
#[derive(Debug)]
pub struct Outcome {
    pub frames: Vec<(String, Value)>,
    pub error: Option<GraphError>,
}

impl Outcome {
    pub fn of(&self, mode: &str) -> Vec<Value> {
        self.frames
            .iter()
            .filter(|(name, _)| name == mode)
            .map(|(_, data)| data.clone())
            .collect()
    }

    pub fn last_values(&self) -> Value {
        self.of("values").pop().unwrap_or(Value::Null)
    }
}

pub fn saver() -> Arc<dyn Checkpointer> {
    Arc::new(InMemorySaver::new())
}

pub fn options(thread: &str, modes: &[StreamMode]) -> StreamOptions {
    StreamOptions {
        stream_mode: modes.to_vec(),
        config: RunnableConfig::for_thread(thread),
        ..StreamOptions::default()
    }
}

pub fn before(nodes: &[&str]) -> Option<NodeSelection> {
    Some(NodeSelection::Nodes(
        nodes.iter().map(|n| (*n).to_owned()).collect(),
    ))
}

pub async fn run_with(graph: &dyn AgentGraph, input: RunInput, options: StreamOptions) -> Outcome {
    run_in(graph, input, options, RunContext::default()).await
}

/// Runs on `thread` and returns the final state the runtime handed over, if any.
pub async fn run_handing_over(
    graph: &dyn AgentGraph,
    input: RunInput,
    options: StreamOptions,
) -> (Outcome, Option<StateSnapshot>) {
    let final_state = FinalState::default();
    let ctx = RunContext {
        final_state: final_state.clone(),
        ..RunContext::default()
    };
    let outcome = run_in(graph, input, options, ctx).await;
    (outcome, final_state.take())
}

async fn run_in(
    graph: &dyn AgentGraph,
    input: RunInput,
    options: StreamOptions,
    ctx: RunContext,
) -> Outcome {
    let mut stream = graph
        .stream(input, options, ctx)
        .await
        .expect("stream starts");
    let mut frames = Vec::new();
    let mut error = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => frames.push((chunk.event_name(), chunk.data().into_owned())),
            Err(failure) => error = Some(failure),
        }
    }
    Outcome { frames, error }
}

pub async fn run(graph: &dyn AgentGraph, thread: &str, input: RunInput) -> Outcome {
    let modes = [StreamMode::Values, StreamMode::Updates, StreamMode::Custom];
    run_with(graph, input, options(thread, &modes)).await
}

pub async fn state(graph: &dyn AgentGraph, thread: &str) -> StateSnapshot {
    graph
        .get_state(&RunnableConfig::for_thread(thread), StateOptions::default())
        .await
        .expect("state")
}

pub async fn history(graph: &dyn AgentGraph, thread: &str) -> Vec<StateSnapshot> {
    graph
        .get_state_history(
            &RunnableConfig::for_thread(thread),
            HistoryOptions::default(),
        )
        .await
        .expect("history")
}

pub fn values(value: Value) -> RunInput {
    RunInput::Values(value)
}

pub fn command(value: Value) -> RunInput {
    RunInput::Command(value)
}

pub fn checkpoint_id(snapshot: &StateSnapshot) -> String {
    snapshot
        .config
        .as_ref()
        .and_then(|config| config.checkpoint_id.clone())
        .expect("checkpoint id")
}
