//! Helpers shared by the example graph tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use service_graph::{
    AgentGraph, GraphError, GraphResolver, InMemorySaver, RunContext, RunInput, RunnableConfig,
    StateOptions, StateSnapshot, StreamOptions,
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

pub async fn graph(id: &str) -> Arc<dyn AgentGraph> {
    let registry =
        service_example_graphs::registry(Arc::new(InMemorySaver::new())).expect("registry");
    registry.load(id).await.expect("graph loads")
}

pub fn options(thread: &str, modes: &[StreamMode]) -> StreamOptions {
    StreamOptions {
        stream_mode: modes.to_vec(),
        config: RunnableConfig::for_thread(thread),
        ..StreamOptions::default()
    }
}

pub async fn run_in(
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
    run_in(graph, input, options(thread, &modes), RunContext::default()).await
}

pub async fn state(graph: &dyn AgentGraph, thread: &str) -> StateSnapshot {
    graph
        .get_state(&RunnableConfig::for_thread(thread), StateOptions::default())
        .await
        .expect("state")
}
