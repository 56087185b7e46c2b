//! The request-head caps checked before any route (or the authenticator) sees a
//! request: the target's length (414) and the headers' count and size (431), each
//! answered with the usual JSON error naming its knob. The HTTP server in front sets
//! hard caps above these (see docs/operations.md, "Limits"), so a head past them is
//! never buffered whole.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use crate::ClientLimits;
use crate::error::refused;

/// Answers 414 or 431 for a head over `limits`, else runs the request.
pub(crate) async fn check_head(
    State(limits): State<ClientLimits>,
    request: Request,
    next: Next,
) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    if target > limits.max_uri_bytes {
        return refused(
            StatusCode::URI_TOO_LONG,
            format!(
                "The request target is {target} bytes, more than the limit of {} \
                 (SERVICE_MAX_URI_BYTES)",
                limits.max_uri_bytes
            ),
        );
    }
    let headers = request.headers();
    if headers.len() > limits.max_headers {
        return refused(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "The request has {} header fields, more than the limit of {} \
                 (SERVICE_MAX_HEADERS)",
                headers.len(),
                limits.max_headers
            ),
        );
    }
    // As on the wire: `name: value\r\n` per field.
    let size: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if size > limits.max_header_bytes {
        return refused(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "The request's header fields are {size} bytes, more than the limit of {} \
                 (SERVICE_MAX_HEADER_BYTES)",
                limits.max_header_bytes
            ),
        );
    }
    next.run(request).await
}
