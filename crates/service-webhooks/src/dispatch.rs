//! Sending one attempt: the [`Dispatcher`] seam (an embedder may bring its own) and the
//! HTTP one, which follows no redirects and gives up after the per-POST timeout.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::HeaderMap;
use url::Url;

/// One attempt as it goes out: a custom dispatcher must send headers and body
/// unchanged (the signature covers the body's exact bytes).
#[derive(Clone, Debug)]
pub struct Attempt {
    /// Target URL, checked against the URL policy.
    pub url: Url,
    /// `content-type` and, for recorded deliveries, the delivery id, attempt and
    /// signature headers.
    pub headers: HeaderMap,
    /// The body's exact bytes.
    pub body: Bytes,
}

/// Why an attempt failed; any failure asks for a retry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AttemptError(pub String);

/// Sends attempts.
#[async_trait]
pub trait Dispatcher: Send + Sync + std::fmt::Debug {
    /// POSTs the attempt; `Ok` only for a 2xx answer.
    async fn post(&self, attempt: Attempt) -> Result<(), AttemptError>;
}

/// The HTTP dispatcher (reqwest on rustls).
#[derive(Clone, Debug)]
pub struct HttpDispatcher {
    client: reqwest::Client,
    timeout: Duration,
}

impl HttpDispatcher {
    /// A dispatcher whose POSTs abort after `timeout`.
    pub fn new(timeout: Duration) -> Result<Self, AttemptError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .user_agent(concat!("service-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| AttemptError(format!("cannot build the HTTP client: {error}")))?;
        Ok(Self { client, timeout })
    }
}

#[async_trait]
impl Dispatcher for HttpDispatcher {
    async fn post(&self, attempt: Attempt) -> Result<(), AttemptError> {
        let sent = self
            .client
            .post(attempt.url)
            .headers(attempt.headers)
            .body(attempt.body)
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(AttemptError(format!(
                "the receiver answered HTTP {}",
                response.status().as_u16()
            ))),
            Err(error) if error.is_timeout() => Err(AttemptError(format!(
                "no answer within {} ms",
                self.timeout.as_millis()
            ))),
            // Without the URL: its path and query may hold secrets.
            Err(error) => Err(AttemptError(format!(
                "the request failed: {}",
                error_chain(&error.without_url())
            ))),
        }
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
