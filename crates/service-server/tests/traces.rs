//! OpenTelemetry traces through the binary: with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing
//! at an OTLP receiver in this test (POST /v1/traces, protobuf), one request carrying a
//! `traceparent` yields one trace: the request's span (a child of the caller's), the
//! run created in it and executed later by a worker, the store and checkpointer calls,
//! the graph's nodes (Python, and LangGraph.js), and the webhook delivery, whose POST
//! carries the trace on, also when retried from the outbox; a trace the caller did
//! not sample exports nothing, yet its webhook carries its context on; a protocol
//! WebSocket's commands and their runs are in its upgrade request's trace.
//! The reference graphs (`examples/python-graphs`) run on the interpreter
//! SERVICE_PYTHON (scripts/test makes a virtual environment with LangGraph), in memory
//! and on PostgreSQL (TEST_DATABASE_URL), where the run's context is read back from
//! its row.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use serde_json::json;
use support::{call, request, spawn};

/// A span as exported, with the ids as hex.
#[derive(Clone, Debug)]
struct Exported {
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: HashMap<String, String>,
    service_name: String,
    /// Start and end, in nanoseconds since the Unix epoch.
    times: (u64, u64),
}

/// What the receiver was sent: spans, and the headers of each webhook POST (to
/// `/hook`, and to `/flaky`, which refuses the first).
#[derive(Default)]
struct Received {
    spans: Vec<Exported>,
    webhooks: Vec<HeaderMap>,
    flaky: Vec<HeaderMap>,
}

type Shared = Arc<Mutex<Received>>;

fn unix_nanos() -> u64 {
    let since = std::time::UNIX_EPOCH.elapsed().unwrap();
    u64::try_from(since.as_nanos()).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn text(value: Option<&AnyValue>) -> String {
    match value {
        Some(AnyValue::StringValue(text)) => text.clone(),
        Some(AnyValue::IntValue(number)) => number.to_string(),
        Some(AnyValue::BoolValue(flag)) => flag.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

async fn traces(State(received): State<Shared>, body: Bytes) -> &'static str {
    let export = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    let mut received = received.lock().unwrap();
    for resource in export.resource_spans {
        let service_name = resource
            .resource
            .iter()
            .flat_map(|resource| &resource.attributes)
            .find(|attribute| attribute.key == "service.name")
            .map(|attribute| text(attribute.value.as_ref().and_then(|v| v.value.as_ref())))
            .unwrap_or_default();
        for span in resource
            .scope_spans
            .into_iter()
            .flat_map(|scope| scope.spans)
        {
            received.spans.push(Exported {
                name: span.name,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                attributes: span
                    .attributes
                    .iter()
                    .map(|attribute| {
                        let value = attribute.value.as_ref().and_then(|v| v.value.as_ref());
                        (attribute.key.clone(), text(value))
                    })
                    .collect(),
                service_name: service_name.clone(),
                times: (span.start_time_unix_nano, span.end_time_unix_nano),
            });
        }
    }
    ""
}

async fn webhook(State(received): State<Shared>, headers: HeaderMap) -> &'static str {
    received.lock().unwrap().webhooks.push(headers);
    ""
}

async fn flaky(State(received): State<Shared>, headers: HeaderMap) -> StatusCode {
    let mut received = received.lock().unwrap();
    received.flaky.push(headers);
    match received.flaky.len() {
        1 => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::OK,
    }
}

/// The receiver, on a runtime of its own; its base URL.
fn receiver(received: Shared) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let app = Router::new()
                .route("/v1/traces", post(traces))
                .route("/hook", post(webhook))
                .route("/flaky", post(flaky))
                .with_state(received);
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    url
}

/// What was received once `done` holds for it (bounded: a minute).
fn received_when(received: &Shared, done: impl Fn(&Received) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&received.lock().unwrap()) {
        let now = received.lock().unwrap();
        assert!(
            Instant::now() < deadline,
            "not received in time; spans: {:#?}, flaky {}, hooks {}",
            now.spans,
            now.flaky.len(),
            now.webhooks.len()
        );
        drop(now);
        std::thread::sleep(Duration::from_millis(50));
    }
}

const PYTHON_GRAPHS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/python-graphs/langgraph.json"
);

#[test]
fn in_memory_one_trace_spans_the_request_its_run_store_calls_python_nodes_and_webhook() {
    one_trace(PYTHON_GRAPHS, None);
}

#[test]
fn on_postgres_one_trace_spans_the_request_its_run_store_calls_python_nodes_and_webhook() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let database = runtime.block_on(support::Database::create("traces"));
    one_trace(PYTHON_GRAPHS, Some(&database.url()));
    runtime.block_on(database.drop());
}

/// The same graph in LangGraph.js (`examples/js-graphs`, `npm ci` there first): the
/// Node workers report their nodes alike.
#[test]
fn a_js_graphs_nodes_are_spans_of_the_run_too() {
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/js-graphs/langgraph.json"
    );
    one_trace(config, None);
}

/// A traced request's run of the `steps` graph `config` serves, on the binary: `dev`,
/// or `start` on `database_url`.
fn one_trace(config: &str, database_url: Option<&str>) {
    let python = std::env::var("SERVICE_PYTHON").expect(
        "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)",
    );
    let received = Shared::default();
    let url = receiver(Arc::clone(&received));
    let mut env = vec![
        ("SERVICE_PYTHON", python.as_str()),
        ("SERVICE_PYTHON_WORKERS", "1"),
        ("SERVICE_NODE_WORKERS", "1"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
        ("OTEL_SERVICE_NAME", "traces-test"),
        // Exported every 100 ms rather than every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let mode = match database_url {
        Some(database_url) => {
            env.push(("DATABASE_URL", database_url));
            "start"
        }
        None => "dev",
    };
    let server = spawn(&[mode, "--port", "0", "--config", config], &env);
    let began = unix_nanos();
    let thread = request(&server, "POST", "/threads", Some(json!({})));
    let thread_id = thread["thread_id"].as_str().unwrap();

    // The caller's own span, which the request's span must be a child of.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{caller_span}-01");
    let answer = call(
        &server,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &[("traceparent", &traceparent)],
        Some(json!({
            "assistant_id": "steps",
            "input": {"n": 2},
            "webhook": format!("{url}/hook"),
        })),
    );
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert_eq!(answer.body["count"], 2, "{:?}", answer.body);

    let in_trace = |received: &Received| -> Vec<Exported> {
        received
            .spans
            .iter()
            .filter(|span| span.trace_id == trace_id)
            .cloned()
            .collect()
    };
    received_when(&received, |received| {
        let spans = in_trace(received);
        !received.webhooks.is_empty()
            && spans.iter().any(|span| span.name == "webhook.deliver")
            && spans.iter().filter(|span| span.name == "node step").count() == 2
            && spans.iter().any(|span| span.name.starts_with("POST "))
    });
    let received = received.lock().unwrap();
    let spans = in_trace(&received);
    // Each span's times are the wall clock's, and it ends after it starts.
    let ended = unix_nanos();
    for span in &spans {
        let (start, end) = span.times;
        assert!(began <= start && start <= end && end <= ended, "{span:?}");
    }
    let named = |name: &str| -> &Exported {
        spans
            .iter()
            .find(|span| span.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
    };
    let by_id: HashMap<&str, &Exported> = spans
        .iter()
        .map(|span| (span.span_id.as_str(), span))
        .collect();
    // Whether `ancestor` is `span`'s parent, or its parent's, and so on.
    let descends = |span: &Exported, ancestor: &Exported| {
        let mut at = span;
        while let Some(parent) = by_id.get(at.parent_span_id.as_str()) {
            if parent.span_id == ancestor.span_id {
                return true;
            }
            at = parent;
        }
        false
    };

    let request_span = named("POST /threads/{thread_id}/runs/wait");
    assert_eq!(request_span.parent_span_id, caller_span);
    assert_eq!(
        request_span
            .attributes
            .get("http.route")
            .map(String::as_str),
        Some("/threads/{thread_id}/runs/wait")
    );
    assert_eq!(
        request_span
            .attributes
            .get("http.response.status_code")
            .map(String::as_str),
        Some("200")
    );
    assert_eq!(request_span.service_name, "traces-test");

    let create = named("run.create");
    assert!(descends(create, request_span), "{spans:#?}");
    assert!(
        spans
            .iter()
            .any(|span| span.name.starts_with("store.runs.") && descends(span, request_span)),
        "the run's insert is a store call of the request: {spans:#?}"
    );

    // Executed by a worker task, after the request's trace context was stored with it.
    let run = named("run");
    assert!(descends(run, request_span), "{spans:#?}");
    assert_eq!(
        run.attributes.get("thread_id").map(String::as_str),
        Some(thread_id)
    );
    assert_eq!(
        run.attributes.get("graph_id").map(String::as_str),
        Some("steps")
    );
    let nodes: Vec<&Exported> = spans.iter().filter(|s| s.name == "node step").collect();
    for node in &nodes {
        assert!(descends(node, run), "{spans:#?}");
        assert_eq!(
            node.attributes.get("langgraph.node").map(String::as_str),
            Some("step")
        );
    }
    // The Python worker's checkpoint writes come back to the server's saver, in the run.
    assert!(
        spans
            .iter()
            .any(|span| span.name.starts_with("checkpoint.put") && descends(span, run)),
        "{spans:#?}"
    );
    assert!(
        spans
            .iter()
            .any(|span| span.name.starts_with("store.runs.settle") && descends(span, run)),
        "{spans:#?}"
    );

    // The webhook's POST names the delivery's span, so the receiver continues the trace.
    let delivery = named("webhook.deliver");
    assert!(descends(delivery, run), "{spans:#?}");
    let sent = received.webhooks[0]
        .get("traceparent")
        .expect("the webhook carries a traceparent")
        .to_str()
        .unwrap();
    assert_eq!(sent, format!("00-{trace_id}-{}-01", delivery.span_id));

    // The context is stored beside the run: the kwargs clients read hold none.
    let run_id = run.attributes.get("run_id").expect("the run's id");
    let stored = request(
        &server,
        "GET",
        &format!("/threads/{thread_id}/runs/{run_id}"),
        None,
    );
    assert_eq!(stored["run_id"], run_id.as_str());
    assert!(stored["kwargs"].get("traceparent").is_none(), "{stored}");
}

/// The built-in `echo` graph (no Python): a webhook retried from the outbox continues
/// the trace its run was created in, and a trace the caller did not sample exports no
/// span while its webhook still carries its context (sampled flag off).
#[test]
fn a_webhook_retry_continues_the_trace_and_an_unsampled_trace_exports_nothing() {
    let received = Shared::default();
    let url = receiver(Arc::clone(&received));
    let config = support::ConfigFile::write(
        "traces-retry",
        &json!({"service": {"webhooks": {"retries": {"initial_delay_ms": 50}}}}),
    );
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let server = spawn(
        &[
            "dev",
            "--port",
            "0",
            "--no-console",
            "--config",
            &config.path(),
        ],
        &env,
    );
    let wait = |path: &str, traceparent: &str, hook: &str| {
        let answer = call(
            &server,
            "POST",
            path,
            &[("traceparent", traceparent)],
            Some(json!({
                "assistant_id": "echo",
                "input": {"messages": [{"type": "human", "content": "hi"}]},
                "webhook": format!("{url}/{hook}"),
            })),
        );
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    };

    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    wait(
        "/runs/wait",
        &format!("00-{unsampled}-b7ad6b7169203331-00"),
        "hook",
    );
    // On a thread, so the run (and the context stored with it) outlives its wait.
    let thread = request(&server, "POST", "/threads", Some(json!({})));
    let thread_id = thread["thread_id"].as_str().unwrap();
    let sampled = "4bf92f3577b34da6a3ce929d0e0e4736";
    wait(
        &format!("/threads/{thread_id}/runs/wait"),
        &format!("00-{sampled}-00f067aa0ba902b7-01"),
        "flaky",
    );

    let deliveries = |received: &Received| -> Vec<Exported> {
        received
            .spans
            .iter()
            .filter(|span| span.trace_id == sampled && span.name == "webhook.deliver")
            .cloned()
            .collect()
    };
    received_when(&received, |received| {
        received.flaky.len() >= 2
            && deliveries(received).len() >= 2
            && !received.webhooks.is_empty()
    });
    let received = received.lock().unwrap();
    let by_id: HashMap<&str, &Exported> = received
        .spans
        .iter()
        .map(|span| (span.span_id.as_str(), span))
        .collect();
    let retry = received.flaky[1]
        .get("traceparent")
        .expect("the retry carries a traceparent")
        .to_str()
        .unwrap();
    let span = deliveries(&received)
        .into_iter()
        .find(|span| retry == format!("00-{sampled}-{}-01", span.span_id))
        .unwrap_or_else(|| panic!("no span named by {retry}: {:#?}", received.spans));
    // Within the request's span, which the run was created in.
    let mut at = &span;
    while let Some(parent) = by_id.get(at.parent_span_id.as_str()) {
        at = parent;
    }
    assert_eq!(
        at.name, "POST /threads/{thread_id}/runs/wait",
        "{:#?}",
        received.spans
    );
    assert_eq!(at.parent_span_id, "00f067aa0ba902b7");

    let sent = received.webhooks[0]
        .get("traceparent")
        .expect("an unsampled trace's webhook carries its context")
        .to_str()
        .unwrap();
    assert!(
        sent.starts_with(&format!("00-{unsampled}-")) && sent.ends_with("-00"),
        "{sent}"
    );
    // The sampled trace's spans arrived, and none of the other's.
    assert!(
        received.spans.iter().all(|span| span.trace_id != unsampled),
        "{:#?}",
        received.spans
    );
}

/// A run started by a command on a protocol WebSocket is in the trace of the socket's
/// upgrade request, under the command's own `protocol run.start` span.
#[test]
fn a_protocol_websockets_runs_are_in_its_upgrade_requests_trace() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let received = Shared::default();
    let url = receiver(Arc::clone(&received));
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let server = spawn(&["dev", "--port", "0", "--no-console"], &env);
    let trace_id = "5bf92f3577b34da6a3ce929d0e0e4737";
    let thread = uuid::Uuid::new_v4();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let address = server.address.clone();
        let mut upgrade = format!("ws://{address}/threads/{thread}/stream/events")
            .into_client_request()
            .unwrap();
        let traceparent = format!("00-{trace_id}-00f067aa0ba902b7-01");
        upgrade
            .headers_mut()
            .insert("traceparent", traceparent.parse().unwrap());
        let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let (mut socket, _) = tokio_tungstenite::client_async(upgrade, stream)
            .await
            .unwrap();
        let start = json!({
            "id": 1,
            "method": "run.start",
            "params": {
                "assistant_id": "echo",
                "input": {"messages": [{"type": "human", "content": "hi"}]},
            },
        });
        socket.send(Message::text(start.to_string())).await.unwrap();
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    let answer: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                    if answer["id"] == 1 {
                        assert_eq!(answer["type"], "success", "{answer}");
                        break;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the socket ended: {other:?}"),
            }
        }
    });
    received_when(&received, |received| {
        let traced = |name: &str| {
            received
                .spans
                .iter()
                .any(|span| span.trace_id == trace_id && span.name == name)
        };
        traced("run") && traced("protocol run.start") && traced("run.settle")
    });
    let received = received.lock().unwrap();
    let spans: HashMap<&str, &Exported> = received
        .spans
        .iter()
        .filter(|span| span.trace_id == trace_id)
        .map(|span| (span.span_id.as_str(), span))
        .collect();
    let named = |name: &str| -> &Exported {
        spans
            .values()
            .find(|span| span.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
    };
    let command = named("protocol run.start");
    let upgrade = spans
        .get(command.parent_span_id.as_str())
        .unwrap_or_else(|| panic!("the command's parent is exported: {spans:#?}"));
    assert_eq!(upgrade.name, "GET /threads/{thread_id}/stream/events");
    // The run, executed later by a worker, descends from the command.
    let mut at = named("run");
    while at.span_id != command.span_id {
        at = spans
            .get(at.parent_span_id.as_str())
            .unwrap_or_else(|| panic!("the run descends from the command: {spans:#?}"));
    }
}
