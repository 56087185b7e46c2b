//! The example app serves its own routes and the agent service side by side, and the
//! service runs the app's own hand-written agent.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use service_example_embedding::{ADA_KEY, ALAN_KEY};
use tower::ServiceExt;

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Value,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    send_as(app, ADA_KEY, method, uri, body).await
}

async fn send_as(
    app: &axum::Router,
    token: &str,
    method: &str,
    uri: &str,
    body: Value,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("x-api-key", token)
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_host_app_keeps_its_own_routes() {
    let app = service_example_embedding::app().await;
    let response = app
        .oneshot(Request::get("/health").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_nested_service_runs_the_apps_own_agent() {
    let app = service_example_embedding::app().await;
    let (status, _, thread) = send(&app, "POST", "/agents/threads", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let thread_id = thread["thread_id"].as_str().unwrap();
    let (status, headers, result) = send(
        &app,
        "POST",
        &format!("/agents/threads/{thread_id}/runs/wait"),
        json!({"assistant_id": "greeter", "input": {"name": "ada"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(result["greeting"], "hello ada");
    assert!(
        headers["content-location"]
            .to_str()
            .unwrap()
            .starts_with("/agents/threads/")
    );
    let (_, _, state) = send(
        &app,
        "GET",
        &format!("/agents/threads/{thread_id}/state"),
        Value::Null,
    )
    .await;
    assert_eq!(state["values"]["greeting"], "hello ada");
    // A minimal agent has no history: the service says which capability is missing.
    let (status, _, error) = send(
        &app,
        "POST",
        &format!("/agents/threads/{thread_id}/history"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error["details"]["capability"], "getStateHistory");
}

/// The agent keeps its state in the engine's checkpointer, so a thread copy carries it.
#[tokio::test]
async fn a_copied_thread_keeps_the_agents_state() {
    let app = service_example_embedding::app().await;
    let (_, _, thread) = send(&app, "POST", "/agents/threads", json!({})).await;
    let thread_id = thread["thread_id"].as_str().unwrap();
    let (status, _, _) = send(
        &app,
        "POST",
        &format!("/agents/threads/{thread_id}/runs/wait"),
        json!({"assistant_id": "greeter", "input": {"name": "grace"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    let (status, _, copy) = send(
        &app,
        "POST",
        &format!("/agents/threads/{thread_id}/copy"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let copy_id = copy["thread_id"].as_str().unwrap();
    assert_ne!(copy_id, thread_id);
    let (_, _, state) = send(
        &app,
        "GET",
        &format!("/agents/threads/{copy_id}/state"),
        Value::Null,
    )
    .await;
    assert_eq!(state["values"]["greeting"], "hello grace");
    assert_eq!(state["checkpoint"]["thread_id"], copy_id);
}

/// The app's authenticator and authorizer: unknown callers are refused, each user has
/// threads of their own, and the assistants are the app's.
#[tokio::test]
async fn each_user_sees_only_their_own_threads() {
    let app = service_example_embedding::app().await;
    let (status, _, _) = send_as(&app, "nobody", "POST", "/agents/threads/search", json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, _, thread) = send(&app, "POST", "/agents/threads", json!({})).await;
    assert_eq!(thread["metadata"]["user"], "key:ada");
    let thread_id = thread["thread_id"].as_str().unwrap();
    let path = format!("/agents/threads/{thread_id}");
    let (status, _, _) = send_as(&app, ALAN_KEY, "GET", &path, Value::Null).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, _, found) = send_as(&app, ALAN_KEY, "POST", "/agents/threads/search", json!({})).await;
    assert_eq!(found, json!([]));
    let (status, _, _) = send(&app, "GET", &path, Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send_as(
        &app,
        ALAN_KEY,
        "POST",
        "/agents/assistants",
        json!({"graph_id": "greeter"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
