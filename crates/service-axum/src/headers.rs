//! `http.configurable_headers`: request headers copied into a new run's
//! `config.configurable`, as the reference server copies them. Nothing is copied
//! unless an `includes` pattern names it; credentials and the keys the server sets
//! itself never are.

use axum::extract::{FromRequest, Request};
use axum::http::HeaderMap;
use serde_json::Value;
use service_types::RunCreate;

use crate::error::ApiError;
use crate::extract::JsonBody;

/// Headers that carry credentials or tenancy: never handed to a graph.
const NEVER: [&str; 4] = ["authorization", "x-api-key", "x-service-key", "x-tenant-id"];
/// `configurable` keys the server owns: a header may not set them.
const RESERVED: [&str; 7] = [
    "run_id",
    "thread_id",
    "graph_id",
    "assistant_id",
    "checkpoint_id",
    "checkpoint_ns",
    "checkpoint_map",
];

/// Which request headers a run's `config.configurable` gets: the names (lower case)
/// an `includes` pattern matches and no `excludes` pattern does; `*` in a pattern
/// matches any run of characters.
#[derive(Clone, Debug, Default)]
pub struct ConfigurableHeaders {
    /// Patterns of the headers copied.
    pub includes: Vec<String>,
    /// Patterns of headers left out even when included.
    pub excludes: Vec<String>,
}

impl ConfigurableHeaders {
    fn copies(&self, name: &str) -> bool {
        !NEVER.contains(&name)
            && !RESERVED.contains(&name)
            && !self.excludes.iter().any(|pattern| wildcard(pattern, name))
            && self.includes.iter().any(|pattern| wildcard(pattern, name))
    }

    /// Copies the matching headers into `body.config.configurable`, over what the
    /// body set (as the reference server does).
    fn apply(&self, headers: &HeaderMap, body: &mut RunCreate) {
        for (name, value) in headers {
            let name = name.as_str();
            if !self.copies(name) {
                continue;
            }
            let Ok(value) = value.to_str() else { continue };
            body.config
                .get_or_insert_with(Default::default)
                .configurable
                .get_or_insert_with(Default::default)
                .insert(name.to_owned(), Value::String(value.to_owned()));
        }
    }
}

/// Whether `name` matches `pattern` whole, `*` standing for any characters (no
/// backtracking blow-up: greedy segments, as a glob matcher does).
fn wildcard(pattern: &str, name: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A run-creation body with the configured request headers in its
/// `config.configurable`.
#[derive(Debug)]
pub(crate) struct RunBody(pub RunCreate);

impl<S: Send + Sync> FromRequest<S> for RunBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let headers = request
            .extensions()
            .get::<std::sync::Arc<ConfigurableHeaders>>()
            .cloned()
            .map(|policy| (policy, request.headers().clone()));
        let JsonBody(mut body) = JsonBody::<RunCreate>::from_request(request, state).await?;
        if let Some((policy, headers)) = headers {
            policy.apply(&headers, &mut body);
        }
        Ok(Self(body))
    }
}

/// [`RunBody`]'s copying for bodies read otherwise (a batch's items).
pub(crate) fn apply_to(
    policy: Option<&ConfigurableHeaders>,
    headers: &HeaderMap,
    body: &mut RunCreate,
) {
    if let Some(policy) = policy {
        policy.apply(headers, body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_matches_the_whole_name() {
        assert!(wildcard("x-user-*", "x-user-id"));
        assert!(wildcard("x-*-id", "x-user-id"));
        assert!(wildcard("user-agent", "user-agent"));
        assert!(wildcard("*", "anything"));
        assert!(!wildcard("x-user-*", "x-org-id"));
        assert!(!wildcard("user-agent", "user-agent-2"));
        assert!(!wildcard("x-*-id", "x-id"));
    }
}
