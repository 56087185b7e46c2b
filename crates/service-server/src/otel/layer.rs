//! The layer turning the service's `tracing` spans into OpenTelemetry spans, made lean
//! for the run path (docs/performance.md §17): a trace's sampling is decided once,
//! before its root is made ([`Exporter::root`]); a trace not sampled has no spans at
//! all (its context is carried by the task working in it, `trace_context::Scope`), so
//! the layer turns each of its would-be spans away with one thread-local read (unless
//! the log shows `trace`-level spans: then they are made, with nothing recorded). A
//! sampled span keeps only what is exported (name, kind, times, attributes, events,
//! status) and goes to the batch processor as it closes.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use opentelemetry::trace::{
    Event as OtelEvent, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags,
    TraceId, TraceState,
};
use opentelemetry::{Context as OtelContext, Key, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SamplingDecision, ShouldSample};
use service_graph::trace_context::{self, Scope, Unsampled};

use super::export::Spans;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

/// What spans are recorded with and handed to: shared by the layer, its filter and
/// the propagator.
#[derive(Debug)]
pub(super) struct Exporter {
    pub(super) spans: Arc<Spans>,
    sampler: Box<dyn ShouldSample>,
    ids: RandomIdGenerator,
    /// Whether the log may show `trace`-level spans (then a trace not sampled has its
    /// spans made for it, with nothing recorded).
    pub(super) spans_logged: AtomicBool,
}

impl Exporter {
    pub(super) fn new(spans: Arc<Spans>, sampler: Box<dyn ShouldSample>) -> Self {
        Self {
            spans,
            sampler,
            ids: RandomIdGenerator::default(),
            spans_logged: AtomicBool::new(false),
        }
    }

    /// The scope of the root `make` returns (`trace_context::Propagator::root`).
    pub(super) fn root(
        &self,
        traceparent: Option<&str>,
        make: &mut dyn FnMut() -> tracing::Span,
    ) -> Scope {
        let caller = traceparent.and_then(parse_traceparent);
        if caller.is_none() {
            // Made where it is: in the trace not sampled this task carries, or a child
            // of the current span (the layer reads its trace then).
            if let Some(unsampled) = trace_context::unsampled() {
                return Scope::unsampled(unsampled, make());
            }
            if tracing::dispatcher::get_default(|d| d.current_span().id().is_some()) {
                return Scope::span(make());
            }
        }
        let context = self.decide("", caller.as_ref());
        let sampled = context.is_sampled();
        let made = |context: SpanContext, make: &mut dyn FnMut() -> tracing::Span| {
            ROOT.set(Some(Root {
                context,
                parent: caller.as_ref().map(SpanContext::span_id),
            }));
            let span = make();
            // Not taken when no span was made (no layer wanted it).
            ROOT.take();
            span
        };
        if sampled {
            return Scope::span(made(context, make));
        }
        let unsampled = Unsampled {
            trace_id: u128::from_be_bytes(context.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(context.span_id().to_bytes()),
        };
        let span = match self.spans_logged.load(Ordering::Relaxed) {
            true => made(context, make),
            false => tracing::Span::none(),
        };
        Scope::unsampled(unsampled, span)
    }

    /// The context of `span`'s trace at it: its nearest recorded ancestor's (itself
    /// included).
    fn context_at<S>(&self, span: &SpanRef<'_, S>) -> Option<SpanContext>
    where
        S: for<'a> LookupSpan<'a>,
    {
        span.scope().find_map(|span| {
            let extensions = span.extensions();
            extensions.get::<State>().map(|state| match state {
                State::Dropped(context) => context.clone(),
                State::Recording(recording) => recording.context.clone(),
            })
        })
    }

    /// A new root's context, its sampling decided with the sampler the
    /// `OTEL_TRACES_SAMPLER` variables describe (`caller` as the parent). The built-in
    /// samplers read the trace id and the parent only, so the span's name and
    /// attributes are not recorded first.
    fn decide(&self, name: &str, caller: Option<&SpanContext>) -> SpanContext {
        let trace_id = caller.map_or_else(|| self.ids.new_trace_id(), SpanContext::trace_id);
        let parent =
            caller.map(|caller| OtelContext::new().with_remote_span_context(caller.clone()));
        let result = self.sampler.should_sample(
            parent.as_ref(),
            trace_id,
            name,
            &SpanKind::Internal,
            &[],
            &[],
        );
        let flags = match result.decision {
            SamplingDecision::RecordAndSample => TraceFlags::SAMPLED,
            _ => TraceFlags::default(),
        };
        SpanContext::new(
            trace_id,
            self.ids.new_span_id(),
            flags,
            false,
            result.trace_state,
        )
    }

    /// The span of a call made in the current span (a store or checkpointer call, which
    /// makes no spans of its own), recorded without a `tracing` span and exported as it
    /// drops; `None` outside a sampled span.
    pub(super) fn call_span(&self, name: &'static str) -> Option<CallSpan<'_>> {
        let parent = current(self).filter(SpanContext::is_sampled)?;
        Some(CallSpan {
            exporter: self,
            recording: Some(Recording {
                context: SpanContext::new(
                    parent.trace_id(),
                    self.ids.new_span_id(),
                    TraceFlags::SAMPLED,
                    false,
                    parent.trace_state().clone(),
                ),
                parent: parent.span_id(),
                remote_parent: false,
                name: Cow::Borrowed(name),
                kind: SpanKind::Client,
                start: SystemTime::now(),
                attributes: Vec::new(),
                events: Vec::new(),
                status: Status::Unset,
            }),
        })
    }

    /// Encodes a closed, sampled span into the batch being filled.
    fn export(&self, recording: Recording) {
        let end = SystemTime::now();
        self.spans
            .push(|out| super::export::write_span(out, &recording, end));
    }
}

/// A call's span ([`Exporter::call_span`]), ended as it drops.
pub(super) struct CallSpan<'a> {
    exporter: &'a Exporter,
    recording: Option<Recording>,
}

impl Drop for CallSpan<'_> {
    fn drop(&mut self) {
        if let Some(recording) = self.recording.take() {
            self.exporter.export(recording);
        }
    }
}

/// What a span the layer saw carries, in its registry extensions.
enum State {
    /// Sampled.
    Recording(Box<Recording>),
    /// A root not sampled made without `trace_context::child_of` (its context is
    /// still handed on, so that work it causes elsewhere is not sampled either).
    Dropped(SpanContext),
}

pub(super) struct Recording {
    /// Its trace and own ids.
    pub(super) context: SpanContext,
    pub(super) parent: SpanId,
    /// Whether `parent` is a remote span (a request's `traceparent`, a run's stored one).
    pub(super) remote_parent: bool,
    pub(super) name: Cow<'static, str>,
    pub(super) kind: SpanKind,
    pub(super) start: SystemTime,
    pub(super) attributes: Vec<KeyValue>,
    pub(super) events: Vec<OtelEvent>,
    pub(super) status: Status,
}

/// The layer, behind [`Wanted`].
pub(super) struct OtelLayer {
    pub(super) exporter: Arc<Exporter>,
}

/// The layer's filter: the service's spans, and its warnings and errors (a span's
/// events). A span of a trace not sampled made for the log's sake is still seen, and
/// left without anything recorded.
pub(super) struct Wanted;

impl Wanted {
    fn wants(meta: &Metadata<'_>) -> bool {
        meta.target().starts_with("service_") && (meta.is_span() || *meta.level() <= Level::WARN)
    }
}

impl<S> Filter<S> for Wanted {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::wants(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        match (Self::wants(meta), meta.is_span()) {
            (false, _) => Interest::never(),
            // The layer may turn a span away, by the trace it would be in.
            (true, true) => Interest::sometimes(),
            (true, false) => Interest::always(),
        }
    }
}

impl<S> Layer<S> for OtelLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    /// A span inside a trace not sampled is not made at all (no registry entry, for
    /// any layer), unless the log may show it or it is a new root.
    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        !meta.is_span()
            || trace_context::unsampled().is_none()
            || self.exporter.spans_logged.load(Ordering::Relaxed)
            || ROOT.with_borrow(Option::is_some)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let exporter = &self.exporter;
        let (context, parent, remote_parent) = match ROOT.take() {
            // A root whose trace was decided as it was made.
            Some(root) if root.context.is_sampled() => (
                root.context,
                root.parent.unwrap_or(SpanId::INVALID),
                root.parent.is_some(),
            ),
            // Made for the log only, in a trace not sampled.
            Some(_) => return,
            None if trace_context::unsampled().is_some() => return,
            None => {
                let parent = match attrs.parent() {
                    Some(parent) => ctx.span(parent),
                    None if attrs.is_contextual() => ctx.lookup_current(),
                    None => None,
                };
                match parent.and_then(|p| exporter.context_at(&p)) {
                    // In a trace not sampled: nothing to record (its context is its root's).
                    Some(parent) if !parent.is_sampled() => return,
                    Some(parent) => (
                        SpanContext::new(
                            parent.trace_id(),
                            exporter.ids.new_span_id(),
                            TraceFlags::SAMPLED,
                            false,
                            parent.trace_state().clone(),
                        ),
                        parent.span_id(),
                        false,
                    ),
                    // A root made without `trace_context::child_of` (a span begun
                    // outside any task's trace): decided here.
                    None => {
                        let context = exporter.decide(attrs.metadata().name(), None);
                        if !context.is_sampled() {
                            span.extensions_mut().insert(State::Dropped(context));
                            return;
                        }
                        (context, SpanId::INVALID, false)
                    }
                }
            }
        };
        let mut recording = Recording {
            context,
            parent,
            remote_parent,
            name: Cow::Borrowed(attrs.metadata().name()),
            kind: SpanKind::Internal,
            start: SystemTime::now(),
            attributes: Vec::with_capacity(attrs.fields().len()),
            events: Vec::new(),
            status: Status::Unset,
        };
        attrs.record(&mut Fields(&mut recording));
        span.extensions_mut()
            .insert(State::Recording(Box::new(recording)));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        if let Some(State::Recording(recording)) = span.extensions_mut().get_mut::<State>() {
            values.record(&mut Fields(recording));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let span = match event.parent() {
            Some(parent) => ctx.span(parent),
            None if event.is_contextual() => ctx.lookup_current(),
            None => None,
        };
        let Some(span) = span else {
            return;
        };
        for span in span.scope() {
            let mut extensions = span.extensions_mut();
            match extensions.get_mut::<State>() {
                None => continue,
                Some(State::Dropped(_)) => return,
                Some(State::Recording(recording)) => {
                    let mut fields = EventFields::default();
                    event.record(&mut fields);
                    let level = event.metadata().level();
                    if *level == Level::ERROR {
                        recording.status = Status::error(fields.message.clone());
                    }
                    fields
                        .attributes
                        .push(KeyValue::new("level", level.as_str()));
                    recording.events.push(OtelEvent::new(
                        fields.message,
                        SystemTime::now(),
                        fields.attributes,
                        0,
                    ));
                    return;
                }
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        if let Some(State::Recording(recording)) = span.extensions_mut().remove::<State>() {
            self.exporter.export(*recording);
        }
    }
}

/// A span's fields as attributes; the `otel.*` ones set its name, kind and status.
struct Fields<'a>(&'a mut Recording);

impl Fields<'_> {
    fn set(&mut self, field: &Field, value: opentelemetry::Value) {
        let recording = &mut *self.0;
        match field.name() {
            "otel.name" => recording.name = Cow::Owned(value.as_str().into_owned()),
            "otel.kind" => {
                recording.kind = match value.as_str().as_ref() {
                    "server" => SpanKind::Server,
                    "client" => SpanKind::Client,
                    "producer" => SpanKind::Producer,
                    "consumer" => SpanKind::Consumer,
                    _ => SpanKind::Internal,
                }
            }
            "otel.status_code" => {
                recording.status = match value.as_str().as_ref() {
                    "ERROR" => Status::error(match &recording.status {
                        Status::Error { description } => description.clone(),
                        _ => Cow::Borrowed(""),
                    }),
                    "OK" => Status::Ok,
                    _ => Status::Unset,
                }
            }
            "otel.status_message" => recording.status = Status::error(value.as_str().into_owned()),
            name => {
                let key = Key::from_static_str(name);
                match recording.attributes.iter_mut().find(|kv| kv.key == key) {
                    Some(existing) => existing.value = value,
                    None => recording.attributes.push(KeyValue::new(key, value)),
                }
            }
        }
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_owned().into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field, i64::try_from(value).unwrap_or(i64::MAX).into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field, value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.set(field, format!("{value:?}").into());
    }
}

/// An event's message and other fields.
#[derive(Default)]
struct EventFields {
    message: String,
    attributes: Vec<KeyValue>,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            name => self
                .attributes
                .push(KeyValue::new(Key::from_static_str(name), value.to_owned())),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            name => self.attributes.push(KeyValue::new(
                Key::from_static_str(name),
                format!("{value:?}"),
            )),
        }
    }
}

/// The context of the current span's trace, when the layer sees it (the dispatcher's
/// current span: no handle cloned and dropped).
pub(super) fn current(exporter: &Exporter) -> Option<SpanContext> {
    tracing::dispatcher::get_default(|dispatch| {
        let current = dispatch.current_span();
        let registry = dispatch.downcast_ref::<Registry>()?;
        exporter.context_at(&registry.span(current.id()?)?)
    })
}

/// A root being made by [`Exporter::root`], its trace decided.
struct Root {
    context: SpanContext,
    /// The remote span it continues.
    parent: Option<SpanId>,
}

thread_local! {
    /// The root being made on this thread by [`Exporter::root`].
    static ROOT: RefCell<Option<Root>> = const { RefCell::new(None) };
}

/// A W3C `traceparent` (`00-<trace id>-<span id>-<flags>`) as a remote span context;
/// `None` when malformed or naming the invalid ids.
pub(super) fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let version = parts.next()?;
    let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
    // Version 00 has exactly four parts; later versions may append more.
    if version.len() != 2
        || version == "ff"
        || (version == "00" && parts.next().is_some())
        || trace.len() != 32
        || span.len() != 16
        || flags.len() != 2
    {
        return None;
    }
    let hex = |text: &str| text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !(hex(version) && hex(trace) && hex(span) && hex(flags)) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let context = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        TraceState::NONE,
    );
    context.is_valid().then_some(context)
}

/// `context` as a W3C `traceparent`.
pub(super) fn traceparent(context: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_as_the_w3c_format_says() {
        let context =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert!(context.is_sampled() && context.is_remote());
        assert_eq!(
            traceparent(&context),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        let unsampled =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.is_sampled());
        // A later version's extra part is allowed; unknown flag bits are not kept.
        let later =
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-x").unwrap();
        assert_eq!(later.trace_flags(), TraceFlags::SAMPLED);
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
            assert!(parse_traceparent(malformed).is_none(), "{malformed}");
        }
    }
}
