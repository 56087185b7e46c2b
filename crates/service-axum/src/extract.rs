//! Request decoding that accepts what both SDKs send: bodies with unknown keys, empty
//! bodies on POSTs that carry none, percent-encoded path ids, and query strings in
//! both list encodings (`k=a&k=b` and `k=["a","b"]`) and boolean spellings.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, header};
use http_body_util::LengthLimitError;
use serde::de::DeserializeOwned;
use service_store::text::{nul_path, nul_refused};
use uuid::Uuid;

use crate::error::{ApiError, too_large, unprocessable};

/// The largest request body the router reads, set by [`crate::RouterOptions`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyLimit(pub(crate) usize);

impl BodyLimit {
    /// The limit in force for `extensions` (the default outside the router).
    pub(crate) fn of(extensions: &Extensions) -> usize {
        extensions
            .get::<Self>()
            .map_or(crate::DEFAULT_MAX_BODY_BYTES, |limit| limit.0)
    }
}

/// Reads a whole body, but no more than `limit` bytes: a larger one is a 413, told
/// from its `Content-Length` before anything is read when it declares one.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large(limit));
    }
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let inner = error.into_inner();
        if inner.downcast_ref::<LengthLimitError>().is_some() {
            too_large(limit)
        } else {
            unprocessable(format!("Could not read the request body: {inner}"))
        }
    })
}

/// A JSON body; an empty body reads as `{}`. No string in it may hold NUL (see
/// [`service_store::text`]): the one place client JSON enters, so the rule is
/// checked here for every route, naming where the NUL was.
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub T);

impl<T, S> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let limit = BodyLimit::of(request.extensions());
        let (parts, body) = request.into_parts();
        let bytes = read_body(&parts.headers, body, limit).await?;
        decode_json_body(&bytes).map(JsonBody)
    }
}

/// Decodes a request body as every JSON route does: an empty (or all-whitespace) body
/// reads as `{}`, a NUL in any string is a 422 naming where, a syntax error is told
/// apart from a body of the wrong shape (which names the field at fault).
pub fn decode_json_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    refuse_nul_in_json(text)?;
    // Straight into `T` (no `Value` in between: that doubled the decoding of a run's
    // input).
    let mut decoder = serde_json::Deserializer::from_slice(text);
    let body = serde_path_to_error::deserialize(&mut decoder).map_err(|error| {
        if !error.inner().is_data() {
            return unprocessable("Invalid JSON in request body");
        }
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path == "." {
            unprocessable(format!("Invalid request body: {inner}"))
        } else {
            unprocessable(format!("Invalid request body at '{path}': {inner}"))
        }
    })?;
    decoder
        .end()
        .map_err(|_| unprocessable("Invalid JSON in request body"))?;
    Ok(body)
}

/// A 422 naming where a NUL is in JSON text. JSON can only spell NUL as the escape
/// `\u0000`, so a body without that text is passed over without parsing; one with it
/// is parsed once more to find where.
pub(crate) fn refuse_nul_in_json(text: &[u8]) -> Result<(), ApiError> {
    const ESCAPE: &[u8] = b"\\u0000";
    if !text.windows(ESCAPE.len()).any(|window| window == ESCAPE) {
        return Ok(());
    }
    // Not JSON after all: the decoder that follows says so.
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(text) else {
        return Ok(());
    };
    match nul_path(&value) {
        Some(path) if path.is_empty() => Err(unprocessable(nul_refused("body"))),
        Some(path) => Err(unprocessable(nul_refused(&path))),
        None => Ok(()),
    }
}

/// Path parameters, percent-decoded. A segment that is not UTF-8 or holds a NUL is a
/// 422 with the JSON error body, as is one that does not fit `T`.
#[derive(Debug)]
pub(crate) struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|rejection| {
                unprocessable(format!("Invalid path: {}", rejection.body_text()))
            })?;
        for (name, value) in &raw {
            if value.contains('\0') {
                return Err(unprocessable(nul_refused(name)));
            }
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|rejection| unprocessable(format!("Invalid path: {}", rejection.body_text())))
    }
}

/// Parsed query parameters, in order, keys possibly repeated.
#[derive(Clone, Debug, Default)]
pub(crate) struct QueryParams(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    /// A NUL in a name or value is a 422 naming the parameter.
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let params = Self::parse(parts.uri.query().unwrap_or_default());
        if let Some((name, _)) = params
            .0
            .iter()
            .find(|(name, value)| name.contains('\0') || value.contains('\0'))
        {
            return Err(unprocessable(nul_refused(&name.replace('\0', "\\u0000"))));
        }
        Ok(params)
    }
}

fn decode(text: &str) -> String {
    let spaced = text.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

impl QueryParams {
    /// Every `(name, value)`, in order.
    pub(crate) fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// Parses a raw query string.
    pub(crate) fn parse(query: &str) -> Self {
        Self(
            query
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(key), decode(value))
                })
                .collect(),
        )
    }

    /// The first non-empty value of `key` (an empty value counts as absent).
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, value)| name == key && !value.is_empty())
            .map(|(_, value)| value.as_str())
    }

    /// A boolean: `true`/`True`/`1`/`yes` or `false`/`False`/`0`/`no`.
    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(text) => match text.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(Some(true)),
                "false" | "0" | "no" => Ok(Some(false)),
                _ => Err(unprocessable(format!(
                    "Invalid boolean for '{key}': {text}"
                ))),
            },
        }
    }

    /// An integer.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|text| {
                text.parse()
                    .map_err(|_| unprocessable(format!("Invalid {key} {text}")))
            })
            .transpose()
    }

    /// A list: repeated keys, a JSON array in one key, or a comma-separated value.
    pub(crate) fn list(&self, key: &str) -> Vec<String> {
        let mut items = Vec::new();
        for (name, value) in &self.0 {
            if name != key || value.is_empty() {
                continue;
            }
            if value.starts_with('[')
                && let Ok(array) = serde_json::from_str::<Vec<String>>(value)
            {
                items.extend(array);
                continue;
            }
            items.extend(
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|part| !part.is_empty())
                    .map(str::to_owned),
            );
        }
        items
    }
}

/// Parses a path id, answering 422 `Invalid <what> ID: must be a UUID` otherwise.
pub(crate) fn uuid(what: &str, text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| unprocessable(format!("Invalid {what} ID: must be a UUID")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_accept_both_sdk_encodings() {
        let python = QueryParams::parse("select=run_id&select=status");
        assert_eq!(python.list("select"), ["run_id", "status"]);
        let js = QueryParams::parse("select=%5B%22run_id%22%2C%22status%22%5D");
        assert_eq!(js.list("select"), ["run_id", "status"]);
        assert!(
            QueryParams::parse("stream_mode=")
                .list("stream_mode")
                .is_empty()
        );
    }

    #[test]
    fn booleans_accept_every_spelling() {
        let params = QueryParams::parse("a=1&b=0&c=true&d=False&e=yes&f=maybe");
        assert_eq!(params.bool("a").unwrap(), Some(true));
        assert_eq!(params.bool("b").unwrap(), Some(false));
        assert_eq!(params.bool("c").unwrap(), Some(true));
        assert_eq!(params.bool("d").unwrap(), Some(false));
        assert_eq!(params.bool("e").unwrap(), Some(true));
        assert!(params.bool("f").is_err());
        assert_eq!(params.bool("missing").unwrap(), None);
    }

    #[test]
    fn values_are_percent_decoded() {
        let params = QueryParams::parse("namespace=users.u%201&key=a+b");
        assert_eq!(params.get("namespace"), Some("users.u 1"));
        assert_eq!(params.get("key"), Some("a b"));
    }
}
