//! Route handlers, one module per resource.

pub(crate) mod assistants;
pub(crate) mod crons;
pub(crate) mod deliveries;
pub(crate) mod meta;
pub(crate) mod runs;
pub(crate) mod store;
pub(crate) mod threads;

use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// Headers from `(name, value)` pairs whose values are known to be valid.
pub(crate) fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        if let Ok(value) = HeaderValue::from_str(value) {
            map.insert(HeaderName::from_static(name), value);
        }
    }
    map
}

/// The path this router is mounted under (`""` at the root), so `Location` headers
/// point at the right place when an embedder nests the router.
#[derive(Clone, Debug, Default)]
pub(crate) struct MountPrefix(pub(crate) String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for MountPrefix {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let inner = parts.uri.path();
        let prefix = parts
            .extensions
            .get::<axum::extract::OriginalUri>()
            .and_then(|original| original.path().strip_suffix(inner).map(str::to_owned))
            .unwrap_or_default();
        Ok(Self(prefix))
    }
}
