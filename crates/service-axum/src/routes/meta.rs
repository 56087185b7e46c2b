//! `/ok`, `/info` and `/invoke/{graph_id}`.

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use service_engine::Engine;

use crate::error::ApiResult;
use crate::extract::{JsonBody, Path, QueryParams};
use crate::json::Json;

pub(crate) fn routes() -> Router<Engine> {
    Router::new()
        .route("/", get(ok))
        .route("/ok", get(ok))
        .route("/info", get(info))
        .route("/invoke/{graph_id}", post(invoke))
}

/// `?check_db=1` also asks the store for one round trip: 503 when it fails.
async fn ok(State(engine): State<Engine>, params: QueryParams) -> ApiResult<Json<Value>> {
    if params.bool("check_db")?.unwrap_or(false) {
        engine.check_store().await?;
    }
    Ok(Json(json!({"ok": true})))
}

async fn info(State(engine): State<Engine>) -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "langgraph_py_version": null,
        "flags": {
            "assistants": true,
            "crons": true,
            "langsmith": false,
            "langsmith_tracing_replicas": false,
            "langsmith_tracing_session_on_runs": false,
        },
        "host": {
            "kind": "self-hosted",
            "project_id": null,
            "host_revision_id": null,
            "revision_id": null,
            "tenant_id": null,
        },
        "graphs": engine.graph_ids(),
    }))
}

async fn invoke(
    State(engine): State<Engine>,
    Path(graph_id): Path<String>,
    JsonBody(input): JsonBody<Value>,
) -> ApiResult<Response> {
    Ok(Json(engine.invoke(&graph_id, input).await?).into_response())
}
