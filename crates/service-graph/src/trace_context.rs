//! How a trace crosses what a span cannot: the queue between a request and the worker
//! that runs its run, a graph worker process, a webhook receiver. The context travels
//! as a W3C `traceparent` string; whoever installs a trace exporter (the server, with
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) installs the [`Propagator`] that reads and applies
//! it. Without one nothing is read, stored or sent, and every function here is one
//! check of an unset cell.
//!
//! A trace the sampler turned down has no spans at all (docs/performance.md §17): its
//! root is a [`Scope`] carrying only its context, which the task working in it holds
//! in a thread-local while it is polled, so the exporter's layer turns every span of
//! that trace away with one look at it, and the context still travels on (marked not
//! sampled) to the run, the worker and the webhook it causes.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tracing::instrument::Instrumented;
use tracing::{Instrument, Span};

/// Reads a span's trace context and sets a span's parent from one.
pub trait Propagator: Send + Sync + 'static {
    /// The `traceparent` of the current span; `None` when it is not traced.
    fn current(&self) -> Option<String>;

    /// The scope of the root `make` returns: a child of the span `traceparent` names,
    /// or (without one, or when it is malformed) of the current span, or the root of a
    /// new trace. A new trace's sampling is decided before `make` is called, so a
    /// trace not sampled makes no span.
    fn root(&self, traceparent: Option<&str>, make: &mut dyn FnMut() -> Span) -> Scope;
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

/// The current `traceparent`, when traces are exported and the work is traced: the
/// trace not sampled this task is in, or the current span's.
pub fn current() -> Option<String> {
    let propagator = PROPAGATOR.get()?;
    match unsampled() {
        Some(unsampled) => Some(unsampled.traceparent()),
        None => propagator.current(),
    }
}

/// The scope `make`'s span roots: a child of `traceparent` (a request's, or one stored
/// with a run) when there is one. The parent is known before the span is made, so the
/// trace's sampling is decided first, and a trace not sampled makes no span.
pub fn child_of(traceparent: Option<&str>, make: impl FnOnce() -> Span) -> Scope {
    match PROPAGATOR.get() {
        Some(propagator) => {
            let mut make = Some(make);
            propagator.root(traceparent, &mut || {
                make.take().map_or_else(Span::none, |make| make())
            })
        }
        None => Scope::span(make()),
    }
}

/// The ids of a trace not sampled, at the root that carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsampled {
    pub trace_id: u128,
    pub span_id: u64,
}

impl Unsampled {
    /// As a W3C `traceparent`, its sampled flag off.
    fn traceparent(self) -> String {
        format!("00-{:032x}-{:016x}-00", self.trace_id, self.span_id)
    }
}

thread_local! {
    /// The trace not sampled the task being polled on this thread is in.
    static UNSAMPLED: Cell<Option<Unsampled>> = const { Cell::new(None) };
}

/// The trace not sampled the current task is in, if it is in one.
pub fn unsampled() -> Option<Unsampled> {
    UNSAMPLED.get()
}

/// Where work belongs in its trace: its span, and the trace's context when it is not
/// sampled (then the span is none, unless the log shows spans).
#[derive(Clone, Debug)]
pub struct Scope {
    span: Span,
    unsampled: Option<Unsampled>,
}

impl Scope {
    /// The scope of `span`, in a sampled trace (or none).
    pub fn span(span: Span) -> Self {
        Self {
            span,
            unsampled: None,
        }
    }

    /// The scope of a trace not sampled, `span` made only for the log.
    pub fn unsampled(unsampled: Unsampled, span: Span) -> Self {
        Self {
            span,
            unsampled: Some(unsampled),
        }
    }

    /// The current task's scope, to hand to work it spawns.
    pub fn current() -> Self {
        Self {
            span: Span::current(),
            unsampled: unsampled(),
        }
    }

    /// Runs `work` in the scope.
    pub fn in_scope<R>(&self, work: impl FnOnce() -> R) -> R {
        let _carried = Carried::enter(self.unsampled);
        self.span.in_scope(work)
    }

    /// `future` in the scope: its span entered and its trace carried while it is
    /// polled (a sampled scope carries none, so a trace not sampled around it does not
    /// leak in).
    pub fn instrument<F: Future>(self, future: F) -> InScope<F> {
        InScope {
            inner: future.instrument(self.span),
            unsampled: self.unsampled,
        }
    }
}

pin_project_lite::pin_project! {
    /// A future in a [`Scope`].
    pub struct InScope<F> {
        #[pin]
        inner: Instrumented<F>,
        unsampled: Option<Unsampled>,
    }
}

impl<F> InScope<F> {
    /// The scope's span.
    pub fn span(&self) -> &Span {
        self.inner.span()
    }
}

impl<F: Future> Future for InScope<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _carried = Carried::enter(*this.unsampled);
        this.inner.poll(cx)
    }
}

/// The thread's carried trace, set until dropped (also by a panic), then put back.
struct Carried(Option<Unsampled>);

impl Carried {
    fn enter(unsampled: Option<Unsampled>) -> Self {
        Self(UNSAMPLED.replace(unsampled))
    }
}

impl Drop for Carried {
    fn drop(&mut self) {
        UNSAMPLED.set(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_trace_not_sampled_is_carried_only_while_its_work_runs() {
        let trace = Unsampled {
            trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
            span_id: 0x00f0_67aa_0ba9_02b7,
        };
        assert_eq!(
            trace.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        );
        let scope = Scope::unsampled(trace, Span::none());
        assert_eq!(scope.in_scope(unsampled), Some(trace));
        // A sampled scope inside it hides it; it is back once that ends.
        let inner = scope.in_scope(|| (Scope::span(Span::none()).in_scope(unsampled), unsampled()));
        assert_eq!(inner, (None, Some(trace)));
        assert_eq!(unsampled(), None);

        let polled = scope
            .instrument(async {
                tokio::task::yield_now().await;
                unsampled()
            })
            .await;
        assert_eq!(polled, Some(trace));
        assert_eq!(unsampled(), None);
    }
}
