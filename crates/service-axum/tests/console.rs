//! SPEC "Console (web UI)" items 1–2 and Authentication 6: the console's files are
//! served at the mount, GET and HEAD only, without credentials even when the API
//! needs them; the bare mount redirects to the slashed form; any other path under
//! the mount is a miss, never the index page.

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use service_axum::RouterOptions;
use service_axum::auth::{Auth, Authenticator, Unauthenticated};
use service_engine::auth::Principal;
use tower::ServiceExt;

/// Refuses every request: the API needs a key nobody has.
#[derive(Debug)]
struct Nobody;

#[async_trait]
impl Authenticator for Nobody {
    async fn authenticate(&self, _request: &Parts) -> Result<Arc<Principal>, Unauthenticated> {
        Err(Unauthenticated {
            message: "Missing or invalid API key".into(),
            challenge: Some("ApiKey".into()),
        })
    }
}

async fn app(options: RouterOptions) -> Router {
    service_axum::console("/console").merge(support::app_with(options).await)
}

async fn send(app: &Router, method: Method, uri: &str, gzip: bool) -> Response {
    send_accepting(app, method, uri, gzip.then_some("gzip, br")).await
}

async fn send_accepting(
    app: &Router,
    method: Method,
    uri: &str,
    accept_encoding: Option<&str>,
) -> Response {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(accept) = accept_encoding {
        request = request.header(header::ACCEPT_ENCODING, accept);
    }
    app.clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

async fn text(response: Response) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn header_of(response: &Response, name: header::HeaderName) -> &str {
    response
        .headers()
        .get(name)
        .map_or("", |value| value.to_str().unwrap())
}

/// The hashed folder the index names, such as `0123456789ab`.
async fn asset_folder(app: &Router) -> String {
    let index = text(send(app, Method::GET, "/console/", false).await).await;
    let start = index.find("./").expect("a relative asset link") + 2;
    index[start..start + 12].to_owned()
}

#[tokio::test]
async fn the_bare_mount_redirects_to_the_slashed_form_keeping_the_query() {
    let app = app(RouterOptions::default()).await;
    let response = send(&app, Method::GET, "/console", false).await;
    assert_eq!(response.status(), StatusCode::FOUND);
    assert_eq!(header_of(&response, header::LOCATION), "/console/");
    let response = send(&app, Method::GET, "/console?baseUrl=http://a/b", false).await;
    assert_eq!(
        header_of(&response, header::LOCATION),
        "/console/?baseUrl=http://a/b"
    );
}

#[tokio::test]
async fn the_index_is_html_never_cached_and_names_hashed_assets() {
    let app = app(RouterOptions::default()).await;
    let response = send(&app, Method::GET, "/console/", false).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(header_of(&response, header::CONTENT_TYPE).starts_with("text/html"));
    assert_eq!(header_of(&response, header::CACHE_CONTROL), "no-cache");
    assert!(header_of(&response, header::CONTENT_SECURITY_POLICY).contains("script-src 'self'"));
    let folder = asset_folder(&app).await;
    assert!(folder.chars().all(|c| c.is_ascii_hexdigit()), "{folder}");
    assert!(!text(response).await.contains("%ASSETS%"));
}

#[tokio::test]
async fn assets_are_immutable_and_gzipped_when_asked() {
    let app = app(RouterOptions::default()).await;
    let folder = asset_folder(&app).await;
    let uri = format!("/console/{folder}/js/main.js");
    let plain = send(&app, Method::GET, &uri, false).await;
    assert_eq!(plain.status(), StatusCode::OK);
    assert!(header_of(&plain, header::CONTENT_TYPE).starts_with("text/javascript"));
    assert!(header_of(&plain, header::CACHE_CONTROL).contains("immutable"));
    assert_eq!(header_of(&plain, header::CONTENT_ENCODING), "");
    let plain_len = text(plain).await.len();
    let packed = send(&app, Method::GET, &uri, true).await;
    assert_eq!(header_of(&packed, header::CONTENT_ENCODING), "gzip");
    assert_eq!(header_of(&packed, header::VARY), "accept-encoding");
    let packed_len = packed.into_body().collect().await.unwrap().to_bytes().len();
    assert!(packed_len < plain_len, "{packed_len} >= {plain_len}");
    for refused in ["gzip;q=0", "br, gzip; q=0.0"] {
        let response = send_accepting(&app, Method::GET, &uri, Some(refused)).await;
        assert_eq!(
            header_of(&response, header::CONTENT_ENCODING),
            "",
            "{refused}"
        );
    }
}

#[tokio::test]
async fn head_answers_without_a_body_and_other_methods_are_refused() {
    let app = app(RouterOptions::default()).await;
    let head = send(&app, Method::HEAD, "/console/", false).await;
    assert_eq!(head.status(), StatusCode::OK);
    assert!(text(head).await.is_empty());
    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let response = send(&app, method.clone(), "/console/", false).await;
        assert_eq!(
            response.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method}"
        );
    }
}

#[tokio::test]
async fn an_unknown_path_under_the_mount_is_a_miss_not_the_index() {
    let app = app(RouterOptions::default()).await;
    let folder = asset_folder(&app).await;
    for uri in [
        "/console/threads".to_owned(),
        "/console/index.html".to_owned(),
        format!("/console/{folder}/nope.js"),
        format!("/console/{folder}/index.html"),
        "/console/000000000000/js/main.js".to_owned(),
    ] {
        let response = send(&app, Method::GET, &uri, false).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{uri}");
        assert!(!text(response).await.contains("<html"), "{uri}");
    }
}

#[tokio::test]
async fn assets_need_no_credentials_while_the_api_does() {
    let app = app(RouterOptions {
        auth: Auth {
            authenticator: Some(Arc::new(Nobody)),
            authorizer: None,
        },
        ..RouterOptions::default()
    })
    .await;
    let folder = asset_folder(&app).await;
    for uri in [
        "/console/".to_owned(),
        format!("/console/{folder}/js/main.js"),
    ] {
        let response = send(&app, Method::GET, &uri, false).await;
        assert_eq!(response.status(), StatusCode::OK, "{uri}");
    }
    let api = send(
        &app,
        Method::GET,
        "/threads/00000000-0000-0000-0000-000000000000",
        false,
    )
    .await;
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);
    // A miss under the mount is the API's miss: it asks for credentials like any path.
    let miss = send(&app, Method::GET, "/console/nope", false).await;
    assert_eq!(miss.status(), StatusCode::UNAUTHORIZED);
}
