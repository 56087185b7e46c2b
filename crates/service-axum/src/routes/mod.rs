//! Route handlers, one module per resource.

pub(crate) mod a2a;
pub(crate) mod assistants;
pub(crate) mod channels;
pub(crate) mod crons;
pub(crate) mod deliveries;
pub(crate) mod jsonrpc;
pub(crate) mod mcp;
pub(crate) mod meta;
pub(crate) mod protocol;
pub(crate) mod runs;
pub(crate) mod store;
pub(crate) mod threads;
pub(crate) mod ui;

use axum::Router;
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use axum::routing::{MethodFilter, on};
use service_engine::Engine;
use service_engine::auth::{Action, Resource};

use crate::auth::{Access, Guard, guard};

/// One route of the router: its method, path and what it asks the authorizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteInfo {
    /// HTTP method.
    pub method: Method,
    /// Path template, `{name}` for a parameter.
    pub path: &'static str,
    /// Public, or the resource and action it is authorized as.
    pub access: Access,
}

impl From<(Resource, Action)> for Access {
    fn from((resource, action): (Resource, Action)) -> Self {
        Self::Guarded(resource, action)
    }
}

/// One adder per HTTP method: `table.get(path, access, handler)`.
macro_rules! verbs {
    ($($name:ident => $method:ident),*) => {$(
        pub(crate) fn $name<H: Handler<T, Engine>, T: 'static>(
            self,
            path: &'static str,
            access: impl Into<Access>,
            handler: H,
        ) -> Self {
            self.add(Method::$method, MethodFilter::$method, path, access.into(), handler)
        }
    )*};
}

/// The route table: every route is added with its access, so none can be routed
/// without its guard, and the table lists what the router serves.
pub(crate) struct Table {
    router: Router<Engine>,
    routes: Vec<RouteInfo>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Self {
            router: Router::new(),
            routes: Vec::new(),
        }
    }

    fn add<H, T>(
        mut self,
        method: Method,
        filter: MethodFilter,
        path: &'static str,
        access: Access,
        handler: H,
    ) -> Self
    where
        H: Handler<T, Engine>,
        T: 'static,
    {
        let route = on(filter, handler);
        let route = match access {
            Access::Public => route,
            Access::Guarded(resource, action) => route.layer(axum::middleware::from_fn_with_state(
                Guard { resource, action },
                guard,
            )),
        };
        self.router = self.router.route(path, route);
        self.routes.push(RouteInfo {
            method,
            path,
            access,
        });
        self
    }

    verbs!(get => GET, post => POST, put => PUT, patch => PATCH, delete => DELETE);

    pub(crate) fn merge(mut self, other: Table) -> Self {
        self.router = self.router.merge(other.router);
        self.routes.extend(other.routes);
        self
    }

    pub(crate) fn into_parts(self) -> (Router<Engine>, Vec<RouteInfo>) {
        (self.router, self.routes)
    }
}

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
