//! The engine's one error type. It names what went wrong; only the HTTP adapter turns
//! a kind into a status code.

use std::error::Error as StdError;

use serde_json::Value;

/// What kind of failure an [`EngineError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request is malformed or contradicts itself (400).
    BadRequest,
    /// The request carries no valid credentials (401).
    Unauthenticated,
    /// The caller may not do this (403).
    Forbidden,
    /// The resource does not exist (404).
    NotFound,
    /// The request conflicts with current state (409).
    Conflict,
    /// The request is well-formed but cannot be processed (422).
    Unprocessable,
    /// The agent lacks the optional method this call needs (422, coded).
    CapabilityMissing,
    /// The graph failed to load (500, coded).
    GraphLoadFailed,
    /// The route exists but not for this method (405).
    MethodNotAllowed,
    /// The request body is larger than the server accepts (413).
    PayloadTooLarge,
    /// A dependency is temporarily unavailable (503).
    Unavailable,
    /// The caller holds as many of something (open streams) as a cap allows (429).
    TooManyRequests,
    /// Anything else: an opaque 500 whose cause chain goes to the log.
    Internal,
}

/// What an [`EngineError`] carries.
#[derive(Debug)]
pub struct ErrorDetail {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// Client-facing text.
    pub message: String,
    /// Machine-readable code (`agent_capability_missing`, `graph_load_failed`, …).
    pub code: Option<&'static str>,
    /// Structured details (e.g. `{capability}`).
    pub details: Option<Value>,
    /// The underlying error, for the log.
    pub source: Option<Box<dyn StdError + Send + Sync>>,
}

/// An engine failure: a kind, a client-facing message, an optional machine code and
/// details, and the underlying cause (logged, never sent). Boxed so results stay small.
#[derive(Debug)]
pub struct EngineError(Box<ErrorDetail>);

impl std::ops::Deref for EngineError {
    type Target = ErrorDetail;

    fn deref(&self) -> &ErrorDetail {
        &self.0
    }
}

impl std::ops::DerefMut for EngineError {
    fn deref_mut(&mut self) -> &mut ErrorDetail {
        &mut self.0
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for EngineError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

/// Result alias of engine calls.
pub type EngineResult<T> = Result<T, EngineError>;

impl EngineError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self(Box::new(ErrorDetail {
            kind,
            message: message.into(),
            code: None,
            details: None,
            source: None,
        }))
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// 409.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    /// 422.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unprocessable, message)
    }

    /// An opaque internal failure caused by `source`.
    pub fn internal(source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        Self::new(ErrorKind::Internal, "Internal Server Error").with_source(source)
    }

    /// 422 `agent_capability_missing` naming the missing method.
    pub fn capability_missing(capability: &str) -> Self {
        let mut error = Self::new(
            ErrorKind::CapabilityMissing,
            format!("The agent does not implement {capability}, which this endpoint needs"),
        );
        error.code = Some("agent_capability_missing");
        error.details = Some(serde_json::json!({ "capability": capability }));
        error
    }

    /// 500 `graph_load_failed`; the reason reaches the client only when stacks are exposed.
    pub fn graph_load_failed(graph_id: &str, reason: &str, expose_reason: bool) -> Self {
        let message = if expose_reason {
            format!("Graph '{graph_id}' failed to load: {reason}")
        } else {
            format!("Graph '{graph_id}' failed to load")
        };
        let mut error = Self::new(ErrorKind::GraphLoadFailed, message);
        error.code = Some("graph_load_failed");
        error
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The whole cause chain in one line, for logs.
    pub fn chain(&self) -> String {
        let mut text = self.message.clone();
        let mut next = self.source();
        let mut depth = 0;
        while let Some(cause) = next {
            if depth == 16 {
                break;
            }
            text.push_str(": ");
            text.push_str(&cause.to_string());
            next = cause.source();
            depth += 1;
        }
        text
    }
}
