//! `/ok`, `/info`, `/openapi.json`, `/docs` and `/invoke/{graph_id}`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use service_engine::Engine;
use service_engine::auth::{Action, Resource};

use crate::auth::Access;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Path, QueryParams};
use crate::json::Json;
use crate::routes::Table;

/// What `/info` says besides the engine's: whether `/mcp` is served (among its flags)
/// and the langgraph version the Python graphs run on.
#[derive(Clone, Debug, Default)]
pub(crate) struct Info {
    pub(crate) mcp: bool,
    pub(crate) langgraph_py_version: Option<String>,
}

pub(crate) fn routes(about: Info, document: crate::openapi::Document) -> Table {
    Table::new()
        .get("/", Access::Public, ok)
        .get("/ok", Access::Public, ok)
        .get(
            "/info",
            Access::Public,
            move |engine: State<Engine>,
                  channels: Option<axum::Extension<service_channels::Channels>>| {
                info(engine, channels, about.clone())
            },
        )
        .get(crate::openapi::OPENAPI_PATH, Access::Public, move || {
            let document = document.clone();
            async move { document.response() }
        })
        .get(crate::openapi::DOCS_PATH, Access::Public, || async {
            crate::openapi::docs_page()
        })
        .post(
            "/invoke/{graph_id}",
            (Resource::Threads, Action::CreateRun),
            invoke,
        )
}

/// `?check_db=1` also asks the store for one round trip: 503 when it fails.
async fn ok(State(engine): State<Engine>, params: QueryParams) -> ApiResult<Json<Value>> {
    if params.bool("check_db")?.unwrap_or(false) {
        engine.check_store().await?;
    }
    Ok(Json(json!({"ok": true})))
}

async fn info(
    State(engine): State<Engine>,
    channels: Option<axum::Extension<service_channels::Channels>>,
    about: Info,
) -> Json<Value> {
    let mcp = about.mcp;
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "langgraph_py_version": about.langgraph_py_version,
        "flags": {
            "assistants": true,
            "crons": true,
            "langsmith": false,
            "langsmith_tracing_replicas": false,
            "langsmith_tracing_session_on_runs": false,
            "mcp": mcp,
            // Without channel routes there is no GET /channels: the console reads this
            // instead of asking for a 404 (which a browser logs as an error).
            "channels": channels.is_some(),
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
