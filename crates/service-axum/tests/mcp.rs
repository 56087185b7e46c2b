//! MCP at `/mcp` in process: the JSON-RPC rules, the handshake the official client
//! makes, tools from assistants, tool calls as runs, and the Origin allow-list.

mod support;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use service_axum::RouterOptions;
use tower::ServiceExt;

async fn app() -> Router {
    support::app_with(RouterOptions::default()).await
}

struct Reply {
    status: StatusCode,
    body: Value,
    empty: bool,
}

async fn send(app: &Router, body: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Body::from(body.to_owned())).expect("request");
    let response = app.clone().oneshot(request).await.expect("answered");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Reply {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        empty: bytes.is_empty(),
    }
}

async fn rpc(app: &Router, method: &str, params: Value) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    send(app, &body.to_string(), &[]).await
}

/// The `result` of a successful call.
async fn result(app: &Router, method: &str, params: Value) -> Value {
    let reply = rpc(app, method, params).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["id"], 7, "{}", reply.body);
    assert!(reply.body.get("error").is_none(), "{}", reply.body);
    reply.body["result"].clone()
}

fn error_code(reply: &Reply) -> Value {
    reply.body["error"]["code"].clone()
}

#[tokio::test]
async fn server_discover_is_method_not_found_so_the_client_falls_back_to_initialize() {
    let app = app().await;
    let reply = rpc(&app, "server/discover", json!({})).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(error_code(&reply), -32601, "{}", reply.body);
    assert_eq!(reply.body["id"], 7);
}

#[tokio::test]
async fn initialize_echoes_a_supported_version_and_offers_the_newest_otherwise() {
    let app = app().await;
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let answer = result(
            &app,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
        assert_eq!(answer["protocolVersion"], version);
        assert!(answer["capabilities"]["tools"].is_object(), "{answer}");
        assert!(answer["serverInfo"]["name"].is_string(), "{answer}");
    }
    let answer = result(&app, "initialize", json!({"protocolVersion": "1999-01-01"})).await;
    assert_eq!(answer["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn a_notification_or_a_clients_response_is_accepted_with_202_and_no_body() {
    let app = app().await;
    for body in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
    ] {
        let reply = send(&app, &body.to_string(), &[]).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{body}");
        assert!(reply.empty, "{body}");
    }
}

#[tokio::test]
async fn malformed_requests_get_json_rpc_errors() {
    let app = app().await;
    let cases = [
        ("{not json", StatusCode::BAD_REQUEST, -32700),
        ("", StatusCode::BAD_REQUEST, -32700),
        ("[]", StatusCode::BAD_REQUEST, -32600),
        (
            r#"{"id": 1, "method": "ping"}"#,
            StatusCode::BAD_REQUEST,
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": 5}"#,
            StatusCode::BAD_REQUEST,
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}"#,
            StatusCode::BAD_REQUEST,
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1}"#,
            StatusCode::BAD_REQUEST,
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}"#,
            StatusCode::OK,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x"}}"#,
            StatusCode::OK,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}"#,
            StatusCode::OK,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": 3}}"#,
            StatusCode::OK,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"messages": ["\u0000"]}}}"#,
            StatusCode::OK,
            -32602,
        ),
    ];
    for (body, status, code) in cases {
        let reply = send(&app, body, &[]).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
        assert_eq!(error_code(&reply), code, "{body}: {}", reply.body);
        assert_eq!(reply.body["jsonrpc"], "2.0", "{body}");
    }
}

#[tokio::test]
async fn the_discovery_probe_is_method_not_found_whatever_version_header_it_carries() {
    let app = app().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}).to_string();
    let reply = send(&app, &body, &[("mcp-protocol-version", "2026-07-28")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(error_code(&reply), -32601, "{}", reply.body);
}

#[tokio::test]
async fn tools_list_has_one_tool_per_assistant_named_safely_with_its_input_schema() {
    let app = app().await;
    let create = Request::builder()
        .method("POST")
        .uri("/assistants")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"graph_id": "echo", "name": "My echo (v2)", "description": "Says it back"})
                .to_string(),
        ))
        .expect("request");
    let created = app.clone().oneshot(create).await.expect("answered");
    assert_eq!(created.status(), StatusCode::OK);
    let answer = result(&app, "tools/list", json!({})).await;
    let tools = answer["tools"].as_array().expect("tools");
    let mine = tools
        .iter()
        .find(|tool| tool["title"] == "My echo (v2)")
        .expect("the new assistant is a tool");
    assert_eq!(mine["name"], "My_echo_v2");
    assert_eq!(mine["description"], "Says it back");
    assert_eq!(mine["inputSchema"]["type"], "object");
    assert!(
        mine["inputSchema"]["properties"]["messages"].is_object(),
        "the graph's input schema: {mine}"
    );
    for graph in ["echo", "steps", "fail"] {
        assert!(
            tools.iter().any(|tool| tool["name"] == graph),
            "{graph} listed"
        );
    }
    assert!(answer.get("nextCursor").is_none(), "one page: {answer}");
}

#[tokio::test]
async fn tools_list_pages_by_100_with_a_string_cursor() {
    let app = app().await;
    for index in 0..101 {
        let create = Request::builder()
            .method("POST")
            .uri("/assistants")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"graph_id": "echo", "name": format!("a{index}")}).to_string(),
            ))
            .expect("request");
        app.clone().oneshot(create).await.expect("answered");
    }
    let first = result(&app, "tools/list", json!({})).await;
    assert_eq!(first["tools"].as_array().map(Vec::len), Some(100));
    let cursor = first["nextCursor"].as_str().expect("a string cursor");
    let second = result(&app, "tools/list", json!({"cursor": cursor})).await;
    let rest = second["tools"].as_array().map_or(0, Vec::len);
    assert!(rest >= 9, "101 made plus the system assistants: {rest}");
    assert!(second.get("nextCursor").is_none());
}

#[tokio::test]
async fn tools_call_runs_the_assistant_and_answers_its_last_ai_message() {
    let app = app().await;
    let answer = result(
        &app,
        "tools/call",
        json!({"name": "echo", "arguments": {"messages": [{"type": "human", "content": "hello"}]}}),
    )
    .await;
    assert_eq!(answer["isError"], false, "{answer}");
    assert_eq!(
        answer["content"],
        json!([{"type": "text", "text": "echo: hello"}])
    );
}

#[tokio::test]
async fn tools_call_without_messages_answers_the_values_as_json() {
    let app = app().await;
    let answer = result(
        &app,
        "tools/call",
        json!({"name": "steps", "arguments": {}}),
    )
    .await;
    assert_eq!(answer["isError"], false, "{answer}");
    let text = answer["content"][0]["text"].as_str().expect("text");
    assert!(
        serde_json::from_str::<Value>(text).is_ok_and(|values| values.is_object()),
        "{text}"
    );
}

#[tokio::test]
async fn a_failing_run_is_a_tool_result_with_is_error() {
    let app = app().await;
    let answer = result(&app, "tools/call", json!({"name": "fail", "arguments": {}})).await;
    assert_eq!(answer["isError"], true, "{answer}");
    let text = answer["content"][0]["text"].as_str().expect("text");
    assert!(text.contains("boom"), "{text}");
}

#[tokio::test]
async fn an_unknown_tool_is_invalid_params() {
    let app = app().await;
    let reply = rpc(&app, "tools/call", json!({"name": "nothing-here"})).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(error_code(&reply), -32602, "{}", reply.body);
}

#[tokio::test]
async fn a_browser_origin_is_admitted_only_from_loopback_or_the_configured_list() {
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let app = app().await;
    for origin in [
        "http://localhost:3000",
        "http://127.0.0.1",
        "http://[::1]:8080",
    ] {
        let reply = send(&app, &ping, &[("origin", origin)]).await;
        assert_eq!(reply.status, StatusCode::OK, "{origin}");
    }
    let reply = send(&app, &ping, &[("origin", "https://evil.example")]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    let configured = support::app_with(RouterOptions {
        allowed_origins: vec!["https://app.example".into()],
        ..RouterOptions::default()
    })
    .await;
    let reply = send(&configured, &ping, &[("origin", "https://app.example")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let reply = send(&configured, &ping, &[("origin", "https://evil.example")]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
}

/// The threads of runs still going (a tool call's run is on a stateless thread of
/// its own).
async fn busy_threads(app: &Router) -> Vec<Value> {
    let request = Request::builder()
        .method("POST")
        .uri("/threads/search")
        .header("content-type", "application/json")
        .body(Body::from(json!({"status": "busy"}).to_string()))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("answered");
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    serde_json::from_slice::<Vec<Value>>(&bytes).expect("a list of threads")
}

/// Polls `busy_threads` until it has `count` threads, for at most five seconds.
async fn until_busy(app: &Router, count: usize) {
    for _ in 0..250 {
        if busy_threads(app).await.len() == count {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("never {count} busy threads: {:?}", busy_threads(app).await);
}

#[tokio::test]
async fn a_tool_call_whose_client_hangs_up_cancels_its_run() {
    let app = app().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"delay_ms": 60_000}}})
    .to_string();
    let caller = {
        let app = app.clone();
        tokio::spawn(async move { send(&app, &call, &[]).await.status })
    };
    until_busy(&app, 1).await;
    // The client goes away: the server drops the call's answer.
    caller.abort();
    // The run would sleep a minute; cancelled, its thread is idle (or gone) at once.
    until_busy(&app, 0).await;
}

#[tokio::test]
async fn info_says_whether_mcp_is_served() {
    async fn mcp_flag(app: Router) -> Value {
        let request = Request::builder()
            .uri("/info")
            .body(Body::empty())
            .expect("request");
        let response = app.oneshot(request).await.expect("answered");
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        serde_json::from_slice::<Value>(&bytes).expect("json")["flags"]["mcp"].clone()
    }
    assert_eq!(mcp_flag(app().await).await, json!(true));
    let without_runs = support::app_with(RouterOptions {
        disable_runs: true,
        ..RouterOptions::default()
    })
    .await;
    assert_eq!(mcp_flag(without_runs).await, json!(false));
}
