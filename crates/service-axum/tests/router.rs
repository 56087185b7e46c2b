//! The router in process (no socket): error mapping, bad input, limits, capability
//! gaps, idempotency, and embedding under a path.

mod support;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use service_engine::bus::MemoryBus;
use service_engine::{Engine, EngineConfig, EngineParts};
use service_graph::{Checkpointer, InMemorySaver};
use service_store::{Clock, SystemClock};
use service_store_memory::{MemoryOptions, memory_store};
use tower::ServiceExt;

async fn app() -> Router {
    support::app_with(service_axum::RouterOptions::default()).await
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |text| Body::from(text.to_owned())))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Reply {
        status,
        headers,
        body,
    }
}

async fn post(app: &Router, uri: &str, body: Value) -> Reply {
    call(app, "POST", uri, Some(&body.to_string()), &[]).await
}

fn assert_error(reply: &Reply, status: StatusCode, message: &str) {
    assert_eq!(reply.status, status, "body: {}", reply.body);
    assert_eq!(reply.body["status"], status.as_u16());
    assert_eq!(reply.body["message"], message);
    assert_eq!(reply.body["detail"], message, "detail repeats the message");
}

async fn thread(app: &Router) -> String {
    post(app, "/threads", json!({})).await.body["thread_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_non_uuid_thread_id_is_422() {
    let app = app().await;
    let reply = call(&app, "GET", "/threads/not-a-uuid", None, &[]).await;
    assert_error(
        &reply,
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid thread ID: must be a UUID",
    );
}

#[tokio::test]
async fn an_unknown_thread_is_404_naming_it() {
    let app = app().await;
    let id = "00000000-0000-4000-8000-000000000000";
    let reply = call(&app, "GET", &format!("/threads/{id}"), None, &[]).await;
    assert_error(
        &reply,
        StatusCode::NOT_FOUND,
        &format!("Thread with ID {id} not found"),
    );
}

#[tokio::test]
async fn percent_encoded_path_ids_are_decoded() {
    let app = app().await;
    let reply = call(&app, "GET", "/assistants/ech%6F", None, &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body["graph_id"], "echo");
}

#[tokio::test]
async fn malformed_json_is_422() {
    let app = app().await;
    // Broken at the start, cut short, and valid JSON followed by more text.
    for body in [
        "{not json",
        r#"{"metadata": {"a": 1}"#,
        r#"{"metadata": {}} {}"#,
    ] {
        let reply = call(&app, "POST", "/threads", Some(body), &[]).await;
        assert_error(
            &reply,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid JSON in request body",
        );
    }
}

#[tokio::test]
async fn a_body_of_the_wrong_shape_is_422_with_the_reason() {
    let app = app().await;
    let reply = post(&app, "/threads/search", json!({"limit": "ten"})).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(reply.body["message"].as_str().unwrap().contains("limit"));
}

#[tokio::test]
async fn a_search_limit_above_1000_is_rejected() {
    let app = app().await;
    for uri in [
        "/threads/search",
        "/assistants/search",
        "/runs/crons/search",
        "/store/items/search",
    ] {
        let reply = post(&app, uri, json!({"limit": 1001})).await;
        assert_error(
            &reply,
            StatusCode::UNPROCESSABLE_ENTITY,
            "1001 is greater than the maximum of 1000",
        );
    }
}

#[tokio::test]
async fn a_search_without_limit_returns_up_to_the_max_page_size_not_10() {
    let app = app().await;
    // Eight system assistants exist already: four more make twelve of each.
    for n in 0..12 {
        if n < 4 {
            post(&app, "/assistants", json!({"graph_id": "echo"})).await;
        }
        thread(&app).await;
        let cron = json!({"assistant_id": "echo", "schedule": "0 0 * * *"});
        assert_eq!(post(&app, "/runs/crons", cron).await.status, StatusCode::OK);
        let item = json!({"namespace": ["docs"], "key": format!("k{n}"), "value": {"n": n}});
        let put = call(&app, "PUT", "/store/items", Some(&item.to_string()), &[]).await;
        assert!(put.status.is_success(), "{}", put.body);
    }
    for uri in [
        "/threads/search",
        "/assistants/search",
        "/runs/crons/search",
        "/store/items/search",
    ] {
        let all = post(&app, uri, json!({})).await;
        let rows = all.body.get("items").unwrap_or(&all.body);
        assert_eq!(rows.as_array().map(Vec::len), Some(12), "{uri}");
        let asked = post(&app, uri, json!({"limit": 10})).await;
        let rows = asked.body.get("items").unwrap_or(&asked.body);
        assert_eq!(rows.as_array().map(Vec::len), Some(10), "{uri}");
    }
}

#[tokio::test]
async fn list_limits_above_1000_are_clamped_not_rejected() {
    let app = app().await;
    let thread = thread(&app).await;
    let reply = call(
        &app,
        "GET",
        &format!("/threads/{thread}/runs?limit=5000"),
        None,
        &[],
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    let reply = post(&app, "/store/namespaces", json!({"limit": 5000})).await;
    assert_eq!(reply.status, StatusCode::OK);
}

#[tokio::test]
async fn a_missing_optional_agent_method_is_422_agent_capability_missing() {
    let app = app().await;
    let thread = thread(&app).await;
    let run = post(
        &app,
        &format!("/threads/{thread}/runs/wait"),
        json!({"assistant_id": "reply", "input": {"text": "hi"}}),
    )
    .await;
    assert_eq!(run.status, StatusCode::OK);
    let reply = post(
        &app,
        &format!("/threads/{thread}/history"),
        json!({"limit": 10}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.body["code"], "agent_capability_missing");
    assert_eq!(
        reply.body["details"],
        json!({"capability": "getStateHistory"})
    );
    let reply = post(
        &app,
        &format!("/threads/{thread}/state"),
        json!({"values": {"text": "x"}}),
    )
    .await;
    assert_eq!(reply.body["details"], json!({"capability": "updateState"}));
    // State reads fall back to getState.
    let state = call(&app, "GET", &format!("/threads/{thread}/state"), None, &[]).await;
    assert_eq!(state.status, StatusCode::OK);
}

#[tokio::test]
async fn an_unknown_assistant_string_is_422_listing_the_graphs() {
    let app = app().await;
    let reply = post(&app, "/runs", json!({"assistant_id": "nope"})).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid assistant: 'nope'")
    );
}

#[tokio::test]
async fn resuming_without_a_thread_is_400() {
    let app = app().await;
    let reply = post(
        &app,
        "/runs",
        json!({"assistant_id": "approval", "command": {"resume": true}}),
    )
    .await;
    assert_error(
        &reply,
        StatusCode::BAD_REQUEST,
        "You must provide a thread_id when resuming.",
    );
}

#[tokio::test]
async fn store_namespaces_are_checked() {
    let app = app().await;
    let empty = call(
        &app,
        "PUT",
        "/store/items",
        Some(r#"{"namespace": [], "key": "k", "value": {}}"#),
        &[],
    )
    .await;
    assert_error(
        &empty,
        StatusCode::BAD_REQUEST,
        "Namespace cannot be empty.",
    );
    let dotted = call(
        &app,
        "PUT",
        "/store/items",
        Some(r#"{"namespace": ["a.b"], "key": "k", "value": {}}"#),
        &[],
    )
    .await;
    assert_eq!(dotted.status, StatusCode::UNPROCESSABLE_ENTITY);
    let no_key = call(&app, "GET", "/store/items?namespace=a", None, &[]).await;
    assert_eq!(no_key.status, StatusCode::BAD_REQUEST);
    assert_eq!(no_key.body, json!({"error": "Key is required"}));
    let missing = call(&app, "GET", "/store/items?namespace=a&key=nope", None, &[]).await;
    assert_eq!(
        (missing.status, missing.body),
        (StatusCode::OK, Value::Null)
    );
}

#[tokio::test]
async fn an_unknown_store_filter_operator_is_400() {
    let app = app().await;
    let reply = post(
        &app,
        "/store/items/search",
        json!({"namespace_prefix": ["a"], "filter": {"x": {"$regex": "y"}}}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn patching_thread_state_needs_a_checkpoint_and_a_metadata_object() {
    let app = app().await;
    let thread = thread(&app).await;
    let uri = format!("/threads/{thread}/state");
    let reply = call(&app, "PATCH", &uri, Some(r#"{"metadata": {"a": 1}}"#), &[]).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let reply = call(&app, "PATCH", &uri, Some(r#"{"metadata": [1]}"#), &[]).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let unknown = format!("/threads/{}/state", uuid::Uuid::new_v4());
    let reply = call(&app, "PATCH", &unknown, Some(r#"{"metadata": {}}"#), &[]).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_wrong_method_is_405() {
    let app = app().await;
    let reply = call(&app, "PUT", "/threads/search", Some("{}"), &[]).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn an_idempotency_key_replays_and_refuses_a_different_body() {
    let app = app().await;
    let thread = thread(&app).await;
    let uri = format!("/threads/{thread}/runs");
    let body = r#"{"assistant_id": "echo", "input": {"messages": []}}"#;
    let key = [("idempotency-key", "k-1")];
    let first = call(&app, "POST", &uri, Some(body), &key).await;
    let second = call(&app, "POST", &uri, Some(body), &key).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(second.body["run_id"], first.body["run_id"]);
    let other = call(
        &app,
        "POST",
        &uri,
        Some(r#"{"assistant_id": "steps"}"#),
        &key,
    )
    .await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn concurrent_duplicates_with_one_key_act_once() {
    let app = app().await;
    let thread = thread(&app).await;
    let uri = format!("/threads/{thread}/runs");
    let body =
        r#"{"assistant_id": "echo", "input": {"messages": []}, "multitask_strategy": "enqueue"}"#;
    let calls = (0..8).map(|_| {
        call(
            &app,
            "POST",
            &uri,
            Some(body),
            &[("idempotency-key", "same")],
        )
    });
    let replies = futures::future::join_all(calls).await;
    let created: std::collections::HashSet<String> = replies
        .iter()
        .filter(|reply| reply.status == StatusCode::OK)
        .map(|reply| reply.body["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(created.len(), 1, "every success names the same run");
    assert!(
        replies
            .iter()
            .all(|reply| reply.status == StatusCode::OK || reply.status == StatusCode::CONFLICT)
    );
    let runs = call(&app, "GET", &format!("/threads/{thread}/runs"), None, &[]).await;
    assert_eq!(runs.body.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn nested_under_a_path_the_location_headers_include_it() {
    let app = Router::new().nest("/agents", app().await);
    let reply = post(
        &app,
        "/agents/runs",
        json!({"assistant_id": "echo", "input": {"messages": []}}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    let run_id = reply.body["run_id"].as_str().unwrap();
    assert_eq!(
        reply.headers["content-location"],
        format!("/agents/runs/{run_id}")
    );
    let thread = post(&app, "/agents/threads", json!({})).await.body["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let waited = post(
        &app,
        &format!("/agents/threads/{thread}/runs/wait"),
        json!({"assistant_id": "echo", "input": {"messages": []}}),
    )
    .await;
    assert!(
        waited.headers["location"]
            .to_str()
            .unwrap()
            .starts_with(&format!("/agents/threads/{thread}/runs/"))
    );
}

#[tokio::test]
async fn search_pagination_headers_are_sent() {
    let app = app().await;
    let reply = post(&app, "/assistants/search", json!({"limit": 2})).await;
    assert_eq!(reply.headers["x-pagination-next"], "2");
    assert_eq!(reply.headers["x-pagination-total"], "8");
    let last = post(&app, "/assistants/search", json!({"limit": 5, "offset": 5})).await;
    assert_eq!(last.body.as_array().map(Vec::len), Some(3));
    assert!(!last.headers.contains_key("x-pagination-next"));
}

#[tokio::test]
async fn cron_search_sends_the_pagination_headers_too() {
    let app = app().await;
    for _ in 0..3 {
        let cron = json!({"assistant_id": "echo", "schedule": "0 0 * * *"});
        assert_eq!(post(&app, "/runs/crons", cron).await.status, StatusCode::OK);
    }
    let first = post(&app, "/runs/crons/search", json!({"limit": 2})).await;
    assert_eq!(first.body.as_array().map(Vec::len), Some(2));
    assert_eq!(first.headers["x-pagination-next"], "2");
    assert_eq!(first.headers["x-pagination-total"], "3");
    let last = post(&app, "/runs/crons/search", json!({"limit": 2, "offset": 2})).await;
    assert_eq!(last.body.as_array().map(Vec::len), Some(1));
    assert!(!last.headers.contains_key("x-pagination-next"));
    assert_eq!(last.headers["x-pagination-total"], "3");
}

/// An engine whose only graph fails to load, with stacks exposed or not.
async fn broken_app(expose_stacks: bool) -> Router {
    use service_graph::{GraphError, GraphRegistry};
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut registry = GraphRegistry::new();
    registry.register(
        "broken",
        service_types::GraphSchema::default(),
        Arc::new(|| {
            Box::pin(async {
                Err(GraphError::LoadFailed {
                    graph_id: "broken".into(),
                    reason: "missing API key".into(),
                })
            })
        }),
    );
    let config = EngineConfig {
        expose_stacks,
        ..EngineConfig::default()
    };
    let engine = Engine::new(EngineParts {
        webhooks: None,
        store: memory_store(MemoryOptions::new(clock.clone())),
        graphs: Box::new(move |_: Arc<dyn Checkpointer>| Ok(registry)),
        checkpointer: Arc::new(InMemorySaver::new()),
        bus: MemoryBus::new(config.bus),
        clock,
        config,
    })
    .expect("a registry");
    engine
        .system()
        .ensure_system_assistants()
        .await
        .expect("system assistants");
    service_axum::router(engine)
}

#[tokio::test]
async fn a_graph_that_fails_to_load_is_500_graph_load_failed_with_the_reason_only_when_exposed() {
    let exposed = broken_app(true).await;
    let reply = call(&exposed, "GET", "/assistants/broken/graph", None, &[]).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.body["code"], "graph_load_failed");
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .contains("missing API key")
    );

    let hidden = broken_app(false).await;
    let reply = call(&hidden, "GET", "/assistants/broken/graph", None, &[]).await;
    assert_eq!(reply.body["code"], "graph_load_failed");
    assert!(
        !reply.body["message"]
            .as_str()
            .unwrap()
            .contains("missing API key")
    );
}

#[tokio::test]
async fn invoke_runs_the_graph_and_refuses_a_webhook_it_could_never_send() {
    let app = app().await;
    let input = json!({"messages": [{"type": "human", "content": "hi"}]});
    let reply = post(&app, "/invoke/echo", input).await;
    assert_eq!(reply.status, StatusCode::OK, "body: {}", reply.body);
    assert_eq!(reply.body["messages"][1]["content"], "echo: hi");

    let with_hook = json!({"messages": [], "webhook": "https://hooks.example.com/x"});
    let reply = post(&app, "/invoke/echo", with_hook).await;
    assert_error(
        &reply,
        StatusCode::UNPROCESSABLE_ENTITY,
        "POST /invoke has no run, so it sends no webhook; create a run (POST /runs/wait) to get one",
    );
}

#[tokio::test]
async fn the_deliveries_routes_check_their_input() {
    let app = app().await;
    let thread = thread(&app).await;
    let run = uuid::Uuid::now_v7();
    let base = format!("/threads/{thread}/runs/{run}/deliveries");
    let listed = call(&app, "GET", &base, None, &[]).await;
    assert_eq!(listed.status, StatusCode::OK, "body: {}", listed.body);
    assert_eq!(listed.body, json!([]));
    let bad_status = call(&app, "GET", &format!("{base}?status=sent"), None, &[]).await;
    assert_error(
        &bad_status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid delivery status: 'sent' (pending, delivering, delivered or dead)",
    );
    let negative = call(&app, "GET", &format!("{base}?limit=-1"), None, &[]).await;
    assert_error(
        &negative,
        StatusCode::UNPROCESSABLE_ENTITY,
        "limit must not be negative",
    );
    let unknown = uuid::Uuid::now_v7();
    let replay = post(&app, &format!("{base}/{unknown}/replay"), json!({})).await;
    assert_error(
        &replay,
        StatusCode::NOT_FOUND,
        &format!("Delivery {unknown} not found"),
    );
}
