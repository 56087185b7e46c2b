//! The OTLP HTTP/protobuf exporter: each batch written straight into protobuf as one
//! resource and one scope (every span is the server's), in place of a per-span
//! grouping and conversion into generated message types (docs/performance.md §17),
//! and posted with the workspace's reqwest (rustls on ring), not a second HTTP stack.
//! The SDK's batch processor exports from a thread of its own, so each POST is handed
//! to the server's tokio runtime and awaited from there.

use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, Key, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::runtime::Handle;

/// How long one export may take unless `OTEL_EXPORTER_OTLP_TIMEOUT` says (OTLP's
/// default).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct Exporter {
    client: reqwest::Client,
    runtime: Handle,
    endpoint: String,
    headers: HeaderMap,
    /// The resource, as the `Resource` message's fields.
    resource: Vec<u8>,
    schema_url: Option<String>,
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
            runtime: Handle::current(),
            endpoint,
            headers,
            resource: Vec::new(),
            schema_url: None,
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

impl SpanExporter for Exporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let body = encode(&self.resource, self.schema_url.as_deref(), &batch);
        let request = self
            .client
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .body(body);
        let sent = self.runtime.spawn(async move {
            let response = request.send().await?;
            let status = response.status();
            // Read to the end, so the connection is kept for the next export.
            response.bytes().await?;
            Ok::<_, reqwest::Error>(status)
        });
        match sent.await {
            Ok(Ok(status)) if status.is_success() => Ok(()),
            Ok(Ok(status)) => Err(OTelSdkError::InternalFailure(format!(
                "the collector answered {status}"
            ))),
            Ok(Err(error)) => Err(OTelSdkError::InternalFailure(error.to_string())),
            Err(error) => Err(OTelSdkError::InternalFailure(error.to_string())),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        let mut fields = Vec::new();
        for (key, value) in resource.iter() {
            nested(&mut fields, 1, |out| key_value(out, key, value));
        }
        self.resource = fields;
        self.schema_url = resource.schema_url().map(str::to_owned);
    }
}

/// An `ExportTraceServiceRequest` of `spans`, all of one scope, under `resource`.
fn encode(resource: &[u8], schema_url: Option<&str>, spans: &[SpanData]) -> Vec<u8> {
    let mut encoded = Vec::with_capacity(spans.len() * 256);
    for span in spans {
        nested(&mut encoded, 2, |out| write_span(out, span));
    }
    let mut scope = Vec::new();
    if let Some(first) = spans.first() {
        let first = &first.instrumentation_scope;
        nested(&mut scope, 1, |out| {
            string(out, 1, first.name());
            string(out, 2, first.version().unwrap_or_default());
        });
    }
    // ResourceSpans: the resource, one ScopeSpans (its scope, then the spans).
    let mut head = Vec::with_capacity(resource.len() + scope.len() + 32);
    tag(&mut head, 1, LEN);
    varint(&mut head, resource.len() as u64);
    head.extend_from_slice(resource);
    tag(&mut head, 2, LEN);
    varint(&mut head, (scope.len() + encoded.len()) as u64);
    head.extend_from_slice(&scope);
    let mut tail = Vec::new();
    string(&mut tail, 3, schema_url.unwrap_or_default());
    let mut body = Vec::with_capacity(head.len() + encoded.len() + tail.len() + 8);
    tag(&mut body, 1, LEN);
    varint(&mut body, (head.len() + encoded.len() + tail.len()) as u64);
    body.extend_from_slice(&head);
    body.extend_from_slice(&encoded);
    body.extend_from_slice(&tail);
    body
}

/// A `Span` message's fields.
fn write_span(out: &mut Vec<u8>, span: &SpanData) {
    let context = &span.span_context;
    bytes(out, 1, &context.trace_id().to_bytes());
    bytes(out, 2, &context.span_id().to_bytes());
    string(out, 3, &context.trace_state().header());
    if span.parent_span_id != opentelemetry::trace::SpanId::INVALID {
        bytes(out, 4, &span.parent_span_id.to_bytes());
    }
    string(out, 5, &span.name);
    let kind = match span.span_kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    };
    tag(out, 6, VARINT);
    varint(out, kind);
    fixed64(out, 7, nanos(span.start_time));
    fixed64(out, 8, nanos(span.end_time));
    for attribute in &span.attributes {
        nested(out, 9, |out| {
            key_value(out, &attribute.key, &attribute.value)
        });
    }
    uint(out, 10, span.dropped_attributes_count.into());
    for event in span.events.iter() {
        nested(out, 11, |out| {
            fixed64(out, 1, nanos(event.timestamp));
            string(out, 2, &event.name);
            for KeyValue { key, value, .. } in &event.attributes {
                nested(out, 3, |out| key_value(out, key, value));
            }
            uint(out, 4, event.dropped_attributes_count.into());
        });
    }
    uint(out, 12, span.events.dropped_count.into());
    uint(out, 14, span.links.dropped_count.into());
    nested(out, 15, |out| {
        let (code, message) = match &span.status {
            Status::Unset => (0, ""),
            Status::Ok => (1, ""),
            Status::Error { description } => (2, description.as_ref()),
        };
        string(out, 2, message);
        uint(out, 3, code);
    });
    // The trace flags, and whether the parent is remote (with the bit saying it is
    // known).
    let remote = if span.parent_span_is_remote {
        0x300
    } else {
        0x100
    };
    tag(out, 16, FIXED32);
    out.extend_from_slice(&(u32::from(context.trace_flags().to_u8()) | remote).to_le_bytes());
}

/// A `KeyValue` message's fields.
fn key_value(out: &mut Vec<u8>, key: &Key, value: &Value) {
    string(out, 1, key.as_str());
    nested(out, 2, |out| any_value(out, value));
}

/// An `AnyValue` message's fields.
fn any_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(text) => {
            // Written even when empty: the value is the empty string.
            tag(out, 1, LEN);
            varint(out, text.as_str().len() as u64);
            out.extend_from_slice(text.as_str().as_bytes());
        }
        Value::Bool(flag) => {
            tag(out, 2, VARINT);
            varint(out, u64::from(*flag));
        }
        Value::I64(number) => {
            tag(out, 3, VARINT);
            // Two's complement, as protobuf's int64.
            varint(out, *number as u64);
        }
        Value::F64(number) => {
            tag(out, 4, FIXED64);
            out.extend_from_slice(&number.to_le_bytes());
        }
        Value::Array(array) => nested(out, 5, |out| {
            let mut each = |value: Value| nested(out, 1, |out| any_value(out, &value));
            match array {
                Array::Bool(values) => values.iter().for_each(|v| each(Value::Bool(*v))),
                Array::I64(values) => values.iter().for_each(|v| each(Value::I64(*v))),
                Array::F64(values) => values.iter().for_each(|v| each(Value::F64(*v))),
                Array::String(values) => values.iter().for_each(|v| each(Value::String(v.clone()))),
                _ => {}
            }
        }),
        _ => {}
    }
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field << 3 | u32::from(wire)));
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A length-delimited field whose content `write` appends; its length is put in
/// front once known (one byte kept for it, the content moved when it needs more).
fn nested(out: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    tag(out, field, LEN);
    let start = out.len();
    out.push(0);
    write(out);
    let length = out.len() - start - 1;
    if length < 0x80 {
        out[start] = length as u8;
        return;
    }
    let mut prefix = Vec::with_capacity(10);
    varint(&mut prefix, length as u64);
    let extra = prefix.len() - 1;
    out.resize(out.len() + extra, 0);
    out.copy_within(start + 1..start + 1 + length, start + prefix.len());
    out[start..start + prefix.len()].copy_from_slice(&prefix);
}

/// A string field, left out when empty (proto3's default).
fn string(out: &mut Vec<u8>, field: u32, text: &str) {
    bytes(out, field, text.as_bytes());
}

/// A bytes field, left out when empty.
fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    if !value.is_empty() {
        tag(out, field, LEN);
        varint(out, value.len() as u64);
        out.extend_from_slice(value);
    }
}

/// A varint field, left out when zero.
fn uint(out: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        tag(out, field, VARINT);
        varint(out, value);
    }
}

fn fixed64(out: &mut Vec<u8>, field: u32, value: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&value.to_le_bytes());
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

    use opentelemetry::InstrumentationScope;
    use opentelemetry::trace::{Event, SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message;

    use super::*;

    fn span(parent: SpanId, remote: bool, status: Status) -> SpanData {
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            "the store is slow",
            SystemTime::UNIX_EPOCH + Duration::from_millis(1500),
            vec![KeyValue::new("level", "WARN")],
            0,
        ));
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736),
                SpanId::from(0x00f0_67aa_0ba9_02b7),
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: parent,
            parent_span_is_remote: remote,
            span_kind: SpanKind::Server,
            name: Cow::Borrowed("POST /runs/wait"),
            start_time: SystemTime::UNIX_EPOCH + Duration::from_millis(1000),
            end_time: SystemTime::UNIX_EPOCH + Duration::from_millis(2000),
            attributes: vec![
                KeyValue::new("url.path", "/runs/wait"),
                KeyValue::new("http.response.status_code", 200),
                KeyValue::new("empty", ""),
                // Longer than a one-byte length.
                KeyValue::new("long", "x".repeat(300)),
                KeyValue::new("flag", true),
                KeyValue::new("ratio", 0.5),
                KeyValue::new("negative", -3),
                KeyValue::new(
                    "list",
                    Value::Array(Array::String(vec!["a".into(), "b".into()])),
                ),
            ],
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status,
            instrumentation_scope: InstrumentationScope::builder("service-server").build(),
        }
    }

    /// What the exporter sends decodes to what the OTLP project's own conversion
    /// makes of the same spans.
    #[test]
    fn a_batch_encodes_as_the_otlp_conversion_does() {
        let resource = Resource::builder_empty()
            .with_attributes([
                KeyValue::new("service.name", "agents"),
                KeyValue::new("deployment", "test"),
            ])
            .build();
        let spans = vec![
            span(SpanId::from(0x1111_2222_3333_4444), true, Status::Unset),
            span(SpanId::INVALID, false, Status::error("failed")),
            span(SpanId::from(0x5555), false, Status::Ok),
        ];
        let mut resource_fields = Vec::new();
        for (key, value) in resource.iter() {
            nested(&mut resource_fields, 1, |out| key_value(out, key, value));
        }
        let ours =
            ExportTraceServiceRequest::decode(encode(&resource_fields, None, &spans).as_slice())
                .unwrap();
        let expected = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans,
                &ResourceAttributesWithSchema::from(&resource),
            ),
        };
        assert_eq!(ours, expected);
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
