//! How a trace crosses what a span cannot: the queue between a request and the worker
//! that runs its run, a graph worker process, a webhook receiver. The context travels
//! as a W3C `traceparent` string; whoever installs a trace exporter (the server, with
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) installs the [`Propagator`] that reads and applies
//! it. Without one nothing is read, stored or sent, and every function here is one
//! check of an unset cell.

use std::sync::OnceLock;

use tracing::Span;

/// Reads a span's trace context and sets a span's parent from one.
pub trait Propagator: Send + Sync + 'static {
    /// The `traceparent` of the current span; `None` when it is not traced.
    fn current(&self) -> Option<String>;

    /// The span `make` returns, made a child of the span `traceparent` names (a root of
    /// its own when `traceparent` is malformed).
    fn child_of(&self, traceparent: &str, make: &mut dyn FnMut() -> Span) -> Span;
}

static PROPAGATOR: OnceLock<Box<dyn Propagator>> = OnceLock::new();

/// Installs the process's propagator; false when one was installed already (the first
/// stays, like the first tracing subscriber).
pub fn install(propagator: Box<dyn Propagator>) -> bool {
    PROPAGATOR.set(propagator).is_ok()
}

/// Whether spans are exported, so work done only for them (a span kept for a worker's
/// calls, a context stored with a run) is worth doing.
pub fn enabled() -> bool {
    PROPAGATOR.get().is_some()
}

/// The current span's `traceparent`, when traces are exported and it is traced.
pub fn current() -> Option<String> {
    PROPAGATOR.get()?.current()
}

/// The span `make` returns, a child of `traceparent` (a request's, or one stored with a
/// run) when there is one. The parent is known as the span is made, so the trace's
/// sampling is decided then, before any of its fields is recorded.
pub fn child_of(traceparent: Option<&str>, make: impl FnOnce() -> Span) -> Span {
    match (PROPAGATOR.get(), traceparent) {
        (Some(propagator), Some(traceparent)) => {
            let mut make = Some(make);
            propagator.child_of(traceparent, &mut || {
                make.take().map_or_else(Span::none, |make| make())
            })
        }
        _ => make(),
    }
}
