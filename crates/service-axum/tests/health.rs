//! `GET /ok` answers while the process serves; `?check_db=1` also asks the store for
//! one round trip and answers 503 with the error body when it fails.

use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use service_engine::bus::MemoryBus;
use service_engine::{Engine, EngineConfig, EngineParts};
use service_graph::{Checkpointer, GraphError, GraphRegistry, InMemorySaver};
use service_store::{Clock, Store, StoreError, StoreHealth, StoreParts, StoreResult, SystemClock};
use service_store_memory::{MemoryOptions, memory_store};
use tower::ServiceExt;

/// A store whose database is gone.
struct Unreachable;

#[async_trait]
impl StoreHealth for Unreachable {
    async fn ping(&self) -> StoreResult<()> {
        Err(StoreError::transient("connection refused"))
    }
}

fn app(store: Store) -> Router {
    let config = EngineConfig::default();
    let engine = Engine::new(EngineParts {
        webhooks: None,
        store,
        graphs: Box::new(|_: Arc<dyn Checkpointer>| Ok::<_, GraphError>(GraphRegistry::new())),
        checkpointer: Arc::new(InMemorySaver::new()),
        bus: MemoryBus::new(config.bus),
        clock: Arc::new(SystemClock),
        config,
    })
    .expect("an empty registry");
    service_axum::router(engine)
}

fn memory() -> Store {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    memory_store(MemoryOptions::new(clock))
}

fn unreachable() -> Store {
    Store::new(StoreParts {
        health: Arc::new(Unreachable),
        ..memory().parts()
    })
}

async fn get(app: &Router, uri: &str) -> (StatusCode, Value) {
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn ok_does_not_ask_the_store() {
    let (status, body) = get(&app(unreachable()), "/ok").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["ok"], true);
}

#[tokio::test]
async fn check_db_answers_ok_when_the_store_answers() {
    let (status, body) = get(&app(memory()), "/ok?check_db=1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["ok"], true);
}

#[tokio::test]
async fn check_db_answers_503_with_the_error_body_when_the_store_does_not() {
    let app = app(unreachable());
    let (status, body) = get(&app, "/ok?check_db=1").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["status"], 503);
    assert_eq!(body["message"], "The store did not answer");
    let (status, _) = get(&app, "/ok?check_db=0").await;
    assert_eq!(status, StatusCode::OK);
}
