//! OpenTelemetry traces (docs/operations.md, "Tracing"): with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the
//! server's spans (request, run creation, run, graph, node, store and checkpointer
//! calls, webhook delivery) are exported over OTLP HTTP/protobuf, configured by the
//! standard `OTEL_*` variables. The spans are `service_graph::trace_context` scopes:
//! without an exporter each costs one check of an unset cell, and the store is not
//! wrapped at all.

mod export;
mod layer;
mod proto;
mod store;

use std::borrow::Cow;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::Response;
use service_graph::trace_context::{self, InScope, Scope, SpanKind};
use tower::Service;
use tracing_subscriber::{Layer, Registry};

use crate::env::ConfigError;

/// The exporter, while traces are exported.
#[derive(Debug)]
pub(crate) struct Tracing {
    spans: Arc<export::Spans>,
    /// The task posting the batches.
    exporting: tokio::task::JoinHandle<()>,
}

/// A layer the logging set-up adds to its subscriber.
pub(crate) type ExtraLayer = Box<dyn Layer<Registry> + Send + Sync>;

impl Tracing {
    /// The exporter the `OTEL_*` variables describe, installed as the process's
    /// tracer; `None` when no OTLP endpoint is set (or `OTEL_SDK_DISABLED=true`,
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
        let sampler = layer::Sampler::from_vars(var).map_err(ConfigError)?;
        // The endpoint, headers, timeout and resource come from the OTEL_EXPORTER_OTLP_*
        // variables (the traces-specific ones first), OTEL_SERVICE_NAME and
        // OTEL_RESOURCE_ATTRIBUTES.
        let exporter = export::Exporter::from_vars(var)
            .map_err(|error| ConfigError(format!("cannot export traces: {error}")))?;
        let settings = export::BatchSettings::from_vars(var);
        let spans = Arc::new(export::Spans::new(settings, exporter.head_room()));
        let exporting = tokio::spawn({
            let spans = Arc::clone(&spans);
            async move { spans.export(exporter).await }
        });
        trace_context::install(Box::new(layer::Exporter {
            spans: Arc::clone(&spans),
            sampler,
        }));
        Ok(Some(Self { spans, exporting }))
    }

    /// The layer turning the service's warnings and errors into events of the span
    /// they are logged in, for the logging set-up's subscriber.
    pub(crate) fn layer(&self) -> ExtraLayer {
        layer::SpanEvents.with_filter(layer::Wanted).boxed()
    }

    /// `store` with every repository call a span.
    pub(crate) fn traced_store(&self, store: &service_store::Store) -> service_store::Store {
        store::traced_store(store)
    }

    /// `checkpointer` with every call a span.
    pub(crate) fn traced_checkpointer(
        &self,
        checkpointer: Arc<dyn service_graph::Checkpointer>,
    ) -> Arc<dyn service_graph::Checkpointer> {
        store::traced_checkpointer(checkpointer)
    }

    /// Exports what is still buffered; the server calls it as it stops.
    pub(crate) async fn shutdown(self) {
        self.spans.stop();
        let _ = self.exporting.await;
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
            record_response(this.inner.scope(), this.method, response);
        }
        Poll::Ready(answered)
    }
}

/// The W3C trace context header (a `HeaderName` made once: looking one up by a `&str`
/// parses the name on every request).
static TRACEPARENT: axum::http::HeaderName = axum::http::HeaderName::from_static("traceparent");

fn request_scope(request: &Request) -> Scope {
    let traceparent = request
        .headers()
        .get(&TRACEPARENT)
        .and_then(|traceparent| traceparent.to_str().ok());
    let scope = trace_context::child_of(traceparent, "http.request", SpanKind::Server);
    scope.record(|span| {
        let method = method_name(request.method());
        span.name = method.clone();
        span.set("http.request.method", method);
        span.set("url.path", request.uri().path().to_owned());
    });
    scope
}

/// A method's name, not copied when it is a standard one.
fn method_name(method: &Method) -> Cow<'static, str> {
    const STANDARD: [Method; 9] = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];
    const NAMES: [&str; 9] = [
        "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE",
    ];
    match STANDARD.iter().position(|standard| standard == method) {
        Some(index) => Cow::Borrowed(NAMES[index]),
        None => Cow::Owned(method.as_str().to_owned()),
    }
}

fn record_response(scope: &Scope, method: &Method, response: &Response) {
    scope.record(|span| {
        if let Some(route) = response.extensions().get::<MatchedPath>() {
            let route = route.as_str();
            span.set("http.route", route.to_owned());
            // Not through the formatter: this is on every sampled request.
            let mut name = String::with_capacity(method.as_str().len() + 1 + route.len());
            name.push_str(method.as_str());
            name.push(' ');
            name.push_str(route);
            span.name = Cow::Owned(name);
        }
        let status = response.status();
        span.set("http.response.status_code", i64::from(status.as_u16()));
        if status.is_server_error() {
            span.error = Some(String::new());
        }
    });
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
