//! JSON answers.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Room most answers fit in (a thread, a run, a small list), so serialising does not
/// regrow the buffer: `axum::Json` starts at 128 bytes and regrew three or four times
/// per answer (~3 % of a thread creation's CPU).
const TYPICAL_ANSWER_BYTES: usize = 1024;

/// A JSON answer with status 200 (or the status it is paired with).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match to_vec(&self.0) {
            Ok(body) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response(),
            Err(error) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Could not write the answer as JSON: {error}"),
            )
                .into_response(),
        }
    }
}

/// `value` as JSON text, in a buffer sized for a typical answer.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut body = Vec::with_capacity(TYPICAL_ANSWER_BYTES);
    serde_json::to_writer(&mut body, value)?;
    Ok(body)
}
