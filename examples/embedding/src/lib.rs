//! How to serve your own agent from your own axum app: implement [`AgentGraph`]
//! (only `stream` and `get_state` are required), register it in a
//! [`GraphRegistry`], build an [`Engine`] and nest [`service_axum::router`] wherever
//! you like. Run it with `cargo run -p service-example-embedding`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use service_engine::bus::MemoryBus;
use service_engine::{Engine, EngineConfig, EngineParts};
use service_graph::{
    AgentGraph, Chunk, ChunkStream, GraphError, GraphRegistry, InMemorySaver, RunContext, RunInput,
    RunnableConfig, StateOptions, StateSnapshot, StreamOptions,
};
use service_store::{Clock, SystemClock};
use service_store_memory::{MemoryOptions, memory_store};
use service_types::GraphSchema;

/// A hand-written agent: greets `name` and remembers the last greeting per thread.
#[derive(Debug, Default)]
pub struct Greeter {
    state: Mutex<HashMap<String, Value>>,
}

#[async_trait]
impl AgentGraph for Greeter {
    async fn stream(
        &self,
        input: RunInput,
        options: StreamOptions,
        _ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        let name = match &input {
            RunInput::Values(values) => values
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("stranger")
                .to_owned(),
            _ => "stranger".to_owned(),
        };
        let values = json!({ "name": name, "greeting": format!("hello {name}") });
        if let Some(thread) = options.config.thread_id() {
            self.state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(thread.to_owned(), values.clone());
        }
        let chunks = vec![
            Ok(Chunk::new("updates", json!({ "greet": values.clone() }))),
            Ok(Chunk::new("values", values)),
        ];
        Ok(Box::pin(futures::stream::iter(chunks)))
    }

    async fn get_state(
        &self,
        config: &RunnableConfig,
        _options: StateOptions,
    ) -> Result<StateSnapshot, GraphError> {
        let values = config
            .thread_id()
            .and_then(|thread| {
                self.state
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .get(thread)
                    .cloned()
            })
            .unwrap_or_else(|| json!({}));
        Ok(StateSnapshot::from_values(values))
    }
}

/// Your app: its own routes, plus the agent service under `/agents`.
pub async fn app() -> Router {
    let mut registry = GraphRegistry::new();
    let schema = GraphSchema {
        graph_id: Some("greeter".into()),
        input_schema: Some(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
        ..GraphSchema::default()
    };
    registry.insert("greeter", schema, Arc::new(Greeter::default()));

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let config = EngineConfig::default();
    let engine = Engine::new(EngineParts {
        store: memory_store(MemoryOptions::new(clock.clone())),
        graphs: Arc::new(registry),
        checkpointer: Arc::new(InMemorySaver::new()),
        bus: MemoryBus::new(config.bus),
        clock,
        config,
    });
    engine
        .ensure_system_assistants()
        .await
        .expect("registering an in-memory graph cannot fail");
    engine.start();

    Router::new()
        .route("/health", get(|| async { "ok" }))
        .nest("/agents", service_axum::router(engine))
}
