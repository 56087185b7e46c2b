//! OpenTelemetry traces (docs/operations.md, "Tracing"): with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the
//! server's spans (request, run creation, run, graph, node, store and checkpointer
//! calls, webhook delivery) are exported over OTLP HTTP/protobuf, configured by the
//! standard `OTEL_*` variables. The spans are `trace`-level `tracing` spans: without
//! an exporter no layer wants them, so each costs one level check, and the store is
//! not wrapped at all.

mod export;
mod layer;
mod store;

use std::sync::Arc;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::Response;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::Config;
use service_graph::trace_context::{self, InScope, Propagator, Scope};
use tower::Service;
use tracing::Span;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::{Layer, Registry};

use crate::env::ConfigError;

/// The exporter, while traces are exported.
#[derive(Debug)]
pub(crate) struct Tracing {
    exporter: Arc<layer::Exporter>,
    /// The task posting the batches.
    exporting: tokio::task::JoinHandle<()>,
}

/// A layer the logging set-up adds to its subscriber.
pub(crate) type ExtraLayer = Box<dyn Layer<Registry> + Send + Sync>;

impl Tracing {
    /// The exporter the `OTEL_*` variables describe, its propagator installed; `None`
    /// when no OTLP endpoint is set (or `OTEL_SDK_DISABLED=true`,
    /// `OTEL_TRACES_EXPORTER=none`). Must run on the server's tokio runtime.
    pub(crate) fn from_env() -> Result<Option<Self>, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let var = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match var("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(ConfigError(format!(
                    "OTEL_TRACES_EXPORTER={other} is not supported: traces are exported with otlp (or none)"
                )));
            }
        }
        if var("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
            && var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
        {
            return Ok(None);
        }
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = var(name)
                && protocol.trim() != "http/protobuf"
            {
                return Err(ConfigError(format!(
                    "{name}={protocol} is not supported: traces are exported as OTLP http/protobuf (point the endpoint at the collector's HTTP port, usually 4318)"
                )));
            }
        }
        // The endpoint, headers and timeout come from the OTEL_EXPORTER_OTLP_* variables
        // (the traces-specific ones first).
        let mut exporter = export::Exporter::from_vars(var)
            .map_err(|error| ConfigError(format!("cannot export traces: {error}")))?;
        let mut resource = Resource::builder();
        let named = var("OTEL_SERVICE_NAME").is_some()
            || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
        if !named {
            resource = resource.with_service_name("service-server");
        }
        exporter.set_resource(&resource.build());
        let spans = Arc::new(export::Spans::new(export::BatchSettings::from_vars(var)));
        let exporting = tokio::spawn({
            let spans = Arc::clone(&spans);
            async move { spans.export(exporter).await }
        });
        // The default configuration reads the OTEL_TRACES_SAMPLER variables.
        let sampler = Config::default().sampler;
        let exporter = Arc::new(layer::Exporter::new(spans, sampler));
        trace_context::install(Box::new(W3c(Arc::clone(&exporter))));
        Ok(Some(Self {
            exporter,
            exporting,
        }))
    }

    /// The layer turning the service's spans into OpenTelemetry spans (and its
    /// warnings and errors into their events), for the logging set-up's subscriber
    /// whose output `log_filter` (RUST_LOG's directives) filters.
    pub(crate) fn layer(&self, log_filter: &str) -> ExtraLayer {
        let spans_logged = EnvFilter::try_new(log_filter)
            .ok()
            .and_then(|filter| filter.max_level_hint())
            .is_none_or(|level| level >= LevelFilter::TRACE);
        self.exporter
            .spans_logged
            .store(spans_logged, std::sync::atomic::Ordering::Relaxed);
        layer::OtelLayer {
            exporter: Arc::clone(&self.exporter),
        }
        .with_filter(layer::Wanted)
        .boxed()
    }

    /// `store` with every repository call a span.
    pub(crate) fn traced_store(&self, store: &service_store::Store) -> service_store::Store {
        store::traced_store(&self.exporter, store)
    }

    /// `checkpointer` with every call a span.
    pub(crate) fn traced_checkpointer(
        &self,
        checkpointer: Arc<dyn service_graph::Checkpointer>,
    ) -> Arc<dyn service_graph::Checkpointer> {
        store::traced_checkpointer(&self.exporter, checkpointer)
    }

    /// Exports what is still buffered; the server calls it as it stops.
    pub(crate) async fn shutdown(self) {
        self.exporter.spans.stop();
        let _ = self.exporting.await;
    }
}

/// The W3C trace context, as `traceparent` strings.
struct W3c(Arc<layer::Exporter>);

impl Propagator for W3c {
    fn current(&self) -> Option<String> {
        layer::current(&self.0).map(|context| layer::traceparent(&context))
    }

    fn root(&self, traceparent: Option<&str>, make: &mut dyn FnMut() -> Span) -> Scope {
        self.0.root(traceparent, make)
    }
}

/// The layer giving each request the span [`TraceRequest`] makes (a tower layer rather
/// than axum's `from_fn`, which clones and boxes the router for every request).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TraceRequests;

impl<S> tower::Layer<S> for TraceRequests {
    type Service = TraceRequest<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TraceRequest(inner)
    }
}

/// The span of one request, the root of its trace or a child of the `traceparent` it
/// carries, named after its route template once the router matched one (it hands it
/// out on the response: `RouterOptions::trace_routes`).
#[derive(Clone, Debug)]
pub(crate) struct TraceRequest<S>(S);

impl<S> Service<Request> for TraceRequest<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answered<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let method = request.method().clone();
        let scope = request_scope(&request);
        // In the scope: a layer may start its work as it is called.
        let calling = scope.in_scope(|| self.0.call(request));
        Answered {
            inner: scope.instrument(calling),
            method,
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's response, recorded on its span once answered.
    pub(crate) struct Answered<F> {
        #[pin]
        inner: InScope<F>,
        method: Method,
    }
}

impl<F> Future for Answered<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let answered = ready!(this.inner.as_mut().poll(cx));
        if let Ok(response) = &answered {
            record_response(this.inner.span(), this.method, response);
        }
        Poll::Ready(answered)
    }
}

fn request_scope(request: &Request) -> Scope {
    let method = request.method();
    let traceparent = request
        .headers()
        .get("traceparent")
        .and_then(|traceparent| traceparent.to_str().ok());
    trace_context::child_of(traceparent, || {
        tracing::trace_span!(
            "http.request",
            otel.name = %method,
            otel.kind = "server",
            http.request.method = %method,
            url.path = request.uri().path(),
            http.route = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        )
    })
}

fn record_response(span: &Span, method: &Method, response: &Response) {
    if let Some(route) = response.extensions().get::<MatchedPath>() {
        span.record("http.route", route.as_str());
        span.record(
            "otel.name",
            tracing::field::display(format_args!("{method} {}", route.as_str())),
        );
    }
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(vars: &[(&str, &str)]) -> Result<Option<Tracing>, ConfigError> {
        Tracing::from_lookup(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint_or_when_turned_off() {
        assert!(decide(&[]).unwrap().is_none());
        assert!(
            decide(&[("OTEL_SERVICE_NAME", "agents")])
                .unwrap()
                .is_none()
        );
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        assert!(
            decide(&[endpoint, ("OTEL_SDK_DISABLED", "true")])
                .unwrap()
                .is_none()
        );
        assert!(
            decide(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")])
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_protocol_or_exporter_not_built_in_stops_the_boot_naming_it() {
        let endpoint = (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://collector:4317",
        );
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
        ] {
            let ConfigError(message) = decide(&[endpoint, (name, value)]).unwrap_err();
            assert!(message.contains(&format!("{name}={value}")), "{message}");
        }
    }
}
