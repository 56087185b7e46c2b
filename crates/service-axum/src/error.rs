//! The one mapping from engine errors to HTTP responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use service_engine::{EngineError, ErrorKind};

use crate::json::Json;

/// An engine error on its way to the client.
#[derive(Debug)]
pub struct ApiError(pub EngineError);

impl From<EngineError> for ApiError {
    fn from(error: EngineError) -> Self {
        Self(error)
    }
}

/// Result alias of handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// The status code of an error kind.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Unprocessable | ErrorKind::CapabilityMissing => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::GraphLoadFailed | ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = self.0;
        let status = status_of(error.kind);
        if status.is_server_error() {
            tracing::error!(status = status.as_u16(), error = %error.chain(), "request failed");
        }
        let body = ErrorBody {
            status: status.as_u16(),
            detail: error.message.clone(),
            message: std::mem::take(&mut error.message),
            code: error.code,
            details: error.details.take(),
        };
        (status, Json(body)).into_response()
    }
}

/// Every error answer's body.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    /// The HTTP status, repeated.
    status: u16,
    /// What went wrong (SPEC's name for it).
    message: String,
    /// The same text, for tools written against the reference server, which the
    /// Python SDK also reads.
    detail: String,
    /// A machine-readable code, when the error has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
    /// Structured details, when the error has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<serde_json::Value>,
}

/// The JSON of an error answer without a code or details (a request-head cap, answered
/// before any handler runs).
pub fn error_body(status: StatusCode, message: &str) -> serde_json::Value {
    serde_json::json!(ErrorBody {
        status: status.as_u16(),
        message: message.to_owned(),
        detail: message.to_owned(),
        code: None,
        details: None,
    })
}

/// An error answer with `status` that no [`ErrorKind`] names (a request-head cap).
pub(crate) fn refused(status: StatusCode, message: String) -> Response {
    (status, Json(error_body(status, &message))).into_response()
}

/// A 413 for a body over the configured limit.
pub(crate) fn too_large(limit: usize) -> ApiError {
    ApiError(EngineError::new(
        ErrorKind::PayloadTooLarge,
        format!("The request body is larger than the limit of {limit} bytes"),
    ))
}

/// A 400 for a request refused before any route sees it (a CORS preflight).
pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError(EngineError::bad_request(message))
}

/// A 422 for a body or query that does not fit the schema.
pub(crate) fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError(EngineError::unprocessable(message))
}
