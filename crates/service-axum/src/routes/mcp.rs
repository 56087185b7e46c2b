//! MCP (Model Context Protocol) at `/mcp`: Streamable HTTP answered with plain JSON
//! (no sessions, no SSE), serving one tool per assistant the caller may read. A tool
//! call is a blocking stateless run of that assistant.
//!
//! JSON-RPC rules: a body that is not JSON is -32700, one that is not a request is
//! -32600 (both HTTP 400, as the MCP transport says); an unknown method is -32601
//! (the official client sends `server/discover` first and falls back to `initialize`
//! on exactly that code, and it sends that probe with an `MCP-Protocol-Version`
//! header of a version newer than any here, so the header is not checked: versions
//! are agreed in `initialize`); bad params and an unknown tool are -32602. A
//! notification or a client's response is accepted with 202 and no body.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use service_engine::auth::{Action, Resource};
use service_engine::{Caller, Engine, EngineError, ErrorKind, RunTarget};
use service_types::{Assistant, AssistantSearch, RunCreate};

use crate::auth::CallerOf;
use crate::error::ApiError;
use crate::extract::{BodyLimit, read_body, refuse_nul_in_json};
use crate::json::Json;
use crate::routes::Table;
use crate::routes::jsonrpc::{
    INVALID_PARAMS, Incoming, METHOD_NOT_FOUND, RpcError, parse, refused, rpc_error, rpc_result,
};
use crate::routes::runs::cancel_on_drop;
use crate::sse::OnDrop;

/// Protocol versions this endpoint speaks, oldest first; the newest is offered to a
/// client asking for one not listed.
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Tools per `tools/list` page.
const PAGE: i64 = 100;

/// Assistants read per page while looking a tool up by name.
const LOOKUP_PAGE: i64 = 1000;

/// The longest tool name MCP clients accept.
const MAX_NAME: usize = 128;

pub(crate) fn routes() -> Table {
    // Every method is reached through one POST, so the route is guarded as what its
    // tools do: creating runs. Listing narrows further to the assistants the caller
    // may search.
    Table::new().post("/mcp", (Resource::Threads, Action::CreateRun), mcp)
}

/// Browser origins allowed to call `/mcp` besides loopback (the configured CORS
/// origins; `*` admits any). MCP asks servers to check `Origin` so a web page cannot
/// drive a local server through DNS rebinding.
#[derive(Clone, Debug, Default)]
pub(crate) struct Origins(pub(crate) Arc<[String]>);

impl Origins {
    fn admits(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        is_loopback(origin)
            || self.0.iter().any(|allowed| {
                allowed == "*" || allowed.trim_end_matches('/').eq_ignore_ascii_case(origin)
            })
    }
}

/// `http(s)://localhost`, `127.x.x.x` or `[::1]`, on any port.
fn is_loopback(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, port)) if port.is_empty() || port.starts_with(':') => host,
            _ => return false,
        }
    } else {
        rest.split(':').next().unwrap_or_default()
    };
    if host.contains('/') {
        return false;
    }
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn mcp(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    // Outside the router (no list put in), loopback only: failing closed.
    let origins = parts
        .extensions
        .get::<Origins>()
        .cloned()
        .unwrap_or_default();
    if let Some(origin) = parts.headers.get(header::ORIGIN) {
        let admitted = origin.to_str().is_ok_and(|origin| origins.admits(origin));
        if !admitted {
            return ApiError(EngineError::new(
                ErrorKind::Forbidden,
                "Origin not allowed to call /mcp",
            ))
            .into_response();
        }
    }
    let bytes = match read_body(&parts.headers, body, BodyLimit::of(&parts.extensions)).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let (id, method, params) = match parse(&bytes) {
        Ok(Incoming::Call { id, method, params }) => (id, method, params),
        Ok(Incoming::NoAnswer) => return StatusCode::ACCEPTED.into_response(),
        Err(RpcError(code, message)) => {
            return refused(StatusCode::BAD_REQUEST, code, &message);
        }
    };
    let method = method.as_str();
    let params = match params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            return Json(rpc_error(id, INVALID_PARAMS, "params must be an object")).into_response();
        }
    };
    if let Err(error) = refuse_nul_in_json(&bytes) {
        return Json(rpc_error(id, INVALID_PARAMS, error.0.message.clone())).into_response();
    }
    let answer = match method {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => list_tools(&engine, &caller, &params).await,
        "tools/call" => call_tool(&engine, &caller, &params).await,
        _ => Err(RpcError(
            METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )),
    };
    let body = match answer {
        Ok(result) => rpc_result(id, result),
        Err(RpcError(code, message)) => rpc_error(id, code, message),
    };
    Json(body).into_response()
}

fn initialize(params: &Map<String, Value>) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|asked| VERSIONS.contains(asked))
        .unwrap_or(VERSIONS[VERSIONS.len() - 1]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "langgraph-agent-server", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The tool name of an assistant: spaces to `_`, only `[A-Za-z0-9_.-]`, at most 128
/// characters, as MCP clients require of names.
pub(crate) fn tool_name(assistant_name: &str) -> String {
    assistant_name
        .chars()
        .map(|c| if c == ' ' { '_' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        .take(MAX_NAME)
        .collect()
}

/// The caller as a searcher of assistants, so only those it may read are tools.
async fn searcher(caller: &Caller) -> Result<Caller, RpcError> {
    Ok(caller
        .acting_as(Resource::Assistants, Action::Search, json!({}))
        .await?)
}

async fn list_tools(
    engine: &Engine,
    caller: &Caller,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let offset = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(cursor)) => cursor
            .parse::<i64>()
            .ok()
            .filter(|offset| *offset >= 0)
            .ok_or_else(|| RpcError::params("Invalid cursor"))?,
        Some(_) => return Err(RpcError::params("Invalid cursor")),
    };
    let searcher = searcher(caller).await?;
    let assistants = engine.as_caller(&searcher).assistants();
    let page = assistants
        .search(AssistantSearch {
            limit: Some(PAGE),
            offset: Some(offset),
            ..AssistantSearch::default()
        })
        .await?;
    let mut tools = Vec::with_capacity(page.assistants.len());
    for assistant in page.assistants {
        let schema = engine
            .as_caller(&searcher)
            .assistants()
            .schemas(&assistant.assistant_id.to_string())
            .await
            .ok()
            .and_then(|schemas| schemas.input_schema);
        tools.push(tool(&assistant, schema));
    }
    let mut result = json!({"tools": tools});
    if let Some(next) = page.next_offset {
        // A string: the official client reads `nextCursor` as one.
        result["nextCursor"] = json!(next.to_string());
    }
    Ok(result)
}

fn tool(assistant: &Assistant, input_schema: Option<Value>) -> Value {
    // MCP requires an object schema; a graph without one (or with another kind)
    // takes any object.
    let input_schema = match input_schema {
        Some(Value::Object(mut schema)) => {
            schema.entry("type").or_insert_with(|| json!("object"));
            if schema.get("type") == Some(&json!("object")) {
                Value::Object(schema)
            } else {
                json!({"type": "object"})
            }
        }
        _ => json!({"type": "object"}),
    };
    let mut tool = json!({
        "name": tool_name(&assistant.name),
        "title": assistant.name,
        "inputSchema": input_schema,
    });
    if let Some(description) = &assistant.description {
        tool["description"] = json!(description);
    }
    tool
}

/// The first assistant the caller may read whose tool name is `name`.
async fn find_tool(
    engine: &Engine,
    caller: &Caller,
    name: &str,
) -> Result<Option<Assistant>, RpcError> {
    let searcher = searcher(caller).await?;
    let mut offset = 0;
    loop {
        let page = engine
            .as_caller(&searcher)
            .assistants()
            .search(AssistantSearch {
                limit: Some(LOOKUP_PAGE),
                offset: Some(offset),
                ..AssistantSearch::default()
            })
            .await?;
        if let Some(found) = page
            .assistants
            .into_iter()
            .find(|assistant| tool_name(&assistant.name) == name)
        {
            return Ok(Some(found));
        }
        match page.next_offset {
            Some(next) => offset = i64::try_from(next).unwrap_or(i64::MAX),
            None => return Ok(None),
        }
    }
}

async fn call_tool(
    engine: &Engine,
    caller: &Caller,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let Some(Value::String(name)) = params.get("name") else {
        return Err(RpcError::params("tools/call needs a tool name"));
    };
    let input = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(arguments @ Value::Object(_)) => arguments.clone(),
        Some(_) => return Err(RpcError::params("arguments must be an object")),
    };
    let Some(assistant) = find_tool(engine, caller, name).await? else {
        return Err(RpcError::params(format!("Unknown tool: {name}")));
    };
    let body = RunCreate {
        assistant_id: assistant.assistant_id.to_string(),
        input: Some(input),
        ..RunCreate::default()
    };
    let runs = engine.as_caller(caller).runs();
    // A run that cannot start or fails is the tool's failure, told to the model, not
    // a protocol error.
    let output = match runs.create_watched(RunTarget::Stateless, body).await {
        Ok((run, watched)) => {
            // A client that hangs up before the result drops this future: the guard
            // then cancels the run nobody will read.
            let guard = cancel_on_drop(engine, caller, &run, true);
            let output = engine.as_caller(caller).runs().wait(watched).await;
            OnDrop::disarm(guard);
            output
        }
        Err(error) => return Ok(tool_result(error.message.clone(), true)),
    };
    if let Some(error) = output.get("__error__") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| error.to_string(), str::to_owned);
        return Ok(tool_result(message, true));
    }
    let text = last_ai_text(&output).unwrap_or_else(|| output.to_string());
    Ok(tool_result(text, false))
}

fn tool_result(text: String, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// The text of the final state's last AI message, when the state has messages.
fn last_ai_text(values: &Value) -> Option<String> {
    let message = values
        .get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|message| {
            let kind = message.get("type").or_else(|| message.get("role"));
            matches!(
                kind.and_then(Value::as_str),
                Some("ai" | "AIMessage" | "assistant")
            )
        })?;
    match message.get("content")? {
        Value::String(text) => Some(text.clone()),
        // Content blocks: their text, in order.
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|block| match block {
                    Value::String(text) => Some(text.as_str()),
                    block => block.get("text").and_then(Value::as_str),
                })
                .collect(),
        ),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_keeps_only_safe_characters_and_at_most_128() {
        assert_eq!(tool_name("my agent v1.2"), "my_agent_v1.2");
        assert_eq!(tool_name("alice's (best)"), "alices_best");
        assert_eq!(tool_name("ünï-code"), "n-code");
        assert_eq!(tool_name(&"a".repeat(300)).len(), 128);
    }

    #[test]
    fn loopback_origins_are_admitted_on_any_port_and_others_only_when_configured() {
        let none = Origins::default();
        for origin in [
            "http://localhost",
            "http://localhost:3000",
            "https://127.0.0.1:8443",
            "http://[::1]:5173",
        ] {
            assert!(none.admits(origin), "{origin}");
        }
        for origin in [
            "http://localhost.evil.com",
            "http://127.0.0.1.evil.com",
            "https://example.com",
            "null",
            "file://",
        ] {
            assert!(!none.admits(origin), "{origin}");
        }
        let configured = Origins(vec!["https://app.example.com".to_owned()].into());
        assert!(configured.admits("https://app.example.com"));
        assert!(!configured.admits("https://other.example.com"));
        assert!(Origins(vec!["*".to_owned()].into()).admits("https://any.example"));
    }

    #[test]
    fn the_answer_is_the_last_ai_messages_text() {
        let values = json!({"messages": [
            {"type": "human", "content": "hi"},
            {"type": "ai", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"type": "tool", "content": "x"},
        ]});
        assert_eq!(last_ai_text(&values).as_deref(), Some("ab"));
        assert_eq!(last_ai_text(&json!({"n": 1})), None);
    }
}
