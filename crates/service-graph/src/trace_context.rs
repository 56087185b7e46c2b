//! The server's trace spans, and how a trace crosses what a task cannot: the queue
//! between a request and the worker that runs its run, a graph worker process, a
//! webhook receiver. Whoever exports traces (the server, with
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) installs a [`Tracer`]; without one every function
//! here is one check of an unset cell and nothing is recorded, stored or sent.
//!
//! A span is not a `tracing` span (docs/performance.md §17): it is a [`Scope`], which
//! the task working in it holds in a thread-local while it is polled
//! ([`Scope::instrument`]), so a child span, a store call's span, an event and the
//! `traceparent` handed on all read their parent with one thread-local access (no
//! subscriber registry, nothing entered per poll but that). A sampled span is recorded
//! until the last scope holding it is dropped, then handed to the tracer; a trace the
//! sampler turned down records nothing, its context only, which still travels on
//! (marked not sampled) to the run, the worker and the webhook it causes. Contexts
//! travel as W3C `traceparent` strings.

use std::borrow::Cow;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::SystemTime;

/// What an exporter supplies: ids, the sampling of new traces, the export of spans.
pub trait Tracer: Send + Sync + 'static {
    /// A new trace's id and whether it is sampled, continuing `remote` (a caller's
    /// context, or one stored with a run) when given.
    fn start_trace(&self, remote: Option<&SpanContext>) -> (u128, bool);

    /// A new span id (never 0).
    fn span_id(&self) -> u64;

    /// A sampled span that ended.
    fn export(&self, span: &Ended<'_>);
}

static TRACER: OnceLock<Box<dyn Tracer>> = OnceLock::new();

/// Installs the process's tracer; false when one was installed already (the first
/// stays, like the first tracing subscriber).
pub fn install(tracer: Box<dyn Tracer>) -> bool {
    TRACER.set(tracer).is_ok()
}

/// Whether spans are exported, so work done only for them (a context stored with a
/// run) is worth doing.
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// A span's trace, its own id and whether its trace is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: u128,
    pub span_id: u64,
    pub sampled: bool,
}

impl SpanContext {
    /// A W3C `traceparent` (`00-<trace id>-<span id>-<flags>`); `None` when malformed
    /// or naming the invalid ids.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().as_bytes();
        // Version 00 has exactly four parts; later versions may append more.
        let (version, rest) = (text.get(..2)?, text.get(2..)?);
        if !(rest.len() == 53 || (version != b"00" && rest.get(53) == Some(&b'-'))) {
            return None;
        }
        if version == b"ff" || [rest[0], rest[33], rest[50]] != [b'-'; 3] {
            return None;
        }
        hex(version)?;
        let context = Self {
            trace_id: u128::from(hex(&rest[1..17])?) << 64 | u128::from(hex(&rest[17..33])?),
            span_id: hex(&rest[34..50])?,
            sampled: hex(&rest[51..53])? & 1 == 1,
        };
        (context.trace_id != 0 && context.span_id != 0).then_some(context)
    }

    /// As a W3C `traceparent`.
    pub fn traceparent(&self) -> String {
        let mut text = [0_u8; 55];
        text[..3].copy_from_slice(b"00-");
        write_hex(&mut text[3..19], (self.trace_id >> 64) as u64);
        write_hex(&mut text[19..35], self.trace_id as u64);
        text[35] = b'-';
        write_hex(&mut text[36..52], self.span_id);
        text[52] = b'-';
        write_hex(&mut text[53..55], u64::from(self.sampled));
        // ASCII throughout.
        String::from_utf8(text.to_vec()).unwrap_or_default()
    }
}

/// Each byte's value as a lowercase hex digit, or `NOT_HEX`: a `traceparent` is read
/// for every run a worker executes in a traced server.
const HEX_VALUES: [u8; 256] = {
    let mut values = [NOT_HEX; 256];
    let mut digit = 0;
    while digit < 16 {
        values[b"0123456789abcdef"[digit] as usize] = digit as u8;
        digit += 1;
    }
    values
};
const NOT_HEX: u8 = 0xff;

/// Lowercase hex digits (at most 16) as a number; `None` when any is not one.
fn hex(digits: &[u8]) -> Option<u64> {
    let mut number = 0;
    let mut invalid = 0;
    for digit in digits {
        let value = HEX_VALUES[usize::from(*digit)];
        invalid |= value;
        number = number << 4 | u64::from(value & 0xf);
    }
    // Only `NOT_HEX` has the high bit set.
    (invalid & 0x80 == 0).then_some(number)
}

/// `number`'s low digits in lowercase hex, filling `out` (an even number, at most 16).
fn write_hex(out: &mut [u8], number: u64) {
    let bytes = number.to_be_bytes();
    let low = &bytes[8 - out.len() / 2..];
    for (pair, byte) in out.chunks_exact_mut(2).zip(low) {
        pair[0] = b"0123456789abcdef"[usize::from(byte >> 4)];
        pair[1] = b"0123456789abcdef"[usize::from(byte & 0xf)];
    }
}

/// Nanoseconds since the Unix epoch, from the realtime clock: a sampled span reads it
/// twice, and `SystemTime`'s conversion to a duration since the epoch costs more than
/// the read itself (docs/performance.md §17).
fn unix_nanos() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    let seconds = u64::try_from(now.tv_sec).unwrap_or_default();
    let nanos = u64::try_from(now.tv_nsec).unwrap_or_default();
    seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// A span's kind, as OpenTelemetry names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal,
    Server,
    Client,
}

/// A sampled span being recorded, handed to the tracer once the last scope holding it
/// is dropped.
#[derive(Debug)]
struct Recording {
    context: SpanContext,
    parent: Option<(u64, bool)>,
    kind: SpanKind,
    start: u64,
    fields: Mutex<SpanFields>,
}

/// A span as it ended, for the tracer to export.
#[derive(Debug)]
pub struct Ended<'a> {
    pub context: SpanContext,
    /// The parent's span id, and whether it is remote (a request's `traceparent`, a
    /// run's stored one).
    pub parent: Option<(u64, bool)>,
    pub kind: SpanKind,
    /// Nanoseconds since the Unix epoch.
    pub start: u64,
    pub end: u64,
    pub fields: &'a SpanFields,
}

/// What a span records as it runs.
#[derive(Debug)]
pub struct SpanFields {
    pub name: Cow<'static, str>,
    pub attributes: Vec<(&'static str, Value)>,
    pub events: Vec<SpanEvent>,
    /// An error, with its message, once one was recorded.
    pub error: Option<String>,
}

impl SpanFields {
    /// Sets an attribute (its value replaced when set already).
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        let value = value.into();
        match self.attributes.iter_mut().find(|(name, _)| *name == key) {
            Some(existing) => existing.1 = value,
            None => {
                // Room for the most a span of the server's sets (a request's six), so
                // the list is not grown and copied along the way.
                if self.attributes.capacity() == 0 {
                    self.attributes.reserve_exact(6);
                }
                self.attributes.push((key, value));
            }
        }
    }
}

/// A warning or error logged in a span.
#[derive(Debug)]
pub struct SpanEvent {
    pub time: SystemTime,
    pub name: String,
    pub attributes: Vec<(&'static str, Value)>,
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(Cow<'static, str>),
    /// Exported as its hyphenated lowercase text, written by the exporter (not
    /// formatted into a string of its own first).
    Uuid(uuid::Uuid),
    Int(i64),
    Bool(bool),
    Float(f64),
}

impl From<&'static str> for Value {
    fn from(text: &'static str) -> Self {
        Self::String(Cow::Borrowed(text))
    }
}

impl From<Cow<'static, str>> for Value {
    fn from(text: Cow<'static, str>) -> Self {
        Self::String(text)
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Self::String(Cow::Owned(text))
    }
}

impl From<uuid::Uuid> for Value {
    fn from(id: uuid::Uuid) -> Self {
        Self::Uuid(id)
    }
}

impl From<i64> for Value {
    fn from(number: i64) -> Self {
        Self::Int(number)
    }
}

impl From<u64> for Value {
    fn from(number: u64) -> Self {
        Self::Int(i64::try_from(number).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Value {
    fn from(flag: bool) -> Self {
        Self::Bool(flag)
    }
}

impl From<f64> for Value {
    fn from(number: f64) -> Self {
        Self::Float(number)
    }
}

impl Recording {
    fn new(
        context: SpanContext,
        parent: Option<(u64, bool)>,
        name: &'static str,
        kind: SpanKind,
    ) -> Self {
        Self {
            context,
            parent,
            kind,
            start: unix_nanos(),
            fields: Mutex::new(SpanFields {
                name: Cow::Borrowed(name),
                attributes: Vec::new(),
                events: Vec::new(),
                error: None,
            }),
        }
    }

    fn fields(&self) -> MutexGuard<'_, SpanFields> {
        self.fields.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(tracer) = TRACER.get() {
            tracer.export(&Ended {
                context: self.context,
                parent: self.parent,
                kind: self.kind,
                start: self.start,
                end: unix_nanos(),
                fields: self
                    .fields
                    .get_mut()
                    .unwrap_or_else(PoisonError::into_inner),
            });
        }
    }
}

/// Where work belongs in its trace: a sampled span, the context of a trace not
/// sampled, or nothing (not traced).
#[derive(Clone, Debug, Default)]
pub struct Scope(Option<Trace>);

#[derive(Clone, Debug)]
enum Trace {
    Unsampled(SpanContext),
    Sampled(Arc<Recording>),
}

impl Trace {
    fn context(&self) -> SpanContext {
        match self {
            Self::Unsampled(context) => *context,
            Self::Sampled(recording) => recording.context,
        }
    }

    /// A span in this trace: a child of this one, or this trace's context again when
    /// it is not sampled.
    fn child(&self, tracer: &dyn Tracer, name: &'static str, kind: SpanKind) -> Self {
        match self {
            Self::Unsampled(context) => Self::Unsampled(*context),
            Self::Sampled(parent) => {
                let context = SpanContext {
                    span_id: tracer.span_id(),
                    ..parent.context
                };
                let parent = Some((parent.context.span_id, false));
                Self::Sampled(Arc::new(Recording::new(context, parent, name, kind)))
            }
        }
    }
}

thread_local! {
    /// The scope of the task being polled on this thread.
    static CURRENT: RefCell<Option<Trace>> = const { RefCell::new(None) };
}

/// The current `traceparent`, when traces are exported and the work is traced.
pub fn current() -> Option<String> {
    CURRENT.with_borrow(|trace| Some(trace.as_ref()?.context().traceparent()))
}

/// A span named `name` in the current scope's trace (none outside one).
pub fn span(name: &'static str, kind: SpanKind) -> Scope {
    let Some(tracer) = TRACER.get() else {
        return Scope(None);
    };
    Scope(CURRENT.with_borrow(|trace| Some(trace.as_ref()?.child(&**tracer, name, kind))))
}

/// A span of the current scope's trace that ends where it was made and has no
/// children: a store or checkpointer call's. It records its times only, so nothing is
/// allocated or shared for it (docs/performance.md §17); `None` outside a sampled span.
pub fn call_span(name: &'static str, kind: SpanKind) -> Option<CallSpan> {
    let tracer = TRACER.get()?;
    CURRENT.with_borrow(|trace| match trace {
        Some(Trace::Sampled(parent)) => Some(CallSpan {
            context: SpanContext {
                span_id: tracer.span_id(),
                ..parent.context
            },
            parent: parent.context.span_id,
            name,
            kind,
            start: unix_nanos(),
        }),
        _ => None,
    })
}

/// A span [`call_span`] made, handed to the tracer when dropped.
#[derive(Debug)]
pub struct CallSpan {
    context: SpanContext,
    parent: u64,
    name: &'static str,
    kind: SpanKind,
    start: u64,
}

impl Drop for CallSpan {
    fn drop(&mut self) {
        if let Some(tracer) = TRACER.get() {
            tracer.export(&Ended {
                context: self.context,
                parent: Some((self.parent, false)),
                kind: self.kind,
                start: self.start,
                end: unix_nanos(),
                fields: &SpanFields {
                    name: Cow::Borrowed(self.name),
                    attributes: Vec::new(),
                    events: Vec::new(),
                    error: None,
                },
            });
        }
    }
}

/// The scope of a root span named `name`: a child of `traceparent` (a request's, or
/// one stored with a run) when there is one, else (also when it is malformed) of the
/// current scope, else the root of a new trace, its sampling decided by the tracer. A
/// trace not sampled records nothing.
pub fn child_of(traceparent: Option<&str>, name: &'static str, kind: SpanKind) -> Scope {
    let Some(tracer) = TRACER.get() else {
        return Scope(None);
    };
    let remote = traceparent.and_then(SpanContext::parse);
    if remote.is_none()
        && let Some(child) =
            CURRENT.with_borrow(|trace| Some(trace.as_ref()?.child(&**tracer, name, kind)))
    {
        return Scope(Some(child));
    }
    let (trace_id, sampled) = tracer.start_trace(remote.as_ref());
    let context = SpanContext {
        trace_id,
        span_id: tracer.span_id(),
        sampled,
    };
    Scope(Some(match sampled {
        true => {
            let parent = remote.map(|remote| (remote.span_id, true));
            Trace::Sampled(Arc::new(Recording::new(context, parent, name, kind)))
        }
        false => Trace::Unsampled(context),
    }))
}

/// Records on the current scope's span, when it is sampled (a warning logged in it).
pub fn record_current(record: impl FnOnce(&mut SpanFields)) {
    CURRENT.with_borrow(|trace| {
        if let Some(Trace::Sampled(recording)) = trace {
            record(&mut recording.fields());
        }
    });
}

impl Scope {
    /// The current task's scope, to hand to work it spawns.
    pub fn current() -> Self {
        Self(CURRENT.with_borrow(Clone::clone))
    }

    /// A span named `name` in this scope's trace (none when it is not traced).
    pub fn child(&self, name: &'static str, kind: SpanKind) -> Self {
        match (TRACER.get(), &self.0) {
            (Some(tracer), Some(trace)) => Self(Some(trace.child(&**tracer, name, kind))),
            _ => Self(None),
        }
    }

    /// Whether the span records (its trace is sampled): only then are its attributes
    /// worth formatting.
    pub fn is_recording(&self) -> bool {
        matches!(self.0, Some(Trace::Sampled(_)))
    }

    /// Records on the span, when it is sampled.
    pub fn record(&self, record: impl FnOnce(&mut SpanFields)) {
        if let Some(Trace::Sampled(recording)) = &self.0 {
            record(&mut recording.fields());
        }
    }

    /// Runs `work` in the scope.
    pub fn in_scope<R>(&self, work: impl FnOnce() -> R) -> R {
        let mut scope = self.0.clone();
        let _carried = Carried::enter(&mut scope);
        work()
    }

    /// `future` in the scope: the scope is the thread's current one while the future
    /// is polled (a scope not traced, made while nothing is traced, leaves the thread's
    /// as it is).
    pub fn instrument<F: Future>(self, future: F) -> InScope<F> {
        InScope {
            inner: future,
            scope: self,
        }
    }
}

pin_project_lite::pin_project! {
    /// A future in a [`Scope`].
    pub struct InScope<F> {
        #[pin]
        inner: F,
        scope: Scope,
    }
}

impl<F> InScope<F> {
    /// The scope (outside a poll).
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
}

impl<F: Future> Future for InScope<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if this.scope.0.is_none() {
            return this.inner.poll(cx);
        }
        // The scope moves into the thread-local and back: nothing is cloned per poll.
        let _carried = Carried::enter(&mut this.scope.0);
        this.inner.poll(cx)
    }
}

/// The thread's scope, taken from `slot` until dropped (also by a panic), then put
/// back in it and the one before restored.
struct Carried<'a> {
    slot: &'a mut Option<Trace>,
    before: Option<Trace>,
}

impl<'a> Carried<'a> {
    fn enter(slot: &'a mut Option<Trace>) -> Self {
        let before = CURRENT.replace(slot.take());
        Self { slot, before }
    }
}

impl Drop for Carried<'_> {
    fn drop(&mut self) {
        *self.slot = CURRENT.replace(self.before.take());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn a_traceparent_is_read_as_the_w3c_format_says() {
        let context =
            SpanContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(
            context,
            SpanContext {
                trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
                span_id: 0x00f0_67aa_0ba9_02b7,
                sampled: true,
            }
        );
        assert_eq!(
            context.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        let unsampled =
            SpanContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.sampled);
        assert_eq!(
            unsampled.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        );
        // A later version's extra part is allowed; unknown flag bits are not kept.
        let later = SpanContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-x")
            .unwrap();
        assert!(later.sampled);
        assert!(later.traceparent().ends_with("-01"));
        for malformed in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert!(SpanContext::parse(malformed).is_none(), "{malformed}");
        }
    }

    /// A span as it ended: its name, context, parent and attributes.
    type EndedSpan = (
        String,
        SpanContext,
        Option<(u64, bool)>,
        Vec<(&'static str, Value)>,
    );

    /// Samples a trace whose caller did, or (without a caller) every other one; spans
    /// ended are kept by name with their parent.
    #[derive(Default)]
    struct Kept {
        roots: AtomicU64,
        ids: AtomicU64,
        ended: Mutex<Vec<EndedSpan>>,
    }

    impl Tracer for &'static Kept {
        fn start_trace(&self, remote: Option<&SpanContext>) -> (u128, bool) {
            match remote {
                Some(remote) => (remote.trace_id, remote.sampled),
                None => {
                    let root = self.roots.fetch_add(1, Ordering::Relaxed);
                    (u128::from(root) + 1, root.is_multiple_of(2))
                }
            }
        }

        fn span_id(&self) -> u64 {
            self.ids.fetch_add(1, Ordering::Relaxed) + 1
        }

        fn export(&self, span: &Ended<'_>) {
            self.ended.lock().unwrap().push((
                span.fields.name.to_string(),
                span.context,
                span.parent,
                span.fields.attributes.clone(),
            ));
        }
    }

    #[tokio::test]
    async fn spans_follow_their_scope_and_a_trace_not_sampled_records_nothing() {
        let kept: &'static Kept = Box::leak(Box::default());
        assert!(install(Box::new(kept)));
        assert_eq!(current(), None);
        assert!(span("outside", SpanKind::Internal).0.is_none());
        assert!(call_span("outside", SpanKind::Client).is_none());

        // Sampled: a request, a call in it, a run continuing its stored context.
        let request = child_of(None, "request", SpanKind::Server);
        assert!(request.is_recording());
        request.record(|span| span.set("url.path", "/runs"));
        let stored = request
            .clone()
            .instrument(async {
                tokio::task::yield_now().await;
                drop(call_span("store.runs.create", SpanKind::Client));
                current()
            })
            .await
            .unwrap();
        drop(request);
        let run = child_of(Some(&stored), "run", SpanKind::Internal);
        run.in_scope(|| record_current(|span| span.set("run_id", 7_u64)));
        drop(run);
        assert_eq!(current(), None);

        // Not sampled: nothing recorded, the context handed on with its flag off.
        let unsampled = child_of(None, "request", SpanKind::Server);
        assert!(!unsampled.is_recording());
        let stored = unsampled.in_scope(|| {
            assert!(!span("run.create", SpanKind::Internal).is_recording());
            assert!(call_span("store.runs.create", SpanKind::Client).is_none());
            current().unwrap()
        });
        assert!(stored.ends_with("-00"));
        assert!(!child_of(Some(&stored), "run", SpanKind::Internal).is_recording());

        let ended = kept.ended.lock().unwrap();
        let names: Vec<&str> = ended.iter().map(|(name, ..)| name.as_str()).collect();
        assert_eq!(names, ["store.runs.create", "request", "run"]);
        let (call, request, run) = (&ended[0], &ended[1], &ended[2]);
        assert_eq!(request.2, None);
        assert_eq!(request.3, [("url.path", Value::from("/runs"))]);
        assert_eq!(call.2, Some((request.1.span_id, false)));
        assert_eq!(run.2, Some((request.1.span_id, true)));
        assert_eq!(run.1.trace_id, request.1.trace_id);
        assert_eq!(run.3, [("run_id", Value::Int(7))]);
    }
}
