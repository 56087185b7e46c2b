//! Sending one attempt: the [`Dispatcher`] seam (an embedder may bring its own) and the
//! HTTP one, which follows no redirects, gives up after the per-POST timeout, and
//! connects only to addresses the settings' address rules permit.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::HeaderMap;
use url::Url;

use crate::WebhookSettings;
use crate::guard::{AddressClass, GuardedResolver, Refused};

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

/// Why an attempt failed. Its reason is what the delivery row records and clients
/// read, so it names the class of failure only; socket-level detail, which would
/// let a client map ports behind the server, goes to the log alone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct AttemptError {
    reason: String,
    detail: Option<String>,
    refused: bool,
}

impl AttemptError {
    /// A failure worth a retry, recorded as `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            detail: None,
            refused: false,
        }
    }

    /// The target refused by policy (`why`, e.g. `private address`): no retry can
    /// succeed, so the delivery is dead at once.
    pub fn refused(why: impl std::fmt::Display) -> Self {
        Self {
            reason: format!("refused by policy: {why}"),
            detail: None,
            refused: true,
        }
    }

    /// With `detail` for the server log, never for the delivery row.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// What the delivery row records.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// What only the log shows.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Whether policy refused the target.
    pub fn is_refusal(&self) -> bool {
        self.refused
    }
}

/// Sends attempts.
#[async_trait]
pub trait Dispatcher: Send + Sync + std::fmt::Debug {
    /// POSTs the attempt; `Ok` only for a 2xx answer.
    async fn post(&self, attempt: Attempt) -> Result<(), AttemptError>;

    /// True for a destination this dispatcher delivers itself rather than over HTTP,
    /// which the URL policy then does not judge: an operator-configured one the
    /// dispatcher authenticates (a channel reply, service-channels), never a URL a
    /// client could name on its own.
    fn delivers_itself(&self, _url: &Url) -> bool {
        false
    }
}

/// The HTTP dispatcher (reqwest on rustls).
#[derive(Clone, Debug)]
pub struct HttpDispatcher {
    client: reqwest::Client,
    timeout: Duration,
}

impl HttpDispatcher {
    /// A dispatcher with the settings' per-POST timeout and address rules: names are
    /// resolved, checked and connected to by the checked address.
    pub fn new(settings: &WebhookSettings) -> Result<Self, AttemptError> {
        let guard = settings.address_guard();
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.timeout)
            .user_agent(concat!("service-webhooks/", env!("CARGO_PKG_VERSION")));
        // A proxy would resolve and connect to the target itself, past the check.
        if guard.blocks_private() {
            builder = builder.no_proxy();
        }
        let client = builder
            .dns_resolver(GuardedResolver::new(guard))
            .build()
            .map_err(|error| AttemptError::new(format!("cannot build the HTTP client: {error}")))?;
        Ok(Self {
            client,
            timeout: settings.timeout,
        })
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
        let error = match sent {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => {
                return Err(AttemptError::new(format!(
                    "the receiver answered HTTP {}",
                    response.status().as_u16()
                )));
            }
            // Without the URL: its path and query may hold secrets.
            Err(error) => error.without_url(),
        };
        let detail = error_chain(&error);
        let failure = if let Some(class) = refusal_in(&error) {
            AttemptError::refused(class)
        } else if error.is_timeout() {
            AttemptError::new(format!(
                "timed out: no answer within {} ms",
                self.timeout.as_millis()
            ))
        } else {
            // Refused, reset, unresolvable, TLS: one class, or the row tells which
            // ports are open on hosts the server can reach.
            AttemptError::new("connection failed")
        };
        Err(failure.with_detail(detail))
    }
}

/// The class of address the guard refused, when that is what failed the request.
fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<AddressClass> {
    let mut source = Some(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return Some(refused.class);
        }
        source = cause.source();
    }
    None
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
