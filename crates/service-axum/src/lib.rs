//! The axum adapter: the Router for every route, SSE with Last-Event-ID replay,
//! Idempotency-Key handling and the one mapping from engine errors to HTTP.
//!
//! Embed the service in an existing axum app by nesting [`router`]:
//!
//! ```no_run
//! # fn demo(engine: service_engine::Engine) {
//! let app: axum::Router = axum::Router::new().nest("/agents", service_axum::router(engine));
//! # }
//! ```

pub mod auth;
mod console;
mod cors;
mod error;
mod extract;
mod headers;
mod idempotency;
mod json;
mod limits;
mod metrics;
mod openapi;
mod project;
mod routes;
mod sse;
mod streams;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::extract::State;
use service_engine::Engine;
use service_engine::auth::Authorizer;

use crate::auth::{Access, Auth};

pub use console::{ConsoleMountError, console, console_mount};
pub use cors::{CorsPolicy, OriginPattern};
pub use error::{ApiError, ApiResult, error_body, status_of};
pub use extract::decode_json_body;
pub use headers::ConfigurableHeaders;
pub use metrics::METRICS_PATH;
pub use openapi::{DOCS_PATH, OPENAPI_PATH};
pub use routes::RouteInfo;
pub use routes::ui::UiAssets;

/// The request body limit when none is configured: 25 MiB, room for agent inputs
/// that carry images or long histories.
pub const DEFAULT_MAX_BODY_BYTES: usize = 25 * 1024 * 1024;

/// How the router treats requests.
#[derive(Clone, Debug)]
pub struct RouterOptions {
    /// Largest request body read (SERVICE_MAX_BODY_BYTES); a larger one gets 413.
    pub max_body_bytes: usize,
    /// Authentication and authorization; none by default.
    pub auth: Auth,
    /// Leaves out the run routes (protocol v2's thread commands and event streams
    /// among them), the deliveries routes and MCP, whose tools are runs
    /// (`http.disable_runs`).
    pub disable_runs: bool,
    /// Caps on what one client may ask for or hold open.
    pub limits: ClientLimits,
    /// Browser origins (`scheme://host[:port]`, or `*` for any) allowed to call the
    /// MCP endpoint besides loopback ones: the configured CORS origins. A request
    /// without `Origin` (not from a browser) is not checked.
    pub allowed_origins: Vec<String>,
    /// How cross-origin requests are answered (`http.cors`); none answers every
    /// origin, as the reference server does without the block.
    pub cors: Option<CorsPolicy>,
    /// Request headers copied into new runs' `config.configurable`
    /// (`http.configurable_headers`); none by default.
    pub configurable_headers: Option<ConfigurableHeaders>,
    /// Inbound channel routes (`service.channels`): `GET /channels` and
    /// `POST /channels/{route_name}` exist only with at least one.
    pub channels: Option<service_channels::Channels>,
    /// Serves `GET /metrics` and counts requests for it; off by default. Under an
    /// authenticator, scraping needs credentials like any route that is not public.
    pub metrics: bool,
    /// More metrics read at each scrape (the embedder's pools and workers).
    pub metrics_collector: Option<Arc<dyn prometheus_client::collector::Collector>>,
    /// The bundled generative UI components (langgraph.json's `ui`) `/ui` serves.
    pub ui: Option<Arc<UiAssets>>,
    /// Puts each matched request's route template (its `MatchedPath`) in the
    /// response's extensions, for an outer layer that names the request after it (a
    /// trace span: `POST /threads/{thread_id}/runs`); off by default.
    pub trace_routes: bool,
    /// The langgraph version the Python graphs run on (`/info`'s
    /// `langgraph_py_version`, as the reference server reports it); none without them.
    pub langgraph_py_version: Option<String>,
}

impl Default for RouterOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            auth: Auth::default(),
            disable_runs: false,
            limits: ClientLimits::default(),
            allowed_origins: Vec::new(),
            cors: None,
            configurable_headers: None,
            channels: None,
            metrics: false,
            metrics_collector: None,
            ui: None,
            trace_routes: false,
            langgraph_py_version: None,
        }
    }
}

/// Caps on what one client may ask for or hold open, each answered with a 4xx (or a
/// protocol error envelope on a WebSocket) naming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Runs one `POST /runs/batch` may create (SERVICE_MAX_BATCH_RUNS); a larger
    /// batch is a 422 before any run is created.
    pub max_batch_runs: usize,
    /// Subscriptions one protocol WebSocket may hold (SERVICE_MAX_WS_SUBSCRIPTIONS).
    pub max_ws_subscriptions: usize,
    /// Events a protocol WebSocket keeps to replay to later subscriptions
    /// (SERVICE_WS_REPLAY_MAX_EVENTS).
    pub ws_replay_events: usize,
    /// Bytes (as JSON) of those events (SERVICE_WS_REPLAY_MAX_BYTES).
    pub ws_replay_bytes: usize,
    /// SSE streams, WebSockets and waits (`/wait`, `/join`) one authenticated
    /// principal may hold open at once (SERVICE_MAX_STREAMS_PER_PRINCIPAL); more is a
    /// 429.
    pub max_streams_per_principal: usize,
    /// The same for requests without a principal, per client IP address
    /// (SERVICE_MAX_STREAMS_PER_ADDRESS); 0 is no cap. Applies only where the server
    /// passes the peer address (axum's `ConnectInfo<SocketAddr>`).
    pub max_streams_per_address: usize,
    /// Longest request target, path and query (SERVICE_MAX_URI_BYTES); longer is a 414.
    pub max_uri_bytes: usize,
    /// Most header fields in one request (SERVICE_MAX_HEADERS); more is a 431.
    pub max_headers: usize,
    /// Most bytes of header fields in one request (SERVICE_MAX_HEADER_BYTES); more is
    /// a 431.
    pub max_header_bytes: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            max_batch_runs: 100,
            max_ws_subscriptions: 100,
            ws_replay_events: 10_000,
            ws_replay_bytes: 8 * 1024 * 1024,
            max_streams_per_principal: 64,
            // Room for a busy browser origin or a small office behind one NAT, not for
            // one client to hold thousands; raise it behind a proxy (all clients share
            // its address) or cap there.
            max_streams_per_address: 1024,
            max_uri_bytes: 8 * 1024,
            max_headers: 100,
            max_header_bytes: 32 * 1024,
        }
    }
}

/// Every route of the service, bound to `engine`, with the default options. Nest it
/// under any path: the `Location` headers it sends include the mount path.
pub fn router(engine: Engine) -> Router {
    router_with(engine, RouterOptions::default())
}

/// Every route of the service, bound to `engine`, with `options`.
pub fn router_with(engine: Engine, options: RouterOptions) -> Router {
    let channels = options
        .channels
        .filter(|channels| !channels.routes().is_empty());
    let document = openapi::Document::new(openapi::Served {
        disable_runs: options.disable_runs,
        channels: channels.is_some(),
        metrics: options.metrics,
    });
    let (routes, table) = route_table(
        options.disable_runs,
        channels.is_some(),
        options.langgraph_py_version.clone(),
        document,
    )
    .into_parts();
    let mut routes = routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    if options.metrics {
        let metrics = metrics::HttpMetrics::new(engine.clone(), options.metrics_collector);
        // Layered inside the route table, where each request's route template is known.
        routes = routes
            .route(
                metrics::METRICS_PATH,
                axum::routing::get(metrics::render).with_state(metrics.clone()),
            )
            .layer(metrics.track_requests(options.trace_routes));
    } else if options.trace_routes {
        routes = routes.layer(RecordRoute);
    }
    let routes = routes.with_state(engine.clone());
    let context = RequestContext {
        body_limit: extract::BodyLimit(options.max_body_bytes),
        limits: options.limits,
        slots: streams::StreamSlots::new(&options.limits),
        authorizer: options.auth.authorizer,
        origins: routes::mcp::Origins(options.allowed_origins.into()),
        configurable_headers: options.configurable_headers.map(Arc::new),
        channels,
        ui: options.ui,
    };
    // Wrapping the whole route table (not each route) lets an idempotent replay
    // re-dispatch to a different route (the join of the recorded run).
    let mut router = Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn_with_state(
            engine,
            idempotency::idempotency,
        ))
        .layer(axum::middleware::map_request_with_state(
            context,
            with_context,
        ));
    if let Some(authenticator) = options.auth.authenticator {
        let public = table
            .iter()
            .filter(|route| route.access == Access::Public)
            .map(|route| route.path)
            .collect();
        let gate = auth::Gate {
            authenticator,
            public,
        };
        router = router.layer(axum::middleware::from_fn_with_state(
            gate,
            auth::authenticate,
        ));
    }
    // Outside the authenticator (an oversized head is refused unread), inside CORS
    // (a browser can read why).
    router
        .layer(axum::middleware::from_fn_with_state(
            options.limits,
            limits::check_head,
        ))
        .layer(axum::middleware::from_fn_with_state(
            options.cors.map(Arc::new),
            cors::cors,
        ))
}

/// Hands the route template, known only inside the table, out on the response (a
/// tower layer: axum's `from_fn` clones and boxes the route for every request).
#[derive(Clone, Copy, Debug)]
struct RecordRoute;

impl<S> tower::Layer<S> for RecordRoute {
    type Service = RecordingRoute<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RecordingRoute(inner)
    }
}

#[derive(Clone, Debug)]
struct RecordingRoute<S>(S);

impl<S> tower::Service<axum::extract::Request> for RecordingRoute<S>
where
    S: tower::Service<axum::extract::Request, Response = axum::response::Response>,
{
    type Response = axum::response::Response;
    type Error = S::Error;
    type Future = RouteRecorded<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: axum::extract::Request) -> Self::Future {
        let route = request
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .cloned();
        RouteRecorded {
            inner: self.0.call(request),
            route,
        }
    }
}

pin_project_lite::pin_project! {
    /// A route's response, its template added.
    struct RouteRecorded<F> {
        #[pin]
        inner: F,
        route: Option<axum::extract::MatchedPath>,
    }
}

impl<F, E> Future for RouteRecorded<F>
where
    F: Future<Output = Result<axum::response::Response, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut answered = ready!(this.inner.poll(cx));
        if let (Ok(response), Some(route)) = (&mut answered, this.route.take()) {
            response.extensions_mut().insert(route);
        }
        Poll::Ready(answered)
    }
}

/// What every request carries to the routes, put in by one layer (each layer of the
/// router costs boxed-service clones on every request).
#[derive(Clone)]
struct RequestContext {
    body_limit: extract::BodyLimit,
    limits: ClientLimits,
    slots: streams::StreamSlots,
    authorizer: Option<Arc<dyn Authorizer>>,
    origins: routes::mcp::Origins,
    configurable_headers: Option<Arc<ConfigurableHeaders>>,
    channels: Option<service_channels::Channels>,
    ui: Option<Arc<UiAssets>>,
}

async fn with_context(
    State(context): State<RequestContext>,
    mut request: axum::extract::Request,
) -> axum::extract::Request {
    let extensions = request.extensions_mut();
    extensions.insert(context.body_limit);
    extensions.insert(context.limits);
    extensions.insert(context.slots);
    extensions.insert(context.origins);
    if let Some(authorizer) = context.authorizer {
        extensions.insert(authorizer);
    }
    if let Some(headers) = context.configurable_headers {
        extensions.insert(headers);
    }
    if let Some(channels) = context.channels {
        extensions.insert(channels);
    }
    if let Some(ui) = context.ui {
        extensions.insert(ui);
    }
    request
}

/// Every route the router serves with `options`, with what each asks the authorizer.
pub fn routes(options: &RouterOptions) -> Vec<RouteInfo> {
    let channels = options
        .channels
        .as_ref()
        .is_some_and(|channels| !channels.routes().is_empty());
    let document = openapi::Document::new(openapi::Served {
        disable_runs: options.disable_runs,
        channels,
        metrics: options.metrics,
    });
    route_table(options.disable_runs, channels, None, document)
        .into_parts()
        .1
}

/// The routes a router adds when channel routes are configured (`GET /channels`,
/// `POST /channels/{route_name}`), so route walks can cover them.
pub fn channel_routes() -> Vec<RouteInfo> {
    routes::channels::routes().into_parts().1
}

/// `langgraph_py_version`: what `/info` reports (see [`RouterOptions`]).
fn route_table(
    disable_runs: bool,
    channels: bool,
    langgraph_py_version: Option<String>,
    document: openapi::Document,
) -> routes::Table {
    let about = routes::meta::Info {
        mcp: !disable_runs,
        langgraph_py_version,
    };
    let mut table = routes::Table::new()
        .merge(routes::assistants::routes())
        .merge(routes::threads::routes())
        .merge(routes::crons::routes())
        .merge(routes::store::routes())
        .merge(routes::meta::routes(about, document))
        .merge(routes::ui::routes());
    // Channel runs are the operator's configuration, not client run requests: they
    // stay with `disable_runs`.
    if channels {
        table = table.merge(routes::channels::routes());
    }
    if disable_runs {
        return table;
    }
    table
        .merge(routes::runs::routes())
        .merge(routes::protocol::routes())
        .merge(routes::deliveries::routes())
        .merge(routes::mcp::routes())
        .merge(routes::a2a::routes())
}

async fn not_found() -> ApiError {
    ApiError(service_engine::EngineError::not_found("Not Found"))
}

async fn method_not_allowed() -> ApiError {
    ApiError(service_engine::EngineError::new(
        service_engine::ErrorKind::MethodNotAllowed,
        "Method Not Allowed",
    ))
}
