//! `/metrics`: the engine's counters plus the HTTP adapter's own (requests by route
//! template and status, their latency, SSE subscribers and frames), in the
//! OpenMetrics text format Prometheus scrapes. Labels are route templates, methods and
//! statuses, never a path's ids, so nothing names a tenant's resources.

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use service_engine::Engine;

use crate::sse::HEARTBEAT_COMMENT;

/// The path the metrics are served at.
pub const METRICS_PATH: &str = "/metrics";

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

/// Seconds, from a quick read to a long wait.
fn latency_histogram() -> Histogram {
    Histogram::new([
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ])
}

/// The adapter's metrics and the registry they render from.
#[derive(Clone)]
pub(crate) struct HttpMetrics {
    engine: Engine,
    registry: Arc<Registry>,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    sse_subscribers: Gauge,
    sse_frames: Counter,
    ws: WsMetrics,
}

/// The protocol WebSocket's counts, handed to its handler in the request's extensions.
#[derive(Clone, Debug, Default)]
pub(crate) struct WsMetrics {
    open: Gauge,
    frames: Counter,
}

impl WsMetrics {
    /// Counts a socket in until the returned guard drops.
    pub(crate) fn opened(self) -> OpenSocket {
        self.open.inc();
        OpenSocket(self)
    }
}

/// An open WebSocket, counted out when dropped.
pub(crate) struct OpenSocket(WsMetrics);

impl OpenSocket {
    /// Counts one frame sent.
    pub(crate) fn sent(&self) {
        self.0.frames.inc();
    }
}

impl Drop for OpenSocket {
    fn drop(&mut self) {
        self.0.open.dec();
    }
}

impl HttpMetrics {
    pub(crate) fn new(engine: Engine, collector: Option<Arc<dyn Collector>>) -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: Family<RouteLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        let sse_subscribers = Gauge::default();
        let sse_frames = Counter::default();
        let mut registry = Registry::default();
        engine.register_metrics(&mut registry);
        if let Some(collector) = collector {
            registry.register_collector(Box::new(Shared(collector)));
        }
        let http = registry.sub_registry_with_prefix("service_http");
        http.register(
            "requests",
            "HTTP requests answered, by method, route template and status",
            requests.clone(),
        );
        http.register(
            "request_duration_seconds",
            "Time to the response head, by method and route template",
            latency.clone(),
        );
        let sse = registry.sub_registry_with_prefix("service_sse");
        sse.register(
            "subscribers",
            "Server-sent event streams open now",
            sse_subscribers.clone(),
        );
        sse.register(
            "frames_sent",
            "Server-sent event frames written (heartbeats not counted)",
            sse_frames.clone(),
        );
        let ws = WsMetrics::default();
        let websocket = registry.sub_registry_with_prefix("service_ws");
        websocket.register(
            "subscribers",
            "Protocol WebSockets open now",
            ws.open.clone(),
        );
        websocket.register(
            "frames_sent",
            "Protocol WebSocket frames sent (answers and events)",
            ws.frames.clone(),
        );
        Self {
            ws,
            engine,
            registry: Arc::new(registry),
            requests,
            latency,
            sse_subscribers,
            sse_frames,
        }
    }
}

/// A collector the embedder keeps a handle on too.
#[derive(Debug)]
struct Shared(Arc<dyn Collector>);

impl Collector for Shared {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// Counts each request under its route template, with its latency; an SSE answer's
/// body is counted as a subscriber while open and by the frames it writes. A tower
/// layer on every route, where the template is known (axum's `from_fn` cloned and
/// boxed a `Next` per request), looking each route's series up once rather than
/// hashing owned labels per request (docs/performance.md §17).
///
/// With `record_route`, it also hands the route template out on the response, for
/// the request's span (in place of a layer of its own: each route layer costs a
/// boxed service's clone per request).
#[derive(Clone)]
pub(crate) struct TrackRequests {
    metrics: Arc<HttpMetrics>,
    record_route: bool,
}

impl HttpMetrics {
    pub(crate) fn track_requests(&self, record_route: bool) -> TrackRequests {
        TrackRequests {
            metrics: Arc::new(self.clone()),
            record_route,
        }
    }
}

impl<S> tower::Layer<S> for TrackRequests {
    type Service = Tracked<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Tracked {
            inner,
            metrics: Arc::clone(&self.metrics),
            series: Arc::default(),
            record_route: self.record_route,
        }
    }
}

/// A route (one method's endpoint of one template) with its requests counted.
#[derive(Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
    metrics: Arc<HttpMetrics>,
    /// The series of the first request's method and template: an endpoint serves one
    /// of each, except the fallbacks and `any` routes, whose other requests are
    /// counted through the families.
    series: Arc<OnceLock<RouteSeries>>,
    record_route: bool,
}

struct RouteSeries {
    method: Method,
    route: String,
    latency: Histogram,
    by_status: Mutex<Vec<(u16, Counter)>>,
    /// The protocol WebSocket's endpoint, whose handler counts its socket and frames.
    socket: bool,
}

impl RouteSeries {
    fn new(metrics: &HttpMetrics, method: &Method, route: &str) -> Self {
        let latency = metrics
            .latency
            .get_or_create(&RouteLabels {
                method: method.as_str().to_owned(),
                route: route.to_owned(),
            })
            .clone();
        Self {
            method: method.clone(),
            route: route.to_owned(),
            latency,
            by_status: Mutex::default(),
            socket: method == Method::GET && route.ends_with(crate::routes::protocol::EVENTS_ROUTE),
        }
    }

    fn count(&self, metrics: &HttpMetrics, status: u16) {
        let mut by_status = self
            .by_status
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, counter)) = by_status.iter().find(|(known, _)| *known == status) {
            counter.inc();
            return;
        }
        let counter = metrics
            .requests
            .get_or_create(&RequestLabels {
                method: self.method.as_str().to_owned(),
                route: self.route.clone(),
                status,
            })
            .clone();
        counter.inc();
        by_status.push((status, counter));
    }
}

/// Where a request is counted.
enum Series {
    Route(Arc<OnceLock<RouteSeries>>),
    /// Another method or template than the endpoint's first: looked up per request.
    Other(RouteSeries),
}

impl<S> tower::Service<Request> for Tracked<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = TrackedResponse<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let started = Instant::now();
        let matched = request.extensions().get::<MatchedPath>();
        let recorded = matched.filter(|_| self.record_route).cloned();
        let route = matched.map_or("unmatched", MatchedPath::as_str);
        let method = request.method();
        let known = self
            .series
            .get_or_init(|| RouteSeries::new(&self.metrics, method, route));
        let series = match known.method == method && known.route == route {
            true => Series::Route(Arc::clone(&self.series)),
            false => Series::Other(RouteSeries::new(&self.metrics, method, route)),
        };
        let socket = match &series {
            Series::Route(_) => known.socket,
            Series::Other(own) => own.socket,
        };
        if socket {
            request.extensions_mut().insert(self.metrics.ws.clone());
        }
        TrackedResponse {
            inner: self.inner.call(request),
            started,
            metrics: Arc::clone(&self.metrics),
            series: Some(series),
            recorded,
        }
    }
}

pin_project_lite::pin_project! {
    /// A route's response, counted when it is ready.
    pub(crate) struct TrackedResponse<F> {
        #[pin]
        inner: F,
        started: Instant,
        metrics: Arc<HttpMetrics>,
        series: Option<Series>,
        recorded: Option<MatchedPath>,
    }
}

impl<F, E> Future for TrackedResponse<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut response = match ready!(this.inner.poll(cx)) {
            Ok(response) => response,
            failed => return Poll::Ready(failed),
        };
        let Some(series) = this.series.take() else {
            return Poll::Ready(Ok(response));
        };
        if let Some(route) = this.recorded.take() {
            response.extensions_mut().insert(route);
        }
        let seconds = this.started.elapsed().as_secs_f64();
        let status = response.status().as_u16();
        let series = match &series {
            Series::Route(shared) => shared.get(),
            Series::Other(own) => Some(own),
        };
        if let Some(series) = series {
            series.latency.observe(seconds);
            series.count(this.metrics, status);
        }
        Poll::Ready(Ok(count_sse(this.metrics, response)))
    }
}

/// An SSE answer with its body counted: a subscriber while open, and its frames.
fn count_sse(metrics: &HttpMetrics, response: Response) -> Response {
    let is_sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !is_sse {
        return response;
    }
    let (parts, body) = response.into_parts();
    metrics.sse_subscribers.inc();
    let counted = CountedFrames {
        body,
        frames: metrics.sse_frames.clone(),
        open: metrics.sse_subscribers.clone(),
    };
    Response::from_parts(parts, Body::new(counted))
}

/// An SSE body that counts its frames, and its subscriber out when dropped.
struct CountedFrames {
    body: Body,
    frames: Counter,
    open: Gauge,
}

impl Drop for CountedFrames {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl http_body::Body for CountedFrames {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(context);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && data.as_ref() != HEARTBEAT_COMMENT
        {
            self.frames.inc();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// `GET /metrics`: the queue gauges are read from the store first; if that fails the
/// rest is still served.
pub(crate) async fn render(State(metrics): State<HttpMetrics>) -> Response {
    if let Err(error) = metrics.engine.refresh_metrics().await {
        tracing::warn!(%error, "reading the queue for /metrics failed; its gauges keep their last values");
    }
    let mut text = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &metrics.registry) {
        tracing::error!(%error, "encoding /metrics failed");
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}
