//! Authentication (credentials to a [`Principal`]) for every route but the public
//! ones, and the guard each route carries that asks the [`Authorizer`] before the
//! route does any work. The guard leaves the request's [`Scope`] for the handler,
//! which applies it: ids outside it are not found, searches are narrowed in the
//! store's query, what is made is stamped.

use std::fmt;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use service_engine::auth::{
    Action, AuthRequest, Authorizer, Caller, Principal, Resource, Scope, decide,
};
use service_engine::{EngineError, ErrorKind};

use crate::error::ApiError;
use crate::extract::{BodyLimit, QueryParams, read_body};

/// The identity of requests to a router without an authenticator.
const ANONYMOUS: &str = "anonymous";

/// The one principal of every request to a router without an authenticator.
static ANONYMOUS_PRINCIPAL: LazyLock<Arc<Principal>> =
    LazyLock::new(|| Arc::new(Principal::new(ANONYMOUS)));

/// Turns a request's credentials into a principal.
#[async_trait]
pub trait Authenticator: Send + Sync {
    /// The principal `request` authenticates as, or why it does not. Shared, so a
    /// principal known in advance (an API key's) is handed out without a copy.
    async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, Unauthenticated>;
}

/// A request without valid credentials: a 401.
#[derive(Clone, Debug, PartialEq)]
pub struct Unauthenticated {
    /// Client-facing reason ("Missing authentication", "Token expired", ...).
    pub message: String,
    /// The `WWW-Authenticate` challenge (`Bearer`, say), when a scheme has one.
    pub challenge: Option<String>,
}

impl Unauthenticated {
    /// A 401 with `message` and no challenge.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            challenge: None,
        }
    }
}

impl IntoResponse for Unauthenticated {
    fn into_response(self) -> Response {
        let mut response =
            ApiError(EngineError::new(ErrorKind::Unauthenticated, self.message)).into_response();
        if let Some(challenge) = self
            .challenge
            .and_then(|text| HeaderValue::from_str(&text).ok())
        {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        response
    }
}

/// Who may call the router and what they may do. Without an authenticator every
/// request is anonymous; without an authorizer every authenticated request may do
/// anything.
#[derive(Clone, Default)]
pub struct Auth {
    /// Checks credentials on every route but the public ones.
    pub authenticator: Option<Arc<dyn Authenticator>>,
    /// Decides per resource and action.
    pub authorizer: Option<Arc<dyn Authorizer>>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("authenticator", &self.authenticator.is_some())
            .field("authorizer", &self.authorizer.is_some())
            .finish()
    }
}

/// The principal of a request that passed authentication.
#[derive(Clone, Debug)]
pub(crate) struct Authenticated(pub(crate) Arc<Principal>);

/// What the authentication layer needs: the authenticator and the public paths.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) authenticator: Arc<dyn Authenticator>,
    pub(crate) public: Arc<[&'static str]>,
}

/// Authenticates every request to a path that is not public; a failure is a 401
/// before any route runs (so an unknown path is a 401 too, and ids do not leak).
pub(crate) async fn authenticate(
    State(gate): State<Gate>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if gate
        .public
        .iter()
        .any(|public| matches_template(public, path))
    {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    match gate.authenticator.authenticate(&parts).await {
        Ok(principal) => {
            parts.extensions.insert(Authenticated(principal));
            next.run(Request::from_parts(parts, body)).await
        }
        Err(refusal) => refusal.into_response(),
    }
}

/// True when `path` is an instance of the route template (`{name}` is one segment).
fn matches_template(template: &str, path: &str) -> bool {
    let mut segments = path.split('/');
    for part in template.split('/') {
        match segments.next() {
            Some(segment) if part.starts_with('{') && part.ends_with('}') => {
                if segment.is_empty() {
                    return false;
                }
            }
            Some(segment) if segment == part => {}
            _ => return false,
        }
    }
    segments.next().is_none()
}

/// What a route asks of the authorizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Nothing: no credentials needed (`/ok`, `/info`).
    Public,
    /// This action on this resource.
    Guarded(Resource, Action),
}

/// The per-route guard's state.
#[derive(Clone)]
pub(crate) struct Guard {
    pub(crate) resource: Resource,
    pub(crate) action: Action,
}

/// Asks the authorizer (if any) whether the caller may do this route's action, and
/// leaves the answer's [`Scope`] for the handler. A denial is a 403 before the route
/// reads or changes anything.
pub(crate) async fn guard(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let Some(authorizer) = request.extensions().get::<Arc<dyn Authorizer>>().cloned() else {
        let mut request = request;
        request.extensions_mut().insert(Scope::All);
        return next.run(request).await;
    };
    let (mut parts, body) = request.into_parts();
    let (body, value) = if authorizer.reads_values() {
        let bytes = match read_body(&parts.headers, body, BodyLimit::of(&parts.extensions)).await {
            Ok(bytes) => bytes,
            Err(error) => return error.into_response(),
        };
        let value = request_value(&mut parts, &bytes).await;
        (Body::from(bytes), value)
    } else {
        (body, Value::Null)
    };
    let principal = principal_of(&parts);
    let question = AuthRequest {
        resource: guard.resource,
        action: guard.action,
        value: &value,
    };
    let decision = authorizer.authorize(&principal, question).await;
    match decide(&principal, question, decision) {
        Ok(scope) => {
            parts.extensions.insert(scope);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(error) => ApiError(error).into_response(),
    }
}

/// The request as the authorizer sees it: path parameters, query parameters (a
/// repeated one as a list) and the JSON body (null when empty or not JSON).
async fn request_value(parts: &mut Parts, bytes: &[u8]) -> Value {
    let mut path = Map::new();
    if let Ok(params) = RawPathParams::from_request_parts(parts, &()).await {
        for (name, value) in &params {
            path.insert(name.to_owned(), Value::String(value.to_owned()));
        }
    }
    let mut query = Map::new();
    for (name, value) in QueryParams::parse(parts.uri.query().unwrap_or_default()).pairs() {
        match query.get_mut(name) {
            Some(Value::Array(values)) => values.push(Value::String(value.clone())),
            Some(first) => *first = Value::Array(vec![first.take(), Value::String(value.clone())]),
            None => {
                query.insert(name.clone(), Value::String(value.clone()));
            }
        }
    }
    let body = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    serde_json::json!({"path": path, "query": query, "body": body})
}

/// The caller of a route, as the engine takes it: the principal, the scope the
/// route's guard left, and the authorizer for the engine's further questions. A route
/// without a guard fails closed (500) instead of running unchecked.
#[derive(Clone, Debug)]
pub(crate) struct CallerOf(pub(crate) Caller);

impl<S: Send + Sync> FromRequestParts<S> for CallerOf {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let scope = parts.extensions.get::<Scope>().cloned().ok_or_else(|| {
            ApiError(EngineError::internal(std::io::Error::other(
                "a route without an authorization guard was called",
            )))
        })?;
        Ok(Self(Caller::new(
            principal_of(parts),
            parts.extensions.get::<Arc<dyn Authorizer>>().cloned(),
            scope,
        )))
    }
}

/// The authenticated principal (anonymous without an authenticator).
fn principal_of(parts: &Parts) -> Arc<Principal> {
    match parts.extensions.get::<Authenticated>() {
        Some(authenticated) => authenticated.0.clone(),
        None => Arc::clone(&ANONYMOUS_PRINCIPAL),
    }
}
