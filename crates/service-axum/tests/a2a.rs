//! A2A at `/a2a/{assistant_id}` in process: the JSON-RPC rules, the cards, and a
//! context being a thread whose runs are the tasks (the official client's walk is
//! e2e/python/test_a2a.py).

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

async fn call(app: &Router, method: &str, uri: &str, body: Option<String>) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("host", "agents.example:8123")
        .body(body.map_or_else(Body::empty, Body::from))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("answered");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn rpc(app: &Router, assistant: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": "q", "method": method, "params": params});
    let (status, answer) = call(
        app,
        "POST",
        &format!("/a2a/{assistant}"),
        Some(body.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["id"], "q", "{answer}");
    answer
}

fn hello(context: Option<&str>) -> Value {
    let mut message = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]});
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    json!({"message": message})
}

#[tokio::test]
async fn the_card_points_at_the_agents_url_on_the_host_the_client_reached() {
    let app = app().await;
    let (status, card) = call(&app, "GET", "/a2a/echo/.well-known/agent-card.json", None).await;
    assert_eq!(status, StatusCode::OK, "{card}");
    let (_, assistant) = call(&app, "GET", "/assistants/echo", None).await;
    let url = format!(
        "http://agents.example:8123/a2a/{}",
        assistant["assistant_id"].as_str().expect("id")
    );
    assert_eq!(card["url"], url);
    assert_eq!(card["supportedInterfaces"][0]["url"], url);
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    let (status, root) = call(
        &app,
        "GET",
        "/.well-known/agent-card.json?assistant_id=echo",
        None,
    )
    .await;
    assert_eq!((status, &root["url"]), (StatusCode::OK, &json!(url)));
}

#[tokio::test]
async fn a_card_needs_an_assistant_that_exists() {
    let app = app().await;
    let (status, body) = call(&app, "GET", "/.well-known/agent-card.json", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("assistant_id")),
        "{body}"
    );
    let (status, _) = call(
        &app,
        "GET",
        &format!("/a2a/{}/.well-known/agent-card.json", uuid::Uuid::new_v4()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn json_rpc_errors_have_their_codes() {
    let app = app().await;
    let unknown = rpc(&app, "echo", "ListTasks", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let no_agent = rpc(&app, "nothing-here", "SendMessage", hello(None)).await;
    assert_eq!(no_agent["error"]["code"], -32602, "{no_agent}");
    let no_message = rpc(&app, "echo", "message/send", json!({})).await;
    assert_eq!(no_message["error"]["code"], -32602, "{no_message}");
    let file = rpc(
        &app,
        "echo",
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "parts": [{"url": "https://x.example/a.png"}]}}),
    )
    .await;
    assert_eq!(file["error"]["code"], -32005, "{file}");
    let (status, parse) = call(&app, "POST", "/a2a/echo", Some("{".into())).await;
    assert_eq!(
        (status, &parse["error"]["code"]),
        (StatusCode::BAD_REQUEST, &json!(-32700))
    );
}

#[tokio::test]
async fn a_new_context_becomes_a_thread_whose_runs_are_the_tasks() {
    let app = app().await;
    let context = uuid::Uuid::new_v4().to_string();
    let sent = rpc(&app, "echo", "SendMessage", hello(Some(&context))).await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["contextId"], json!(context));
    assert_eq!(
        task["artifacts"][0]["parts"],
        json!([{"text": "echo: hello"}])
    );
    let (status, runs) = call(&app, "GET", &format!("/threads/{context}/runs"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        task["id"],
        json!(format!(
            "{context}:{}",
            runs[0]["run_id"].as_str().expect("run")
        ))
    );
    let again = rpc(
        &app,
        "echo",
        "tasks/get",
        json!({"id": task["id"], "historyLength": 0}),
    )
    .await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
    assert!(
        again["result"].get("history").is_none(),
        "historyLength 0: {again}"
    );
}

#[tokio::test]
async fn a_task_of_another_assistant_is_not_this_agents() {
    let app = app().await;
    let sent = rpc(&app, "echo", "SendMessage", hello(None)).await;
    let id = sent["result"]["task"]["id"].clone();
    let elsewhere = rpc(&app, "steps", "GetTask", json!({"id": id})).await;
    assert_eq!(elsewhere["error"]["code"], -32001, "{elsewhere}");
}
