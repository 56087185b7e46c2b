//! Hostile input in process: NUL characters, invalid UTF-8, bodies over the limit,
//! out-of-bound numbers. Every refusal is a 4xx with the JSON error body.

mod support;
use support::app_with;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use service_axum::RouterOptions;
use tower::ServiceExt;

async fn app() -> Router {
    app_with(RouterOptions::default()).await
}

/// Status, and the body, which must be JSON.
async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = app.clone().oneshot(request).await.expect("answered");
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    if status.is_success() && bytes.is_empty() {
        return (status, Value::Null);
    }
    assert_eq!(
        content_type.as_ref().and_then(|value| value.to_str().ok()),
        Some("application/json"),
        "a {status} answer is JSON: {}",
        String::from_utf8_lossy(&bytes)
    );
    let body = serde_json::from_slice(&bytes).expect("a JSON body");
    (status, body)
}

async fn call(app: &Router, method: &str, uri: &str, body: impl Into<Body>) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .expect("request");
    send(app, request).await
}

fn assert_refused(reply: &(StatusCode, Value), status: StatusCode, fragment: &str) {
    assert_eq!(reply.0, status, "{}", reply.1);
    let message = reply.1["message"].as_str().unwrap_or_default();
    assert!(message.contains(fragment), "{message:?} names {fragment:?}");
    assert_eq!(reply.1["detail"], reply.1["message"]);
}

async fn thread(app: &Router) -> String {
    let (status, body) = call(app, "POST", "/threads", "{}").await;
    assert_eq!(status, StatusCode::OK);
    body["thread_id"].as_str().expect("thread id").to_owned()
}

#[tokio::test]
async fn a_nul_in_a_json_body_is_422_naming_the_field() {
    let app = app().await;
    let thread = thread(&app).await;
    let cases = [
        (
            "/threads",
            json!({"metadata": {"k": "a\u{0}b"}}),
            "metadata.k",
        ),
        (
            "/assistants",
            json!({"graph_id": "echo", "name": "\u{0}"}),
            "name",
        ),
        (
            "/runs/wait",
            json!({"assistant_id": "echo", "input": {"x": ["ok", "\u{0}"]}}),
            "input.x[1]",
        ),
        (
            "/store/namespaces",
            json!({"prefix": ["\u{0}"]}),
            "prefix[0]",
        ),
        (
            "/store/items/search",
            json!({"filter": {"\u{0}": 1}}),
            "filter",
        ),
        (
            &format!("/threads/{thread}/runs"),
            json!({"assistant_id": "echo", "metadata": {"\u{0}": 1}}),
            "metadata",
        ),
    ];
    for (uri, body, field) in cases {
        let reply = call(&app, "POST", uri, body.to_string()).await;
        assert_refused(
            &reply,
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("'{field}"),
        );
        assert!(
            reply.1["message"]
                .as_str()
                .unwrap_or_default()
                .contains("NUL")
        );
    }
    let put = json!({"namespace": ["a"], "key": "\u{0}", "value": {}});
    let reply = call(&app, "PUT", "/store/items", put.to_string()).await;
    assert_refused(&reply, StatusCode::UNPROCESSABLE_ENTITY, "'key'");
    // An escaped backslash before `u0000` is text, not a NUL.
    let literal = json!({"metadata": {"k": "\\u0000"}});
    let reply = call(&app, "POST", "/threads", literal.to_string()).await;
    assert_eq!(reply.0, StatusCode::OK, "{}", reply.1);
    // The thread a refused run was for stays as it was.
    let (_, read) = call(&app, "GET", &format!("/threads/{thread}"), Body::empty()).await;
    assert_eq!(read["status"], "idle");
}

#[tokio::test]
async fn a_nul_in_a_path_or_query_is_422_naming_the_parameter() {
    let app = app().await;
    let thread = thread(&app).await;
    let reply = call(
        &app,
        "GET",
        &format!("/threads/{thread}/state/%00"),
        Body::empty(),
    )
    .await;
    assert_refused(&reply, StatusCode::UNPROCESSABLE_ENTITY, "'checkpoint_id'");
    let reply = call(
        &app,
        "GET",
        &format!("/threads/{thread}/history?before=%00"),
        Body::empty(),
    )
    .await;
    assert_refused(&reply, StatusCode::UNPROCESSABLE_ENTITY, "'before'");
    let reply = call(
        &app,
        "GET",
        "/store/items?namespace=a&key=%00",
        Body::empty(),
    )
    .await;
    assert_refused(&reply, StatusCode::UNPROCESSABLE_ENTITY, "'key'");
}

#[tokio::test]
async fn a_path_that_is_not_utf8_is_422_with_a_json_body() {
    let app = app().await;
    let reply = call(&app, "GET", "/threads/%FF%FE", Body::empty()).await;
    assert_refused(&reply, StatusCode::UNPROCESSABLE_ENTITY, "Invalid path");
    let reply = call(&app, "GET", "/assistants/%C0/graph", Body::empty()).await;
    assert_eq!(reply.0, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let app = app().await;
    let reply = call(&app, "GET", "/nowhere", Body::empty()).await;
    assert_refused(&reply, StatusCode::NOT_FOUND, "Not Found");
    let reply = call(&app, "PUT", "/threads", Body::empty()).await;
    assert_refused(&reply, StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
}

#[tokio::test]
async fn a_5_mb_run_input_is_accepted() {
    let app = app().await;
    let text = "x".repeat(5 * 1024 * 1024);
    let body =
        json!({"assistant_id": "echo", "input": {"messages": [{"role": "user", "content": text}]}});
    let reply = call(&app, "POST", "/runs", body.to_string()).await;
    assert_eq!(reply.0, StatusCode::OK, "{}", reply.1);
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_with_or_without_its_length_or_an_idempotency_key() {
    let app = app_with(RouterOptions {
        max_body_bytes: 1024,
        ..RouterOptions::default()
    })
    .await;
    let big = json!({"metadata": {"k": "x".repeat(2048)}}).to_string();
    let reply = call(&app, "POST", "/threads", big.clone()).await;
    assert_refused(&reply, StatusCode::PAYLOAD_TOO_LARGE, "1024 bytes");

    // Streamed without a Content-Length: cut off at the limit.
    let chunks: Vec<Result<String, std::io::Error>> = vec![Ok(big.clone())];
    let streamed = Body::from_stream(futures::stream::iter(chunks));
    let reply = call(&app, "POST", "/threads", streamed).await;
    assert_refused(&reply, StatusCode::PAYLOAD_TOO_LARGE, "1024 bytes");

    let request = Request::builder()
        .method("POST")
        .uri("/threads")
        .header("idempotency-key", "k1")
        .body(Body::from(big))
        .expect("request");
    let reply = send(&app, request).await;
    assert_refused(&reply, StatusCode::PAYLOAD_TOO_LARGE, "1024 bytes");

    let small = call(&app, "POST", "/threads", "{}").await;
    assert_eq!(small.0, StatusCode::OK);
}

#[tokio::test]
async fn durations_and_counts_out_of_bounds_are_422_naming_the_field_and_bound() {
    let app = app().await;
    let thread = thread(&app).await;
    let cases = [
        (
            "POST",
            "/runs/wait".to_owned(),
            json!({"assistant_id": "echo", "after_seconds": 1e30}),
            "after_seconds must be a number of seconds from 0 to 31536000",
        ),
        (
            "POST",
            format!("/threads/{thread}/runs"),
            json!({"assistant_id": "echo", "config": {"recursion_limit": 100_000}}),
            "config.recursion_limit must be from 1 to 10000",
        ),
        (
            "POST",
            "/runs/crons".to_owned(),
            json!({"assistant_id": "echo", "schedule": "* * * * *", "after_seconds": -1}),
            "after_seconds must be",
        ),
        (
            "PUT",
            "/store/items".to_owned(),
            json!({"namespace": ["a"], "key": "k", "value": {}, "ttl": 1e30}),
            "ttl must be a positive number of minutes, at most 52596000",
        ),
        (
            "POST",
            "/threads".to_owned(),
            json!({"ttl": 1e30}),
            "ttl must be a positive number of minutes",
        ),
        (
            "POST",
            "/threads/search".to_owned(),
            json!({"offset": 1e15 as i64}),
            "is greater than the maximum of 1000000000",
        ),
    ];
    for (method, uri, body, message) in cases {
        let reply = call(&app, method, &uri, body.to_string()).await;
        assert_refused(&reply, StatusCode::UNPROCESSABLE_ENTITY, message);
    }
    let (_, read) = call(&app, "GET", &format!("/threads/{thread}"), Body::empty()).await;
    assert_eq!(
        read["status"], "idle",
        "a refused run leaves its thread idle"
    );
}
