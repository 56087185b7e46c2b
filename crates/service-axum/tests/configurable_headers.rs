//! `http.configurable_headers` in process: the request headers a policy includes land
//! in a new run's `config.configurable` (over the body's), credentials never do, and
//! without a policy nothing is copied.

mod support;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use service_axum::{ConfigurableHeaders, RouterOptions};
use tower::ServiceExt;

async fn post(app: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    let request = Request::builder()
        .method("POST")
        .uri(uri)
        .header("content-type", "application/json")
        .header("x-user-id", "u-7")
        .header("x-org-secret", "s3cret")
        .header("x-api-key", "key")
        .header("user-agent", "tests/1")
        .body(Body::from(body.to_string()))
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

/// The `configurable` a background run was created with, read back from the run.
async fn configurable_of_a_run(app: &Router, body: Value) -> Value {
    let (status, run) = post(app, "/runs", body).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    run["kwargs"]["config"]["configurable"].clone()
}

fn policy() -> ConfigurableHeaders {
    ConfigurableHeaders {
        includes: vec!["x-*".into(), "user-agent".into()],
        excludes: vec!["x-org-*".into()],
    }
}

#[tokio::test]
async fn included_headers_reach_the_runs_configurable_and_excluded_ones_do_not() {
    let app = support::app_with(RouterOptions {
        configurable_headers: Some(policy()),
        ..RouterOptions::default()
    })
    .await;
    let body = json!({"assistant_id": "echo", "input": {}, "config": {"configurable": {"x-user-id": "from-body", "model": "m"}}});
    let configurable = configurable_of_a_run(&app, body).await;
    assert_eq!(
        configurable["x-user-id"], "u-7",
        "the header wins over the body: {configurable}"
    );
    assert_eq!(configurable["user-agent"], "tests/1");
    assert_eq!(configurable["model"], "m");
    assert!(
        configurable.get("x-org-secret").is_none(),
        "excluded: {configurable}"
    );
    assert!(
        configurable.get("x-api-key").is_none(),
        "credentials never: {configurable}"
    );
    assert!(
        configurable.get("content-type").is_none(),
        "not included: {configurable}"
    );

    let (status, runs) = post(
        &app,
        "/runs/batch",
        json!([{"assistant_id": "echo", "input": {}}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert_eq!(
        runs[0]["kwargs"]["config"]["configurable"]["x-user-id"],
        "u-7"
    );
}

#[tokio::test]
async fn without_a_policy_no_header_is_copied() {
    let app = support::app_with(RouterOptions::default()).await;
    let configurable =
        configurable_of_a_run(&app, json!({"assistant_id": "echo", "input": {}})).await;
    assert!(configurable.get("x-user-id").is_none(), "{configurable}");
    assert!(configurable.get("user-agent").is_none(), "{configurable}");
}
