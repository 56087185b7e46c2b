//! A lean keep-alive HTTP/1.1 client: hyper's pooled legacy client over plain TCP.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::stats::SseCounter;

/// One server under test: a base URL and a connection pool.
#[derive(Clone, Debug)]
pub(crate) struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    /// Sent as `x-api-key` on every request, for a server with API-key auth.
    api_key: Option<HeaderValue>,
}

/// What a streamed response yielded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Streamed {
    pub(crate) frames: u64,
    /// From sending the request to the first complete frame.
    pub(crate) first_frame: Option<Duration>,
}

impl Http {
    /// A client for `base` (e.g. `http://127.0.0.1:8123`, no trailing slash needed).
    pub(crate) fn new(base: &str) -> Self {
        Self::with_key(base, None)
    }

    /// A client for `base` that authenticates with `api_key`.
    pub(crate) fn with_key(base: &str, api_key: Option<HeaderValue>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_keepalive(Some(Duration::from_secs(60)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(usize::MAX)
            .build(connector);
        Self {
            client,
            base: base.trim_end_matches('/').to_owned(),
            api_key,
        }
    }

    /// The base URL.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, String> {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if !body.is_empty() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key.clone());
        }
        builder
            .body(Full::new(body))
            .map_err(|error| format!("bad request {path}: {error}"))
    }

    /// Sends a request and reads the whole body; fails on a non-2xx status.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<Bytes, String> {
        let request = self.request(method.clone(), path, body)?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|error| format!("{method} {path}: {}", chain(&error)))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|error| format!("{method} {path}: reading the body: {}", chain(&error)))?
            .to_bytes();
        check(status, &method, path, &bytes)?;
        Ok(bytes)
    }

    /// POSTs JSON and reads the whole body.
    pub(crate) async fn post(&self, path: &str, body: Bytes) -> Result<Bytes, String> {
        self.call(Method::POST, path, body).await
    }

    /// POSTs JSON and parses the JSON answer.
    pub(crate) async fn post_json(&self, path: &str, body: &Value) -> Result<Value, String> {
        let bytes = self.post(path, Bytes::from(body.to_string())).await?;
        parse(path, &bytes)
    }

    /// GETs and parses the JSON answer.
    pub(crate) async fn get_json(&self, path: &str) -> Result<Value, String> {
        let bytes = self.call(Method::GET, path, Bytes::new()).await?;
        parse(path, &bytes)
    }

    /// POSTs and returns the answer's body unread once its status is a success.
    pub(crate) async fn open(&self, path: &str, body: Bytes) -> Result<Incoming, String> {
        let request = self.request(Method::POST, path, body)?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|error| format!("POST {path}: {}", chain(&error)))?;
        let status = response.status();
        let body = response.into_body();
        if !status.is_success() {
            let bytes = body
                .collect()
                .await
                .map(|collected| collected.to_bytes())
                .unwrap_or_default();
            check(status, &Method::POST, path, &bytes)?;
            return Err(format!("POST {path}: HTTP {status}"));
        }
        Ok(body)
    }

    /// POSTs and reads an SSE answer to its end, counting frames as they arrive. With
    /// `keep`, the raw text is appended there (for validation).
    pub(crate) async fn stream(
        &self,
        path: &str,
        body: Bytes,
        mut keep: Option<&mut Vec<u8>>,
    ) -> Result<Streamed, String> {
        let started = Instant::now();
        let mut body = self.open(path, body).await?;
        let mut counter = SseCounter::default();
        let mut first_frame = None;
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|error| format!("POST {path}: reading the stream: {}", chain(&error)))?;
            if let Ok(data) = frame.into_data() {
                let frames = counter.feed(&data);
                if first_frame.is_none() && frames > 0 {
                    first_frame = Some(started.elapsed());
                }
                if let Some(keep) = keep.as_deref_mut() {
                    keep.extend_from_slice(&data);
                }
            }
        }
        Ok(Streamed {
            frames: counter.frames(),
            first_frame,
        })
    }
}

/// An error with its sources, `a: b: c`.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn check(status: StatusCode, method: &Method, path: &str, body: &[u8]) -> Result<(), String> {
    if status.is_success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    Err(format!("{method} {path}: HTTP {status}: {text}"))
}

fn parse(path: &str, bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(bytes).map_err(|error| {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]);
        format!("{path}: the answer is not JSON ({error}): {text}")
    })
}
