//! Authentication and authorization on every route the router lists: the walk takes
//! the routes from the router itself, so a route added later without its guard fails.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use service_axum::auth::{Access, Auth, Authenticator, Unauthenticated};
use service_axum::{RouteInfo, RouterOptions, UiAssets};
use service_channels::{Channels, Generic, Route, Routes};
use service_engine::auth::{AuthRequest, Authorizer, Decision, Principal};
use tower::ServiceExt;

/// Accepts `x-api-key: key-<identity>`.
#[derive(Debug)]
struct Keys;

#[async_trait]
impl Authenticator for Keys {
    async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, Unauthenticated> {
        let key = request
            .headers
            .get("x-api-key")
            .and_then(|value| value.to_str().ok());
        match key.and_then(|key| key.strip_prefix("key-")) {
            Some(identity) => Ok(Arc::new(Principal::new(identity))),
            None => Err(Unauthenticated {
                message: "Missing or invalid API key".into(),
                challenge: Some("ApiKey".into()),
            }),
        }
    }
}

/// Answers every question the same.
struct Always(Decision);

#[async_trait]
impl Authorizer for Always {
    async fn authorize(&self, _principal: &Principal, _request: AuthRequest<'_>) -> Decision {
        self.0.clone()
    }
}

/// With one channel route and one graph's UI bundle, so the walk covers the channel
/// routes and the UI files too.
async fn app(decision: Option<Decision>) -> Router {
    let authorizer = decision.map(|decision| Arc::new(Always(decision)) as Arc<dyn Authorizer>);
    let engine = support::engine().await;
    let provider = Arc::new(Generic::new(vec!["walk-secret".into()], None));
    let routes = Routes::of(vec![Route::new(
        "walk",
        "echo",
        &[],
        provider,
        "walk-secret",
    )]);
    let options = RouterOptions {
        auth: Auth {
            authenticator: Some(Arc::new(Keys)),
            authorizer,
        },
        channels: Some(Channels::new(engine.clone(), routes)),
        ui: Some(Arc::new(UiAssets::new(BTreeMap::from([(
            "agent".to_owned(),
            vec![("entrypoint.js".to_owned(), Bytes::from_static(b"void 0;"))],
        )])))),
        ..RouterOptions::default()
    };
    service_axum::router_with(engine, options)
}

/// The inbound channel route is public and answers for itself: unsigned, it is the
/// provider check's 401 (no challenge), not the gate's.
fn channel_check_answered(
    route: &RouteInfo,
    status: StatusCode,
    body: &Value,
    challenged: bool,
) -> bool {
    route.path == "/channels/{route_name}"
        && status == StatusCode::UNAUTHORIZED
        && !challenged
        && body["message"]
            .as_str()
            .is_some_and(|message| message.contains("X-Service-Signature"))
}

/// The route's path with every parameter filled in with a plausible value.
fn concrete(route: &RouteInfo) -> String {
    let mut path = route.path.to_owned();
    for (name, value) in [
        ("{graph_id}", "agent".to_owned()),
        ("{namespace}", "child".to_owned()),
        ("{checkpoint_id}", uuid::Uuid::new_v4().to_string()),
        ("{route_name}", "walk".to_owned()),
        ("{file}", "entrypoint.js".to_owned()),
    ] {
        path = path.replace(name, &value);
    }
    while let (Some(start), Some(end)) = (path.find('{'), path.find('}')) {
        path.replace_range(start..=end, &uuid::Uuid::new_v4().to_string());
    }
    if route.path == "/store/items" {
        path.push_str("?namespace=a&key=k");
    }
    path
}

async fn send(app: &Router, route: &RouteInfo, key: Option<&str>) -> (StatusCode, Value, bool) {
    let mut request = Request::builder()
        .method(route.method.clone())
        .uri(concrete(route))
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let body = if route.method == "GET" {
        Body::empty()
    } else {
        Body::from("{}")
    };
    let response = app
        .clone()
        .oneshot(request.body(body).expect("request"))
        .await
        .expect("answered");
    let status = response.status();
    let challenged = response.headers().contains_key(header::WWW_AUTHENTICATE);
    // Refusals are JSON; streams of the routes that answer are not read to their end.
    let body = if status.is_client_error() {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    (status, body, challenged)
}

fn routes() -> Vec<RouteInfo> {
    let mut routes = service_axum::routes(&RouterOptions::default());
    routes.extend(service_axum::channel_routes());
    assert!(routes.len() > 50, "the router lists its routes");
    routes
}

#[tokio::test]
async fn every_route_but_the_public_ones_is_401_without_credentials() {
    let app = app(None).await;
    for route in routes() {
        let (status, body, challenged) = send(&app, &route, None).await;
        if route.access == Access::Public {
            let answered = status == StatusCode::OK
                || channel_check_answered(&route, status, &body, challenged);
            assert!(answered, "{} {}: {status} {body}", route.method, route.path);
            continue;
        }
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{} {}",
            route.method,
            route.path
        );
        assert_eq!(body["message"], json!("Missing or invalid API key"));
        assert!(challenged, "401 carries WWW-Authenticate");
        let (status, ..) = send(&app, &route, Some("wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "a wrong key is refused");
    }
}

#[tokio::test]
async fn every_guarded_route_asks_the_authorizer_before_it_does_anything() {
    let app = app(Some(Decision::Deny("not you".into()))).await;
    for route in routes() {
        let (status, body, challenged) = send(&app, &route, Some("key-a")).await;
        if route.access == Access::Public {
            let answered = status == StatusCode::OK
                || channel_check_answered(&route, status, &body, challenged);
            assert!(answered, "{} {}: {status} {body}", route.method, route.path);
            continue;
        }
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{} {} answered without asking the authorizer",
            route.method,
            route.path
        );
        assert_eq!(body["message"], json!("not you"));
    }
}

#[tokio::test]
async fn with_credentials_every_route_answers_for_itself() {
    for decision in [None, Some(Decision::Allow)] {
        let app = app(decision).await;
        for route in routes() {
            let (status, body, challenged) = send(&app, &route, Some("key-a")).await;
            if channel_check_answered(&route, status, &body, challenged) {
                continue;
            }
            assert!(
                status != StatusCode::UNAUTHORIZED
                    && status != StatusCode::FORBIDDEN
                    && !status.is_server_error(),
                "{} {}: {status} {body}",
                route.method,
                route.path
            );
        }
    }
}

/// `/metrics` is aggregate counts of every tenant's work, so it names no resource to
/// authorize: any authenticated caller may scrape it, nobody else.
#[tokio::test]
async fn metrics_need_credentials_but_no_authorization() {
    let engine = support::engine().await;
    let options = RouterOptions {
        auth: Auth {
            authenticator: Some(Arc::new(Keys)),
            authorizer: Some(Arc::new(Always(Decision::Deny("not you".into())))),
        },
        metrics: true,
        ..RouterOptions::default()
    };
    let app = service_axum::router_with(engine, options);
    let scrape = |key: Option<&str>| {
        let mut request = Request::builder().uri(service_axum::METRICS_PATH);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        app.clone()
            .oneshot(request.body(Body::empty()).expect("request"))
    };
    assert_eq!(
        scrape(None).await.expect("answered").status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        scrape(Some("wrong")).await.expect("answered").status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        scrape(Some("key-a")).await.expect("answered").status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn an_unknown_path_is_401_without_credentials_so_nothing_is_learned() {
    let app = app(None).await;
    let request = Request::builder()
        .uri("/no/such/route")
        .body(Body::empty())
        .expect("request");
    let response = app.oneshot(request).await.expect("answered");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_namespace_answer_for_threads_fails_closed() {
    let app = app(Some(Decision::Namespace(vec!["a".into()]))).await;
    let search = routes()
        .into_iter()
        .find(|route| route.path == "/threads/search")
        .expect("thread search");
    let (status, ..) = send(&app, &search, Some("key-a")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
}
