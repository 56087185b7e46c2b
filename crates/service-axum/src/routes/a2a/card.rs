//! A2A agent cards: what an agent is called, what it can do, and where and in which
//! versions it speaks.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use serde_json::{Value, json};
use service_engine::auth::{Action, Resource};
use service_engine::{Caller, Engine, EngineError, ErrorKind};

use crate::auth::CallerOf;
use crate::error::ApiError;
use crate::extract::{Path, QueryParams};
use crate::json::Json;
use crate::routes::MountPrefix;

/// The agent card of an assistant the caller may read.
async fn card(
    engine: &Engine,
    caller: &Caller,
    headers: &HeaderMap,
    prefix: &str,
    assistant_id: &str,
) -> Result<Value, ApiError> {
    let reader = caller
        .acting_as(Resource::Assistants, Action::Read, json!({}))
        .await?;
    let assistants = engine.as_caller(&reader).assistants();
    let assistant = assistants.get(assistant_id).await?;
    let id = assistant.assistant_id;
    let description = assistant
        .description
        .clone()
        .unwrap_or_else(|| format!("{} assistant", assistant.name));
    let url = format!("{}{prefix}/a2a/{id}", origin_of(headers));
    let modes = ["text/plain", "application/json"];
    Ok(json!({
        "name": assistant.name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        // 1.0 clients read the interfaces and prefer the 1.0 one; 0.3 clients read
        // `url`, `preferredTransport` and `protocolVersion`. Both speak at one URL.
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
        ],
        "url": url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": modes,
        "defaultOutputModes": modes,
        "skills": [{
            "id": format!("{id}-main"),
            "name": assistant.name,
            "description": description,
            "tags": ["assistant", "langgraph", assistant.graph_id],
        }],
    }))
}

/// `scheme://host` the client reached this server at.
fn origin_of(headers: &HeaderMap) -> String {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let scheme = header("x-forwarded-proto").unwrap_or("http");
    let host = header("x-forwarded-host")
        .or_else(|| header(header::HOST.as_str()))
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

pub(super) async fn assistant_card(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    MountPrefix(prefix): MountPrefix,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        card(&engine, &caller, &headers, &prefix, &assistant_id).await?,
    ))
}

pub(super) async fn root_card(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    MountPrefix(prefix): MountPrefix,
    query: QueryParams,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let Some(assistant_id) = query.get("assistant_id") else {
        return Err(ApiError(EngineError::new(
            ErrorKind::BadRequest,
            "Name the agent: /.well-known/agent-card.json?assistant_id=… (or read /a2a/{assistant_id}/.well-known/agent-card.json)",
        )));
    };
    Ok(Json(
        card(&engine, &caller, &headers, &prefix, assistant_id).await?,
    ))
}
