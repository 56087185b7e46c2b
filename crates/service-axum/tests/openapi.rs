//! The OpenAPI document at `/openapi.json` describes every route the router serves
//! (taken from the router's own table, so a route added without an operation fails
//! here), each with its answers' schemas; the resources' schemas carry the fields
//! the SDKs' wire contract says they rely on; `/docs` renders it with nothing
//! loaded from elsewhere.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use service_axum::RouterOptions;
use service_channels::{Channels, Generic, Route, Routes};
use tower::ServiceExt;

/// Every optional route on: one channel route and metrics.
async fn full_options() -> (service_engine::Engine, RouterOptions) {
    let engine = support::engine().await;
    let provider = Arc::new(Generic::new(vec!["secret".into()], None));
    let routes = Routes::of(vec![Route::new("walk", "echo", &[], provider, "secret")]);
    let options = RouterOptions {
        channels: Some(Channels::new(engine.clone(), routes)),
        metrics: true,
        ..RouterOptions::default()
    };
    (engine, options)
}

async fn get(app: &Router, uri: &str) -> (StatusCode, String, String) {
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
        .await
        .expect("answered");
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        content_type,
        String::from_utf8(bytes.to_vec()).expect("utf-8"),
    )
}

async fn document(app: &Router) -> Value {
    let (status, content_type, body) = get(app, "/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    serde_json::from_str(&body).expect("the document is JSON")
}

fn operations(document: &Value) -> BTreeSet<String> {
    let paths = document["paths"].as_object().expect("paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            let methods = item.as_object().expect("path item");
            methods
                .keys()
                .map(move |method| format!("{} {path}", method.to_ascii_uppercase()))
        })
        .collect()
}

/// Every `$ref` in `value` names a schema of the document.
fn refs_resolve(value: &Value, schemas: &serde_json::Map<String, Value>, at: &str) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                let name = target
                    .strip_prefix("#/components/schemas/")
                    .unwrap_or_else(|| panic!("{at}: a $ref outside the schemas: {target}"));
                assert!(schemas.contains_key(name), "{at}: {target} is not defined");
            }
            for (key, inner) in map {
                refs_resolve(inner, schemas, &format!("{at}/{key}"));
            }
        }
        Value::Array(items) => {
            for item in items {
                refs_resolve(item, schemas, at);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn every_route_has_an_operation_and_nothing_else_does() {
    let (engine, options) = full_options().await;
    let mut served: BTreeSet<String> = service_axum::routes(&options)
        .iter()
        .map(|route| format!("{} {}", route.method, route.path))
        .collect();
    served.insert(format!("GET {}", service_axum::METRICS_PATH));
    assert!(served.len() > 70, "the router lists its routes: {served:?}");
    let app = service_axum::router_with(engine, options);
    let document = document(&app).await;
    assert_eq!(document["openapi"], "3.1.0");
    let described = operations(&document);
    let missing: Vec<_> = served.difference(&described).collect();
    let extra: Vec<_> = described.difference(&served).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "routes without an operation: {missing:?}; operations of routes not served: {extra:?}"
    );
}

#[tokio::test]
async fn every_operation_says_what_it_answers_with_a_schema() {
    let (engine, options) = full_options().await;
    let document = document(&service_axum::router_with(engine, options)).await;
    let schemas = document["components"]["schemas"]
        .as_object()
        .expect("schemas");
    refs_resolve(&document, schemas, "#");
    for (path, item) in document["paths"].as_object().expect("paths") {
        let declared: BTreeSet<&str> = path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        for (method, operation) in item.as_object().expect("path item") {
            let at = format!("{method} {path}");
            let responses = operation["responses"].as_object().expect("responses");
            let success: Vec<_> = responses
                .iter()
                .filter(|(status, _)| status.starts_with('1') || status.starts_with('2'))
                .collect();
            assert!(!success.is_empty(), "{at}: no success answer");
            for (status, response) in responses {
                let content = response.get("content").and_then(Value::as_object);
                let no_body = matches!(status.as_str(), "101" | "202" | "204");
                assert!(
                    content.is_some() || no_body,
                    "{at} {status}: an answer with a body but no schema"
                );
                for (media, body) in content.into_iter().flatten() {
                    assert!(
                        body.get("schema").is_some(),
                        "{at} {status} {media}: no schema"
                    );
                }
            }
            let parameters = operation["parameters"].as_array().cloned();
            let in_path: BTreeSet<String> = parameters
                .iter()
                .flatten()
                .filter(|parameter| parameter["in"] == "path")
                .map(|parameter| parameter["name"].as_str().expect("name").to_owned())
                .collect();
            let declared: BTreeSet<String> = declared.iter().map(|name| name.to_string()).collect();
            assert_eq!(in_path, declared, "{at}: path parameters");
            // Every write reads a JSON body but these three, which take only their path
            // and query.
            let bodiless = ["/copy", "/replay", "/cancel"];
            if matches!(method.as_str(), "put" | "patch")
                || (method == "post" && !bodiless.iter().any(|end| path.ends_with(end)))
            {
                let body = &operation["requestBody"]["content"]["application/json"]["schema"];
                assert!(!body.is_null(), "{at}: no request body schema");
            }
        }
    }
}

/// The fields each resource always carries (the required fields of the SDKs' wire
/// contract for each type), which the SDKs read without checking.
#[tokio::test]
async fn resource_schemas_require_the_fields_the_sdks_rely_on() {
    let document = document(&support::app_with(RouterOptions::default()).await).await;
    let schemas = &document["components"]["schemas"];
    let contract: [(&str, &[&str]); 8] = [
        (
            "Assistant",
            &[
                "assistant_id",
                "graph_id",
                "config",
                "context",
                "metadata",
                "name",
                "description",
                "version",
                "created_at",
                "updated_at",
            ],
        ),
        (
            "AssistantVersion",
            &[
                "assistant_id",
                "version",
                "graph_id",
                "config",
                "context",
                "metadata",
                "created_at",
                "name",
                "description",
            ],
        ),
        (
            "Thread",
            &[
                "thread_id",
                "created_at",
                "updated_at",
                "state_updated_at",
                "metadata",
                "status",
                "config",
                "values",
                "interrupts",
            ],
        ),
        (
            "ThreadState",
            &[
                "values",
                "next",
                "tasks",
                "checkpoint",
                "parent_checkpoint",
                "metadata",
                "created_at",
                "interrupts",
            ],
        ),
        (
            "Run",
            &[
                "run_id",
                "thread_id",
                "assistant_id",
                "created_at",
                "updated_at",
                "status",
                "metadata",
                "multitask_strategy",
                "kwargs",
            ],
        ),
        (
            "Cron",
            &[
                "cron_id",
                "assistant_id",
                "thread_id",
                "user_id",
                "schedule",
                "timezone",
                "end_time",
                "next_run_date",
                "payload",
                "metadata",
                "on_run_completed",
                "enabled",
                "created_at",
                "updated_at",
            ],
        ),
        (
            "Item",
            &["namespace", "key", "value", "created_at", "updated_at"],
        ),
        ("RunCreate", &["assistant_id"]),
    ];
    for (name, fields) in contract {
        let required: BTreeSet<&str> = schemas[name]["required"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no required fields"))
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let fields: BTreeSet<&str> = fields.iter().copied().collect();
        assert_eq!(required, fields, "{name}'s required fields");
    }
    // Enumerations are the contract's values.
    let run_status = &schemas["RunStatus"]["enum"];
    for status in ["pending", "running", "error", "success", "timeout"] {
        assert!(
            run_status
                .as_array()
                .is_some_and(|values| values.contains(&Value::from(status))),
            "RunStatus lacks {status}: {run_status}"
        );
    }
    let interrupt = schemas["RunCreate"]["properties"]["interrupt_before"].to_string();
    assert!(interrupt.contains("NodeSelection"), "{interrupt}");
    let all = &schemas["NodeSelection"];
    assert!(all.to_string().contains("\"*\""), "NodeSelection: {all}");
}

/// A creation links to the routes its answer's ids fill, so a client or a fuzzer can
/// follow it; every link names an operation of the document.
#[tokio::test]
async fn creations_link_to_the_routes_of_what_they_created() {
    let document = document(&support::app_with(RouterOptions::default()).await).await;
    let paths = document["paths"].as_object().expect("paths");
    let ids: BTreeSet<&str> = paths
        .values()
        .flat_map(|item| item.as_object().expect("path item").values())
        .filter_map(|operation| operation["operationId"].as_str())
        .collect();
    let links = |path: &str| -> BTreeSet<String> {
        let links = &paths[path]["post"]["responses"]["200"]["links"];
        let links = links.as_object().cloned().unwrap_or_default();
        for link in links.values() {
            let target = link["operationId"].as_str().expect("operationId");
            assert!(ids.contains(target), "{path} links to {target}");
        }
        links
            .values()
            .map(|link| link["operationId"].as_str().expect("id").to_owned())
            .collect()
    };
    let thread = links("/threads");
    assert!(thread.contains("get /threads/{thread_id}"), "{thread:?}");
    assert!(
        thread.contains("post /threads/{thread_id}/runs"),
        "{thread:?}"
    );
    assert!(
        !thread.iter().any(|id| id.contains("{run_id}")),
        "{thread:?}"
    );
    let run = links("/threads/{thread_id}/runs");
    assert!(
        run.contains("get /threads/{thread_id}/runs/{run_id}"),
        "{run:?}"
    );
    assert!(links("/runs/crons").contains("patch /runs/crons/{cron_id}"));
    assert!(links("/assistants").contains("get /assistants/{assistant_id}/schemas"));
    let run_link = &paths["/runs"]["post"]["responses"]["200"]["links"]["get__threads__thread_id__runs__run_id_"]
        ["parameters"];
    assert_eq!(run_link["run_id"], "$response.body#/run_id");
}

#[tokio::test]
async fn disabled_routes_are_left_out_of_the_document() {
    let options = RouterOptions {
        disable_runs: true,
        ..RouterOptions::default()
    };
    let described = operations(&document(&support::app_with(options).await).await);
    assert!(described.contains("GET /threads/{thread_id}"));
    assert!(!described.contains("POST /runs"));
    assert!(!described.contains("POST /mcp"));
    assert!(!described.contains("GET /metrics"));
    assert!(!described.contains("GET /channels"));
}

#[tokio::test]
async fn the_docs_page_renders_the_document_beside_it_from_nothing_else() {
    let app = support::app_with(RouterOptions::default()).await;
    let (status, content_type, page) = get(&app, "/docs").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/html; charset=utf-8");
    // Relative, so the page works wherever the router is nested.
    assert!(page.contains("fetch(\"openapi.json\""), "{page}");
    for outside in ["http://", "https://", "//cdn", "<link", "src="] {
        assert!(!page.contains(outside), "the page loads {outside}…");
    }
}

#[tokio::test]
async fn nested_routers_serve_the_page_and_document_under_their_mount() {
    let app = Router::new().nest("/agents", support::app_with(RouterOptions::default()).await);
    let (status, ..) = get(&app, "/agents/docs").await;
    assert_eq!(status, StatusCode::OK);
    assert!(operations(&document_at(&app, "/agents/openapi.json").await).contains("POST /runs"));
}

async fn document_at(app: &Router, uri: &str) -> Value {
    let (status, _, body) = get(app, uri).await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_str(&body).expect("JSON")
}
