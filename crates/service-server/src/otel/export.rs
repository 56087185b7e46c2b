//! The OTLP HTTP/protobuf exporter: each batch written straight into protobuf as one
//! resource and one scope (every span is the server's), in place of a per-span
//! grouping and conversion into generated message types (docs/performance.md §17),
//! and posted with the workspace's reqwest (rustls on ring), not a second HTTP stack.
//! The SDK's batch processor exports from a thread of its own, so each POST is handed
//! to the server's tokio runtime and awaited from there.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use parking_lot::Mutex;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use std::collections::VecDeque;
use tokio::sync::Notify;

use service_graph::trace_context::{Ended, SpanEvent, SpanKind, Value};

use super::proto::{
    Cursor, FIXED32, FIXED64, LEN, VARINT, append, field_len, string_len, tag, varint_len,
};

/// How long one export may take unless `OTEL_EXPORTER_OTLP_TIMEOUT` says (OTLP's
/// default).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct Exporter {
    client: reqwest::Client,
    endpoint: String,
    headers: HeaderMap,
    /// The resource, as the `Resource` message's fields.
    resource: Vec<u8>,
}

impl Exporter {
    /// The exporter the `OTEL_EXPORTER_OTLP_*` variables (`var` reads them, blanks as
    /// unset) describe, posting on the current tokio runtime.
    pub(super) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let endpoint = match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(endpoint) => endpoint,
            None => {
                let base = var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default();
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
        };
        let endpoint = reqwest::Url::parse(endpoint.trim())
            .map_err(|error| format!("invalid OTLP endpoint {endpoint}: {error}"))?
            .to_string();
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        // The signal's own headers win over the general ones.
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            for (key, value) in var(name).iter().flat_map(|list| parse_headers(list)) {
                headers.insert(key, value);
            }
        }
        let timeout = [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .into_iter()
        .find_map(|name| var(name)?.trim().parse().ok())
        .map_or(EXPORT_TIMEOUT, Duration::from_millis);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| error.to_string())?;
        Ok(Self {
            client,
            endpoint,
            headers,
            resource: resource(&var),
        })
    }
}

/// `key=value,...` (values percent-encoded), as the OTLP exporters read it; entries
/// that are not a valid header are skipped.
fn parse_headers(list: &str) -> impl Iterator<Item = (HeaderName, HeaderValue)> + '_ {
    list.split(',').filter_map(|entry| {
        let (key, value) = entry.split_once('=')?;
        let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8_lossy();
        let key = HeaderName::try_from(key.trim()).ok()?;
        let value = HeaderValue::try_from(value.as_ref()).ok()?;
        (!value.is_empty()).then_some((key, value))
    })
}

impl Exporter {
    /// Posts one `ExportTraceServiceRequest` body to the collector.
    async fn post(&self, body: Bytes) -> Result<(), String> {
        let response = self
            .client
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|error| error.to_string())?;
        let status = response.status();
        // Read to the end, so the connection is kept for the next export.
        response.bytes().await.map_err(|error| error.to_string())?;
        match status.is_success() {
            true => Ok(()),
            false => Err(format!("the collector answered {status}")),
        }
    }
}

/// Spans queued for export when `OTEL_BSP_MAX_QUEUE_SIZE` is not set.
const DEFAULT_MAX_QUEUE: usize = 32_768;
/// Spans per POST when `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` is not set.
const DEFAULT_MAX_BATCH: usize = 8_192;

/// The batch settings the `OTEL_BSP_*` variables describe.
#[derive(Clone, Copy, Debug)]
pub(super) struct BatchSettings {
    delay: Duration,
    max_queue: usize,
    max_batch: usize,
}

impl BatchSettings {
    pub(super) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let number = |name: &str, default: usize| {
            var(name)
                .and_then(|value| value.trim().parse().ok())
                .filter(|value| *value > 0)
                .unwrap_or(default)
        };
        // Larger than the OpenTelemetry SDKs' 2048 and 512: a POST costs both sides a
        // fixed ~0.3 ms of CPU whatever its size, which at thousands of runs a second
        // in 512-span batches is a tenth of a two-core machine (docs/performance.md
        // §17); a span here is ~200 encoded bytes, so a full queue is about 6 MB.
        let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE);
        Self {
            delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5000) as u64),
            max_queue,
            max_batch: number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_MAX_BATCH).min(max_queue),
        }
    }
}

/// Ended spans, already encoded as the `Span` entries of a `ScopeSpans` message, in
/// batches of at most `max_batch` spans; a background task posts them every `delay`
/// or as soon as a batch is full (docs/performance.md §17: no span is copied or
/// queued as a structure, and no thread of its own).
#[derive(Debug)]
pub(super) struct Spans {
    settings: BatchSettings,
    /// Bytes kept free in front of each batch ([`Exporter::head_room`]).
    head_room: usize,
    pending: Mutex<Pending>,
    /// Wakes the task: a batch is full, or the server stops.
    wake: Notify,
}

#[derive(Debug, Default)]
struct Pending {
    /// The batch being filled, and its spans.
    filling: Vec<u8>,
    filling_spans: usize,
    /// Full batches, oldest first, and their spans.
    full: VecDeque<(Vec<u8>, usize)>,
    /// Spans in both.
    queued: usize,
    /// The largest batch so far, so the next is allocated once at that size rather than
    /// grown (and copied) span by span.
    batch_capacity: usize,
    /// Spans turned away because the queue was full, since last logged.
    dropped: u64,
    stopping: bool,
}

impl Spans {
    pub(super) fn new(settings: BatchSettings, head_room: usize) -> Self {
        Self {
            settings,
            head_room,
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
        }
    }

    /// Appends one span that `write` encodes (a `ScopeSpans.spans` entry); dropped
    /// when `max_queue` spans wait already (the server never waits for the collector).
    pub(super) fn push(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let mut pending = self.pending.lock();
        if pending.queued >= self.settings.max_queue {
            pending.dropped += 1;
            return;
        }
        pending.queued += 1;
        pending.filling_spans += 1;
        if pending.filling.capacity() == 0 {
            let capacity = pending.batch_capacity.max(self.head_room + SPAN_SIZE);
            pending.filling = Vec::with_capacity(capacity);
            pending.filling.resize(self.head_room, 0);
        }
        write(&mut pending.filling);
        if pending.filling_spans >= self.settings.max_batch {
            let batch = std::mem::take(&mut pending.filling);
            pending.batch_capacity = pending.batch_capacity.max(batch.len());
            let spans = std::mem::take(&mut pending.filling_spans);
            pending.full.push_back((batch, spans));
            drop(pending);
            self.wake.notify_one();
        }
    }

    /// The batches one export round posts: every full one, and when `due` (the delay
    /// passed, or the server stops) the one being filled; with the spans dropped since
    /// the last round. Spans that end while the round posts wait for the next one:
    /// taking the batch being filled again after each POST would post them a few at a
    /// time for as long as they keep coming.
    fn take_round(&self, due: bool) -> (Vec<Vec<u8>>, u64) {
        let mut pending = self.pending.lock();
        let dropped = std::mem::take(&mut pending.dropped);
        let mut batches: Vec<Vec<u8>> = Vec::with_capacity(pending.full.len() + 1);
        while let Some((batch, spans)) = pending.full.pop_front() {
            pending.queued -= spans;
            batches.push(batch);
        }
        if due && pending.filling_spans > 0 {
            let batch = std::mem::take(&mut pending.filling);
            pending.batch_capacity = pending.batch_capacity.max(batch.len());
            pending.queued -= std::mem::take(&mut pending.filling_spans);
            batches.push(batch);
        }
        (batches, dropped)
    }

    /// Posts the batches with `exporter` until the server stops, then what is left.
    pub(super) async fn export(&self, exporter: Exporter) {
        loop {
            let stopping = self.pending.lock().stopping;
            let due = stopping
                || tokio::time::timeout(self.settings.delay, self.wake.notified())
                    .await
                    .is_err();
            let (batches, dropped) = self.take_round(due || self.pending.lock().stopping);
            if dropped > 0 {
                tracing::warn!(
                    dropped,
                    "spans were dropped: the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE)"
                );
            }
            let posted_nothing = batches.is_empty();
            for batch in batches {
                if let Err(error) = exporter.post(exporter.body(batch)).await {
                    tracing::warn!(%error, "exporting traces failed");
                }
            }
            // Stopping: rounds until one finds nothing (spans of requests still ending).
            if stopping && posted_nothing {
                return;
            }
        }
    }

    /// Has [`Spans::export`] post what is left and return.
    pub(super) fn stop(&self) {
        self.pending.lock().stopping = true;
        self.wake.notify_one();
    }
}

impl Exporter {
    /// Room kept free in front of each batch's spans for the messages around them.
    pub(super) fn head_room(&self) -> usize {
        // The resource, the scope, three tags and three lengths.
        self.resource.len() + SCOPE.len() + 64
    }

    /// An `ExportTraceServiceRequest` of `batch`'s spans (`ScopeSpans.spans` entries
    /// after [`Exporter::head_room`] bytes), all of the server's scope, under the
    /// resource: the messages around them are written into the room in front, so the
    /// spans are not copied.
    fn body(&self, mut batch: Vec<u8>) -> Bytes {
        let room = self.head_room();
        let spans = batch.len() - room;
        // ResourceSpans: the resource, one ScopeSpans (its scope, then the spans).
        let scope = string_len(SCOPE.as_bytes());
        let scope_spans = field_len(scope) + spans;
        let resource_spans = field_len(self.resource.len()) + field_len(scope_spans);
        let head = field_len(resource_spans) - resource_spans
            + field_len(self.resource.len())
            + field_len(scope_spans)
            - scope_spans
            + field_len(scope);
        let start = room - head;
        let mut cursor = Cursor::new(&mut batch[start..room]);
        cursor.field(tag(1, LEN), resource_spans);
        cursor.field(tag(1, LEN), self.resource.len());
        cursor.put(&self.resource);
        cursor.field(tag(2, LEN), scope_spans);
        cursor.field(tag(1, LEN), scope);
        cursor.string(1, SCOPE.as_bytes());
        Bytes::from(batch).slice(start..)
    }
}

/// Bytes a span usually takes (ids, name, times, a few attributes): a first batch's
/// size before the largest batch so far is known.
const SPAN_SIZE: usize = 256;

/// The instrumentation scope of every span.
const SCOPE: &str = "service-server";

/// A span as a `ScopeSpans.spans` entry: its length worked out, then its fields
/// written into room made for them at once.
pub(super) fn write_span(out: &mut Vec<u8>, span: &Ended<'_>) {
    let (context, fields) = (&span.context, span.fields);
    let attributes: usize = (fields.attributes.iter())
        .map(|(key, value)| field_len(key_value_len(key, value)))
        .sum();
    let events: usize = fields
        .events
        .iter()
        .map(|event| field_len(event_len(event)))
        .sum();
    let status = fields
        .error
        .as_ref()
        .map_or(0, |message| string_len(message.as_bytes()) + 2);
    let parent = if span.parent.is_some() { 10 } else { 0 };
    // Ids, kind, times and flags take fixed room.
    let length = 18
        + 10
        + parent
        + string_len(fields.name.as_bytes())
        + 2
        + 18
        + attributes
        + events
        + field_len(status)
        + 6;
    append(out, field_len(length), |out| {
        out.field(tag(2, LEN), length);
        let mut ids = [0; 28];
        ids[..2].copy_from_slice(&[tag(1, LEN), 16]);
        ids[2..18].copy_from_slice(&context.trace_id.to_be_bytes());
        ids[18..20].copy_from_slice(&[tag(2, LEN), 8]);
        ids[20..].copy_from_slice(&context.span_id.to_be_bytes());
        out.put(&ids);
        if let Some((parent, _)) = span.parent {
            let mut id = [tag(4, LEN), 8, 0, 0, 0, 0, 0, 0, 0, 0];
            id[2..].copy_from_slice(&parent.to_be_bytes());
            out.put(&id);
        }
        out.string(5, fields.name.as_bytes());
        let kind = match span.kind {
            SpanKind::Internal => 1,
            SpanKind::Server => 2,
            SpanKind::Client => 3,
        };
        out.put(&[tag(6, VARINT), kind]);
        out.fixed64(7, span.start);
        out.fixed64(8, span.end);
        for (key, value) in &fields.attributes {
            key_value(out, 9, key, value);
        }
        for event in &fields.events {
            out.field(tag(11, LEN), event_len(event));
            out.fixed64(1, nanos(event.time));
            out.string(2, event.name.as_bytes());
            for (key, value) in &event.attributes {
                key_value(out, 3, key, value);
            }
        }
        out.field(tag(15, LEN), status);
        if let Some(message) = &fields.error {
            out.string(2, message.as_bytes());
            // Code 2: error.
            out.put(&[tag(3, VARINT), 2]);
        }
        // Field 16 (a two-byte tag): the trace flags (sampled), and whether the parent
        // is remote (with the bit saying it is known).
        let remote = match span.parent {
            Some((_, true)) => 0x300,
            _ => 0x100,
        };
        out.put(&[16 << 3 | FIXED32, 1]);
        out.put(&(1_u32 | remote).to_le_bytes());
    });
}

/// An `Event` message's length.
fn event_len(event: &SpanEvent) -> usize {
    let attributes: usize = (event.attributes.iter())
        .map(|(key, value)| field_len(key_value_len(key, value)))
        .sum();
    9 + string_len(event.name.as_bytes()) + attributes
}

/// An `AnyValue` message's length.
fn any_value_len(value: &Value) -> usize {
    match value {
        // Written even when empty: the value is the empty string.
        Value::String(text) => field_len(text.len()),
        Value::Uuid(_) => field_len(uuid::fmt::Hyphenated::LENGTH),
        Value::Bool(_) => 2,
        // Two's complement, as protobuf's int64.
        Value::Int(number) => 1 + varint_len(*number as u64),
        Value::Float(_) => 9,
    }
}

/// A `KeyValue` message's length.
#[inline]
fn key_value_len(key: &str, value: &Value) -> usize {
    string_len(key.as_bytes()) + field_len(any_value_len(value))
}

/// A `KeyValue` message as field `field`.
fn key_value(out: &mut Cursor<'_>, field: u8, key: &str, value: &Value) {
    out.field(tag(field, LEN), key_value_len(key, value));
    out.string(1, key.as_bytes());
    out.field(tag(2, LEN), any_value_len(value));
    match value {
        Value::String(text) => {
            out.field(tag(1, LEN), text.len());
            out.put(text.as_bytes());
        }
        Value::Uuid(id) => {
            let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
            id.hyphenated().encode_lower(&mut text);
            out.field(tag(1, LEN), text.len());
            out.put(&text);
        }
        Value::Bool(flag) => out.put(&[tag(2, VARINT), u8::from(*flag)]),
        Value::Int(number) => {
            out.put(&[tag(3, VARINT)]);
            out.varint(*number as u64);
        }
        Value::Float(number) => {
            out.put(&[tag(4, FIXED64)]);
            out.put(&number.to_le_bytes());
        }
    }
}

/// The `Resource` message's fields: `service.name` (`OTEL_SERVICE_NAME`, else the
/// one in `OTEL_RESOURCE_ATTRIBUTES`, else `service-server`), the
/// `OTEL_RESOURCE_ATTRIBUTES` (`key=value,...`), and what wrote the spans.
fn resource(var: impl Fn(&str) -> Option<String>) -> Vec<u8> {
    let mut attributes: Vec<(String, String)> = vec![
        ("service.name".into(), "service-server".into()),
        ("telemetry.sdk.name".into(), "service-server".into()),
        ("telemetry.sdk.language".into(), "rust".into()),
        (
            "telemetry.sdk.version".into(),
            env!("CARGO_PKG_VERSION").into(),
        ),
    ];
    let listed = var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    let named = var("OTEL_SERVICE_NAME").map(|name| ("service.name", name));
    let pairs = listed.split_terminator(',').filter_map(|entry| {
        let (key, value) = entry.split_once('=')?;
        Some((key.trim(), value.trim().to_owned()))
    });
    for (key, value) in pairs.chain(named) {
        match attributes.iter_mut().find(|(name, _)| name == key) {
            Some(existing) => existing.1 = value,
            None => attributes.push((key.to_owned(), value)),
        }
    }
    let mut fields = Vec::new();
    for (key, value) in &attributes {
        let value = Value::String(value.clone().into());
        append(&mut fields, field_len(key_value_len(key, &value)), |out| {
            key_value(out, 1, key, &value)
        });
    }
    fields
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{
        AnyValue, InstrumentationScope, KeyValue as ProtoKeyValue, any_value,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource as ProtoResource;
    use opentelemetry_proto::tonic::trace::v1::{
        ResourceSpans, ScopeSpans, Span as ProtoSpan, Status as ProtoStatus, span,
    };
    use prost::Message;
    use service_graph::trace_context::{SpanContext, SpanEvent, SpanFields};

    use super::*;

    fn fields(error: Option<&str>) -> SpanFields {
        SpanFields {
            name: Cow::Borrowed("POST /runs/wait"),
            attributes: vec![
                ("url.path", "/runs/wait".into()),
                ("http.response.status_code", 200_i64.into()),
                ("empty", "".into()),
                // Longer than a one-byte length.
                ("long", "x".repeat(300).into()),
                ("flag", true.into()),
                ("ratio", 0.5.into()),
                ("negative", (-3_i64).into()),
                (
                    "run_id",
                    uuid::Uuid::from_u128(0x0192_0c7e_8a4b_7c3d_9e2f_0a1b_2c3d_4e5f).into(),
                ),
            ],
            events: vec![SpanEvent {
                time: SystemTime::UNIX_EPOCH + Duration::from_millis(1500),
                name: "the store is slow".to_owned(),
                attributes: vec![("level", "WARN".into())],
            }],
            error: error.map(str::to_owned),
        }
    }

    fn ended(parent: Option<(u64, bool)>, fields: &SpanFields) -> Ended<'_> {
        Ended {
            context: SpanContext {
                trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
                span_id: 0x00f0_67aa_0ba9_02b7,
                sampled: true,
            },
            parent,
            kind: SpanKind::Server,
            start: 1_000_000_000,
            end: 2_000_000_000,
            fields,
        }
    }

    fn text(value: &str) -> Option<AnyValue> {
        Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        })
    }

    fn attribute(key: &str, value: any_value::Value) -> ProtoKeyValue {
        ProtoKeyValue {
            key: key.to_owned(),
            value: Some(AnyValue { value: Some(value) }),
            ..ProtoKeyValue::default()
        }
    }

    /// The span `recording` makes, as the OTLP project's generated types hold it.
    fn expected(parent: &[u8], flags: u32, status: ProtoStatus) -> ProtoSpan {
        use any_value::Value::*;
        ProtoSpan {
            trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736_u128
                .to_be_bytes()
                .to_vec(),
            span_id: 0x00f0_67aa_0ba9_02b7_u64.to_be_bytes().to_vec(),
            parent_span_id: parent.to_vec(),
            name: "POST /runs/wait".to_owned(),
            kind: span::SpanKind::Server as i32,
            start_time_unix_nano: 1_000_000_000,
            end_time_unix_nano: 2_000_000_000,
            attributes: vec![
                attribute("url.path", StringValue("/runs/wait".to_owned())),
                attribute("http.response.status_code", IntValue(200)),
                attribute("empty", StringValue(String::new())),
                attribute("long", StringValue("x".repeat(300))),
                attribute("flag", BoolValue(true)),
                attribute("ratio", DoubleValue(0.5)),
                attribute("negative", IntValue(-3)),
                attribute(
                    "run_id",
                    StringValue("01920c7e-8a4b-7c3d-9e2f-0a1b2c3d4e5f".to_owned()),
                ),
            ],
            events: vec![span::Event {
                time_unix_nano: 1_500_000_000,
                name: "the store is slow".to_owned(),
                attributes: vec![ProtoKeyValue {
                    key: "level".to_owned(),
                    value: text("WARN"),
                    ..ProtoKeyValue::default()
                }],
                dropped_attributes_count: 0,
            }],
            status: Some(status),
            flags,
            ..ProtoSpan::default()
        }
    }

    /// What the exporter sends decodes, with the OTLP project's generated types, to
    /// the spans and resource it was given.
    #[test]
    fn a_batch_decodes_as_the_spans_it_was_given() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let exporter = Exporter::from_vars(|name| match name {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://collector:4318".to_owned()),
            "OTEL_SERVICE_NAME" => Some("agents".to_owned()),
            _ => None,
        })
        .unwrap();
        let spans = Spans::new(BatchSettings::from_vars(|_| None), exporter.head_room());
        let (succeeded, failed) = (fields(None), fields(Some("failed")));
        for span in [
            ended(Some((0x1111_2222_3333_4444, true)), &succeeded),
            ended(None, &failed),
            ended(Some((0x5555, false)), &succeeded),
        ] {
            spans.push(|out| write_span(out, &span));
        }
        let (mut batches, dropped) = spans.take_round(true);
        assert_eq!((batches.len(), dropped), (1, 0));
        assert_eq!(spans.take_round(true), (vec![], 0));
        let batch = batches.remove(0);
        let ours = ExportTraceServiceRequest::decode(exporter.body(batch)).unwrap();
        let status = |code: i32, message: &str| ProtoStatus {
            code,
            message: message.to_owned(),
        };
        assert_eq!(
            ours,
            ExportTraceServiceRequest {
                resource_spans: vec![ResourceSpans {
                    resource: Some(ProtoResource {
                        attributes: vec![
                            attribute(
                                "service.name",
                                any_value::Value::StringValue("agents".to_owned())
                            ),
                            attribute(
                                "telemetry.sdk.name",
                                any_value::Value::StringValue("service-server".to_owned())
                            ),
                            attribute(
                                "telemetry.sdk.language",
                                any_value::Value::StringValue("rust".to_owned())
                            ),
                            attribute(
                                "telemetry.sdk.version",
                                any_value::Value::StringValue(env!("CARGO_PKG_VERSION").to_owned()),
                            ),
                        ],
                        ..ProtoResource::default()
                    }),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(InstrumentationScope {
                            name: "service-server".to_owned(),
                            ..InstrumentationScope::default()
                        }),
                        spans: vec![
                            expected(
                                &0x1111_2222_3333_4444_u64.to_be_bytes(),
                                0x301,
                                status(0, "")
                            ),
                            expected(&[], 0x101, status(2, "failed")),
                            expected(&0x5555_u64.to_be_bytes(), 0x101, status(0, "")),
                        ],
                        schema_url: String::new(),
                    }],
                    schema_url: String::new(),
                }],
            }
        );
    }

    /// A full queue drops spans (and says how many), a full batch is posted alone.
    #[test]
    fn spans_are_batched_and_dropped_beyond_the_queue() {
        let settings = BatchSettings::from_vars(|name| match name {
            "OTEL_BSP_MAX_QUEUE_SIZE" => Some("3".to_owned()),
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" => Some("2".to_owned()),
            _ => None,
        });
        let spans = Spans::new(settings, 0);
        let span =
            |name: &'static str| move |out: &mut Vec<u8>| out.extend_from_slice(name.as_bytes());
        for name in ["a", "b", "c", "d"] {
            spans.push(span(name));
        }
        // Only the full batch, unless the round is due.
        assert_eq!(spans.take_round(false), (vec![b"ab".to_vec()], 1));
        assert_eq!(spans.take_round(false), (vec![], 0));
        spans.push(span("e"));
        spans.push(span("f"));
        // A due round takes the full batch and the one being filled, once: a span that
        // ends while it posts waits for the next round.
        assert_eq!(
            spans.take_round(true),
            (vec![b"ce".to_vec(), b"f".to_vec()], 0)
        );
        spans.push(span("g"));
        assert_eq!(spans.take_round(false), (vec![], 0));
        assert_eq!(spans.take_round(true), (vec![b"g".to_vec()], 0));
    }

    /// Unset variables give the documented defaults (docs/operations.md); a queue
    /// smaller than a batch bounds the batch too.
    #[test]
    fn batches_default_to_8192_spans_in_a_queue_of_32768() {
        let defaults = BatchSettings::from_vars(|_| None);
        assert_eq!(
            (defaults.delay, defaults.max_batch, defaults.max_queue),
            (Duration::from_secs(5), 8192, 32_768)
        );
        let small_queue = BatchSettings::from_vars(|name| {
            (name == "OTEL_BSP_MAX_QUEUE_SIZE").then(|| "100".to_owned())
        });
        assert_eq!((small_queue.max_batch, small_queue.max_queue), (100, 100));
    }

    #[test]
    fn the_endpoint_and_headers_come_from_the_otlp_variables() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        let base = Exporter::from_vars(vars(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://collector:4318/",
        )]))
        .unwrap();
        assert_eq!(base.endpoint, "http://collector:4318/v1/traces");
        let own = Exporter::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://traces:9000/in",
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=general,x-team=a%20b"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "api-key=traces, bad header=x",
            ),
        ]))
        .unwrap();
        assert_eq!(own.endpoint, "http://traces:9000/in");
        assert_eq!(own.headers["api-key"], "traces");
        assert_eq!(own.headers["x-team"], "a b");
        assert_eq!(own.headers[CONTENT_TYPE], "application/x-protobuf");
        assert!(
            Exporter::from_vars(vars(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url")]))
                .is_err()
        );
    }
}
