//! `Idempotency-Key`: a retried POST with the same key replays the recorded response
//! instead of acting again.
//!
//! The first request with a key claims it in the store (so a concurrent duplicate gets
//! 409 instead of acting too), runs, and records its status, headers and body. A
//! response that streams (SSE, or a wait body) is recorded by its head alone: it
//! carries a `Location` to re-join the same run, and a replay answers with that join
//! (a stream replays from the first frame). An event stream of no run (a thread's
//! protocol v2 events) acts on nothing and is passed through unrecorded. The same key
//! with a different request is refused with 422.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use service_engine::auth::Authorizer;
use service_engine::{Engine, EngineError};
use service_store::{Begin, StoredResponse};
use sha2::{Digest, Sha256};

use crate::auth::Authenticated;
use crate::error::ApiError;
use crate::extract::{BodyLimit, read_body};
use crate::streams::StreamSlots;

/// Header marking a recorded response that is replayed by re-joining its run.
const REJOIN: &str = "x-service-idempotent-rejoin";

pub(crate) async fn idempotency(
    State(engine): State<Engine>,
    request: Request,
    next: Next,
) -> Response {
    let Some(key) = request
        .headers()
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
    else {
        return next.run(request).await;
    };
    if request.method() != Method::POST || key.is_empty() || key.len() > 255 {
        return next.run(request).await;
    }
    // A key is the caller's own: another principal's same key neither replays nor
    // conflicts with it. The identity's length keeps `a:b` + `c` apart from `a` + `b:c`.
    let key = match request.extensions().get::<Authenticated>() {
        Some(caller) => format!("{}:{}:{key}", caller.0.identity.len(), caller.0.identity),
        None => key,
    };
    // Buffered to fingerprint it, under the same limit as any body.
    let limit = BodyLimit::of(request.extensions());
    let (parts, body) = request.into_parts();
    let bytes = match read_body(&parts.headers, body, limit).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let fingerprint = fingerprint(&parts.method, &parts.uri, &bytes);
    let claim = engine.begin_idempotent(&key, &fingerprint).await;
    match claim {
        Err(error) => ApiError(error).into_response(),
        Ok(Begin::FingerprintMismatch) => ApiError(EngineError::unprocessable(
            "This Idempotency-Key was already used with a different request; use a new key for a new request",
        ))
        .into_response(),
        Ok(Begin::InProgress) => ApiError(EngineError::conflict(
            "A request with this Idempotency-Key is still in progress; retry once it has finished",
        ))
        .into_response(),
        Ok(Begin::Completed(recorded)) => {
            let prefix = mount_prefix(&parts);
            replay(recorded, &prefix, parts, next).await
        }
        Ok(Begin::Acquired) => {
            let request = Request::from_parts(parts, Body::from(bytes));
            let response = next.run(request).await;
            record(&engine, &key, response).await
        }
    }
}

fn fingerprint(method: &Method, uri: &Uri, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(method.as_str().as_bytes());
    hasher.update(b" ");
    hasher.update(uri.path().as_bytes());
    hasher.update(b"?");
    hasher.update(uri.query().unwrap_or_default().as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn is_streamed(headers: &HeaderMap) -> bool {
    headers.contains_key(header::LOCATION)
}

/// An event stream of no run (a thread's protocol events): it acts on nothing and
/// never ends, so it is neither recorded nor buffered.
fn is_read_stream(headers: &HeaderMap) -> bool {
    !is_streamed(headers)
        && headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"))
}

async fn record(engine: &Engine, key: &str, response: Response) -> Response {
    if response.status().is_server_error() {
        // A failure that did not act may be retried for real.
        if let Err(error) = engine.abandon_idempotent(key).await {
            tracing::warn!(%error, "releasing an idempotency key failed");
        }
        return response;
    }
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| *name != header::CONTENT_LENGTH && *name != header::TRANSFER_ENCODING)
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    if is_read_stream(response.headers()) {
        // Nothing to replay: a retry reads the thread's events again.
        if let Err(error) = engine.abandon_idempotent(key).await {
            tracing::warn!(%error, "releasing an idempotency key failed");
        }
        return response;
    }
    let status = response.status().as_u16();
    if is_streamed(response.headers()) {
        let mut recorded_headers = headers;
        recorded_headers.push((REJOIN.to_owned(), "1".to_owned()));
        let recorded = StoredResponse {
            status,
            headers: recorded_headers,
            body: Vec::new(),
        };
        if let Err(error) = engine.complete_idempotent(key, recorded).await {
            tracing::warn!(%error, "recording an idempotent response failed");
        }
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let _ = engine.abandon_idempotent(key).await;
            return ApiError(EngineError::internal(error)).into_response();
        }
    };
    let recorded = StoredResponse {
        status,
        headers,
        body: bytes.to_vec(),
    };
    if let Err(error) = engine.complete_idempotent(key, recorded).await {
        tracing::warn!(%error, "recording an idempotent response failed");
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The path the router is mounted under; recorded `Location`s start with it, while
/// requests dispatched inside the router must not.
fn mount_prefix(parts: &axum::http::request::Parts) -> String {
    parts
        .extensions
        .get::<axum::extract::OriginalUri>()
        .and_then(|original| {
            original
                .path()
                .strip_suffix(parts.uri.path())
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

async fn replay(
    recorded: StoredResponse,
    prefix: &str,
    retried: axum::http::request::Parts,
    next: Next,
) -> Response {
    let rejoin = recorded.headers.iter().any(|(name, _)| name == REJOIN);
    let location = recorded
        .headers
        .iter()
        .find(|(name, _)| name == "location")
        .map(|(_, value)| value.clone());
    if rejoin && let Some(location) = location {
        // Re-join the run the first request created, from its first frame.
        let inner = location.strip_prefix(prefix).unwrap_or(&location);
        let mut request = Request::get(inner).body(Body::empty()).unwrap_or_default();
        // The join is the retried request's own: its caller and authorizer (set by
        // the layers outside this one) go with it, so the join's guard scopes it.
        let extensions = request.extensions_mut();
        if let Some(caller) = retried.extensions.get::<Authenticated>() {
            extensions.insert(caller.clone());
        }
        if let Some(authorizer) = retried.extensions.get::<Arc<dyn Authorizer>>() {
            extensions.insert(Arc::clone(authorizer));
        }
        if let Some(limit) = retried.extensions.get::<BodyLimit>() {
            extensions.insert(*limit);
        }
        // A re-joined stream counts against its client's open streams too.
        if let Some(slots) = retried.extensions.get::<StreamSlots>() {
            extensions.insert(slots.clone());
        }
        if let Some(peer) = retried
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        {
            extensions.insert(*peer);
        }
        for name in [header::AUTHORIZATION, HeaderName::from_static("x-api-key")] {
            if let Some(value) = retried.headers.get(&name) {
                request.headers_mut().insert(name, value.clone());
            }
        }
        request
            .headers_mut()
            .insert("last-event-id", HeaderValue::from_static("-1"));
        let mut response = next.run(request).await;
        // The replay names the run of the first request, as its response did.
        for (name, value) in &recorded.headers {
            if (name == "location" || name == "content-location")
                && let Ok(value) = HeaderValue::try_from(value.as_str())
            {
                response.headers_mut().insert(
                    HeaderName::from_static(if name == "location" {
                        "location"
                    } else {
                        "content-location"
                    }),
                    value,
                );
            }
        }
        return response;
    }
    let mut response = Response::new(Body::from(recorded.body));
    *response.status_mut() = StatusCode::from_u16(recorded.status).unwrap_or(StatusCode::OK);
    for (name, value) in recorded.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            response.headers_mut().append(name, value);
        }
    }
    response
        .headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}
