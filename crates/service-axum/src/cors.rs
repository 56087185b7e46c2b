//! CORS. Without a policy the answers are permissive, as the reference server's are
//! without `http.cors`: any origin, method and header, the pagination headers and
//! `Content-Location` exposed (not `Location`, which the reference keeps from scripts:
//! the JS SDK would then follow every stream with a read of its run), and a preflight
//! from a public page to this server on a private address (Private Network Access)
//! allowed, so a hosted front end can reach a local server. With one ([`CorsPolicy`], langgraph.json's `http.cors`),
//! requests are answered as the reference server's CORS middleware answers them.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

const EXPOSED: &str = "x-pagination-total, x-pagination-next, content-location";
/// A preflight's question, and the answer, of Private Network Access.
const REQUEST_PRIVATE_NETWORK: &str = "access-control-request-private-network";
const ALLOW_PRIVATE_NETWORK: &str = "access-control-allow-private-network";
const ANY: &str = "*";
const ALL_METHODS: &str = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";
/// Request headers a browser may always send (the CORS safelist).
const SAFELISTED: [&str; 4] = [
    "accept",
    "accept-language",
    "content-language",
    "content-type",
];

/// How cross-origin requests are answered (langgraph.json's `http.cors`). `*` in a
/// list allows anything; the defaults are those of the block's keys when unset.
#[derive(Clone, Debug)]
pub struct CorsPolicy {
    /// Origins allowed (`scheme://host[:port]`), or `*`.
    pub allow_origins: Vec<String>,
    /// Methods a cross-origin request may use, or `*` (default `GET`).
    pub allow_methods: Vec<String>,
    /// Request headers it may send besides the safelisted ones, or `*`.
    pub allow_headers: Vec<String>,
    /// Whether browsers may send credentials; an origin is then echoed, never `*`.
    pub allow_credentials: bool,
    /// Response headers scripts may read.
    pub expose_headers: Vec<String>,
    /// Seconds a preflight answer may be cached (default 600).
    pub max_age: u64,
    /// Also allows the origins this pattern wholly matches.
    pub allow_origin_regex: Option<OriginPattern>,
}

/// A regular expression an allowed origin must match as a whole.
#[derive(Clone, Debug)]
pub struct OriginPattern(regex_lite::Regex);

impl OriginPattern {
    /// The pattern; one that does not compile is an error saying why.
    pub fn new(pattern: &str) -> Result<Self, String> {
        // Compiled alone first, so a stray `)` cannot close the anchoring group.
        regex_lite::Regex::new(pattern)
            .and_then(|_| regex_lite::Regex::new(&format!("^(?:{pattern})$")))
            .map(Self)
            .map_err(|error| error.to_string())
    }
}

impl Default for CorsPolicy {
    fn default() -> Self {
        Self {
            allow_origins: Vec::new(),
            allow_methods: vec!["GET".into()],
            allow_headers: Vec::new(),
            allow_credentials: false,
            expose_headers: Vec::new(),
            max_age: 600,
            allow_origin_regex: None,
        }
    }
}

impl CorsPolicy {
    fn any_origin(&self) -> bool {
        self.allow_origins.iter().any(|origin| origin == ANY)
    }

    fn allows_origin(&self, origin: &str) -> bool {
        self.any_origin()
            || self
                .allow_origin_regex
                .as_ref()
                .is_some_and(|pattern| pattern.0.is_match(origin))
            || self.allow_origins.iter().any(|allowed| allowed == origin)
    }

    fn allows_method(&self, method: &str) -> bool {
        self.allow_methods
            .iter()
            .any(|allowed| allowed == ANY || allowed.eq_ignore_ascii_case(method))
    }

    fn any_header(&self) -> bool {
        self.allow_headers.iter().any(|allowed| allowed == ANY)
    }

    fn allows_header(&self, name: &str) -> bool {
        let name = name.trim().to_ascii_lowercase();
        self.any_header()
            || SAFELISTED.contains(&name.as_str())
            || self
                .allow_headers
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(&name))
    }

    /// The answer to a preflight: 200 with what is allowed, or 400 naming what is not.
    fn preflight(&self, request: &Request, origin: &HeaderValue) -> Response {
        let origin_text = origin.to_str().unwrap_or_default();
        let method = request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_METHOD)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        let requested_headers = request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned();
        let mut refused = Vec::new();
        if !self.allows_origin(origin_text) {
            refused.push("origin");
        }
        if !self.allows_method(method) {
            refused.push("method");
        }
        let requested = requested_headers
            .as_ref()
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if requested
            .split(',')
            .filter(|name| !name.trim().is_empty())
            .any(|name| !self.allows_header(name))
        {
            refused.push("headers");
        }
        let mut response = if refused.is_empty() {
            (StatusCode::OK, "OK").into_response()
        } else {
            let message = format!("Disallowed CORS {}", refused.join(", "));
            crate::error::bad_request(message).into_response()
        };
        let headers = response.headers_mut();
        if self.any_origin() && !self.allow_credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static(ANY),
            );
        } else {
            headers.insert(header::VARY, HeaderValue::from_static("Origin"));
            if refused.is_empty() {
                headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            }
        }
        let methods = if self.allow_methods.iter().any(|method| method == ANY) {
            ALL_METHODS.to_owned()
        } else {
            self.allow_methods.join(", ")
        };
        insert_text(headers, header::ACCESS_CONTROL_ALLOW_METHODS, &methods);
        insert_text(
            headers,
            header::ACCESS_CONTROL_MAX_AGE,
            &self.max_age.to_string(),
        );
        if self.any_header() {
            if let Some(requested) = requested_headers {
                headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested);
            }
        } else if !self.allow_headers.is_empty() {
            let mut names: Vec<String> = SAFELISTED.iter().map(|name| (*name).to_owned()).collect();
            names.extend(
                self.allow_headers
                    .iter()
                    .map(|name| name.to_ascii_lowercase()),
            );
            names.sort();
            names.dedup();
            insert_text(
                headers,
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                &names.join(", "),
            );
        }
        if self.allow_credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        response
    }

    /// The headers of an answer to a cross-origin request from `origin`.
    fn decorate(&self, headers: &mut HeaderMap, origin: &HeaderValue, with_cookie: bool) {
        let any = self.any_origin();
        if any && !self.allow_credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static(ANY),
            );
        }
        if self.allow_credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        if !self.expose_headers.is_empty() {
            insert_text(
                headers,
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                &self.expose_headers.join(", "),
            );
        }
        // A browser sends cookies only to an origin named back, never to `*`.
        let echo = if any {
            with_cookie
        } else {
            self.allows_origin(origin.to_str().unwrap_or_default())
        };
        if echo {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            headers.append(header::VARY, HeaderValue::from_static("Origin"));
        }
    }
}

fn insert_text(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

/// The CORS layer: `policy` when one is configured, the permissive answers otherwise.
pub(crate) async fn cors(
    State(policy): State<Option<Arc<CorsPolicy>>>,
    request: Request,
    next: Next,
) -> Response {
    match policy {
        Some(policy) => configured(&policy, request, next).await,
        None => permissive(request, next).await,
    }
}

async fn configured(policy: &CorsPolicy, request: Request, next: Next) -> Response {
    // Not a browser's cross-origin request: nothing to answer.
    let Some(origin) = request.headers().get(header::ORIGIN).cloned() else {
        return next.run(request).await;
    };
    if request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return policy.preflight(&request, &origin);
    }
    let with_cookie = request.headers().contains_key(header::COOKIE);
    let mut response = next.run(request).await;
    policy.decorate(response.headers_mut(), &origin, with_cookie);
    response
}

async fn permissive(request: Request, next: Next) -> Response {
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        let requested = request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned()
            .unwrap_or(HeaderValue::from_static("*"));
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested);
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        if request.headers().contains_key(REQUEST_PRIVATE_NETWORK) {
            headers.insert(ALLOW_PRIVATE_NETWORK, HeaderValue::from_static("true"));
        }
        response
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED),
    );
    response
}
