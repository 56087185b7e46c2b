//! CORS in process: the permissive answers without a policy, and a configured policy
//! (`http.cors`) answered as the reference server's CORS middleware answers it.

mod support;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use service_axum::{CorsPolicy, OriginPattern, RouterOptions};
use tower::ServiceExt;

async fn send(
    app: &Router,
    method: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Value) {
    let mut request = Request::builder().method(method).uri("/assistants/search");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = if method == "POST" { "{}" } else { "" };
    let request = request
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("answered");
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    (
        parts.status,
        parts.headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

fn preflight<'a>(origin: &'a str, method: &'a str, headers: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("origin", origin),
        ("access-control-request-method", method),
        ("access-control-request-headers", headers),
    ]
}

async fn configured(policy: CorsPolicy) -> Router {
    support::app_with(RouterOptions {
        cors: Some(policy),
        ..RouterOptions::default()
    })
    .await
}

#[tokio::test]
async fn without_a_policy_every_origin_is_answered_and_the_paging_headers_exposed() {
    let app = support::app_with(RouterOptions::default()).await;
    let (status, headers, _) = send(&app, "POST", &[("origin", "https://any.example")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "access-control-allow-origin"), Some("*"));
    // As the reference exposes them: Location stays hidden from scripts, so the JS SDK
    // does not follow each stream with a read of its run.
    assert_eq!(
        header(&headers, "access-control-expose-headers"),
        Some("x-pagination-total, x-pagination-next, content-location")
    );
}

#[tokio::test]
async fn without_a_policy_a_public_page_may_reach_this_server_on_a_private_address() {
    let app = support::app_with(RouterOptions::default()).await;
    let mut asked = preflight("https://agentchat.vercel.app", "POST", "content-type");
    asked.push(("access-control-request-private-network", "true"));
    let (status, headers, _) = send(&app, "OPTIONS", &asked).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        header(&headers, "access-control-allow-private-network"),
        Some("true")
    );
    // Only a preflight that asks gets the answer.
    let plain = preflight("https://agentchat.vercel.app", "POST", "content-type");
    let (_, headers, _) = send(&app, "OPTIONS", &plain).await;
    assert_eq!(
        header(&headers, "access-control-allow-private-network"),
        None
    );
}

#[tokio::test]
async fn a_listed_origin_is_named_back_and_another_gets_no_allow_origin() {
    let app = configured(CorsPolicy {
        allow_origins: vec!["https://app.example".into()],
        allow_methods: vec!["GET".into(), "POST".into()],
        allow_headers: vec!["x-api-key".into()],
        expose_headers: vec!["x-pagination-next".into()],
        ..CorsPolicy::default()
    })
    .await;
    let (status, headers, _) = send(&app, "POST", &[("origin", "https://app.example")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, "access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(header(&headers, "vary"), Some("Origin"));
    assert_eq!(
        header(&headers, "access-control-expose-headers"),
        Some("x-pagination-next")
    );
    assert_eq!(header(&headers, "access-control-allow-credentials"), None);

    let (status, headers, _) = send(&app, "POST", &[("origin", "https://evil.example")]).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the request itself is served; the browser hides it"
    );
    assert_eq!(header(&headers, "access-control-allow-origin"), None);

    // A request from no browser carries no Origin and gets no CORS headers.
    let (_, headers, _) = send(&app, "POST", &[]).await;
    assert_eq!(header(&headers, "access-control-allow-origin"), None);
}

#[tokio::test]
async fn a_preflight_is_allowed_or_refused_naming_what_is_not_allowed() {
    let app = configured(CorsPolicy {
        allow_origins: vec!["https://app.example".into()],
        allow_methods: vec!["GET".into(), "POST".into()],
        allow_headers: vec!["x-api-key".into()],
        max_age: 60,
        ..CorsPolicy::default()
    })
    .await;
    let (status, headers, _) = send(
        &app,
        "OPTIONS",
        &preflight("https://app.example", "POST", "content-type, X-Api-Key"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, "access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(
        header(&headers, "access-control-allow-methods"),
        Some("GET, POST")
    );
    assert_eq!(
        header(&headers, "access-control-allow-headers"),
        Some("accept, accept-language, content-language, content-type, x-api-key")
    );
    assert_eq!(header(&headers, "access-control-max-age"), Some("60"));

    for (origin, method, asked, says) in [
        (
            "https://evil.example",
            "POST",
            "x-api-key",
            "Disallowed CORS origin",
        ),
        (
            "https://app.example",
            "DELETE",
            "x-api-key",
            "Disallowed CORS method",
        ),
        (
            "https://app.example",
            "POST",
            "authorization",
            "Disallowed CORS headers",
        ),
    ] {
        let (status, headers, body) =
            send(&app, "OPTIONS", &preflight(origin, method, asked)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{origin} {method} {asked}");
        assert_eq!(body["message"], says);
        assert_eq!(header(&headers, "access-control-allow-origin"), None);
    }
}

#[tokio::test]
async fn an_origin_regex_admits_the_origins_it_wholly_matches() {
    let app = configured(CorsPolicy {
        allow_methods: vec!["*".into()],
        allow_headers: vec!["*".into()],
        allow_credentials: true,
        allow_origin_regex: Some(OriginPattern::new(r"https://[a-z]+\.example\.com").unwrap()),
        ..CorsPolicy::default()
    })
    .await;
    let (status, headers, _) = send(
        &app,
        "OPTIONS",
        &preflight("https://ui.example.com", "PATCH", "x-anything"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, "access-control-allow-origin"),
        Some("https://ui.example.com")
    );
    assert_eq!(
        header(&headers, "access-control-allow-headers"),
        Some("x-anything")
    );
    assert_eq!(
        header(&headers, "access-control-allow-credentials"),
        Some("true")
    );
    assert!(
        header(&headers, "access-control-allow-methods")
            .unwrap()
            .contains("PATCH")
    );
    let (status, _, _) = send(
        &app,
        "OPTIONS",
        &preflight("https://ui.example.com.evil.net", "GET", ""),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "the whole origin must match"
    );
    assert!(OriginPattern::new("(").is_err());
    assert!(
        OriginPattern::new("https://a.example)|(.*").is_err(),
        "a pattern cannot escape its anchoring"
    );
}
