//! The router over an in-memory engine serving the example graphs, as the router's
//! tests use it.

use std::sync::Arc;

use axum::Router;
use service_axum::RouterOptions;
use service_engine::bus::MemoryBus;
use service_engine::{Engine, EngineConfig, EngineParts};
use service_graph::InMemorySaver;
use service_store::{Clock, SystemClock};
use service_store_memory::{MemoryOptions, memory_store};

/// A started engine with its system assistants, under a router with `options`.
// Each test file compiles this module; the auth walk builds its router itself.
#[allow(dead_code)]
pub(crate) async fn app_with(options: RouterOptions) -> Router {
    service_axum::router_with(engine().await, options)
}

/// A started engine on the in-memory store with the example graphs.
pub(crate) async fn engine() -> Engine {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let config = EngineConfig::default();
    let engine = Engine::new(EngineParts {
        webhooks: None,
        store: memory_store(MemoryOptions::new(clock.clone())),
        graphs: Box::new(service_example_graphs::registry),
        checkpointer: Arc::new(InMemorySaver::new()),
        bus: MemoryBus::new(config.bus),
        clock,
        config,
    })
    .expect("example graphs");
    engine
        .system()
        .ensure_system_assistants()
        .await
        .expect("system assistants");
    engine.start();
    engine
}
