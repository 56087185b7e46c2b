//! A program serving its own graphs through `Server` hands it a logger, a telemetry
//! sink and a webhook dispatcher: the logger gets the boot's reports (a Rust graph
//! that cannot load, the signed custom dispatcher) and each failed run's report, the
//! sink each run's end, and the graphs that load keep serving.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use service_engine::telemetry::{LOAD_FAILURE_TARGET, RunEvent, RunFinished, TelemetrySink};
use service_graph::{Checkpointer, GraphError, GraphRegistry};
use service_server::{Logger, Mode, ServeArgs, Server};
use service_types::{GraphSchema, RunError};
use service_webhooks::{Attempt, AttemptError, Dispatcher};
use support::{ConfigFile, call_at};

#[derive(Clone, Debug)]
struct Logged {
    level: &'static str,
    message: String,
    meta: Map<String, Value>,
}

/// A logger that keeps what it is told.
#[derive(Default)]
struct Capture {
    events: Mutex<Vec<Logged>>,
}

impl Capture {
    fn keep(&self, level: &'static str, message: &str, meta: &Map<String, Value>) {
        self.events.lock().unwrap().push(Logged {
            level,
            message: message.to_owned(),
            meta: meta.clone(),
        });
    }

    /// The first event `wanted` picks, within 30 s.
    fn find(&self, wanted: impl Fn(&Logged) -> bool) -> Logged {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(found) = self.events.lock().unwrap().iter().find(|e| wanted(e)) {
                return found.clone();
            }
            assert!(
                Instant::now() < deadline,
                "not logged within 30 s: {:#?}",
                self.events.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Logger for Capture {
    fn info(&self, message: &str, meta: &Map<String, Value>) {
        self.keep("info", message, meta);
    }
    fn warn(&self, message: &str, meta: &Map<String, Value>) {
        self.keep("warn", message, meta);
    }
    fn error(&self, message: &str, meta: &Map<String, Value>) {
        self.keep("error", message, meta);
    }
}

#[derive(Default)]
struct Sink {
    finished: Mutex<Vec<RunFinished>>,
}

impl TelemetrySink for Sink {
    fn name(&self) -> &str {
        "test"
    }
    fn on_run_event(&self, event: &RunEvent) {
        if let RunEvent::Finished(finished) = event {
            self.finished.lock().unwrap().push(finished.clone());
        }
    }
}

/// Accepts every attempt.
#[derive(Debug)]
struct Accepting;

#[async_trait::async_trait]
impl Dispatcher for Accepting {
    async fn post(&self, _: Attempt) -> Result<(), AttemptError> {
        Ok(())
    }
}

/// The example graphs and `broken`, whose loader fails.
fn graphs(checkpointer: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
    let mut registry = service_example_graphs::registry(checkpointer)?;
    registry.register(
        "broken",
        GraphSchema::default(),
        Arc::new(|| {
            Box::pin(async {
                Err(RunError::new("ConfigError", "OPENAI_API_KEY is not set").into())
            })
        }),
    );
    Ok(registry)
}

#[test]
fn an_injected_logger_gets_the_boot_reports_and_failed_runs_and_a_sink_each_run() {
    let config = ConfigFile::write(
        "embedded-logging",
        &json!({"service": {"webhooks": {"secret": "key-1"}}}),
    );
    let logger = Arc::new(Capture::default());
    let sink = Arc::new(Sink::default());
    // The injected logger wins over `without_logger`, whatever the order.
    let server = Server::new(graphs)
        .logger(logger.clone())
        .without_logger()
        .webhook_dispatcher(Arc::new(Accepting))
        .telemetry_sink(sink.clone());
    let args = ServeArgs {
        port: Some(0),
        config: Some(config.0.clone()),
        ..ServeArgs::default()
    };
    // Serves until the test process ends.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(server.run(Mode::Dev, args)).unwrap();
    });
    let listening = logger.find(|e| e.message.starts_with("listening on http://"));
    let address = listening.message["listening on http://".len()..].to_owned();

    let load = logger.find(|e| e.meta["target"] == LOAD_FAILURE_TARGET);
    assert_eq!(load.level, "error");
    assert_eq!(load.meta["graph_id"], "broken");
    assert!(
        load.meta["error"]
            .as_str()
            .unwrap()
            .contains("OPENAI_API_KEY is not set"),
        "{load:?}"
    );
    let warning = logger.find(|e| e.message.contains("custom dispatcher"));
    assert_eq!(warning.level, "warn");

    // The other graphs serve: a failed run is reported with its node and stack.
    let thread = call_at(&address, "POST", "/threads", &[], Some(json!({}))).body;
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let answer = call_at(
        &address,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &[],
        Some(json!({"assistant_id": "fail", "input": {"messages": []}})),
    );
    assert_eq!(answer.body["__error__"]["message"], "boom", "{answer:?}");
    let failed = logger.find(|e| e.message == "run failed");
    assert_eq!(failed.level, "error");
    assert_eq!(failed.meta["thread_id"], thread_id.as_str());
    assert_eq!(failed.meta["node"], "explode");
    assert_eq!(failed.meta["cause"], "RuntimeError: root cause");
    assert!(
        failed.meta["stack"]
            .as_str()
            .unwrap()
            .starts_with("ValueError: boom"),
        "{failed:?}"
    );
    let run_id = failed.meta["run_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    let finished = loop {
        let found = sink
            .finished
            .lock()
            .unwrap()
            .iter()
            .find(|event| event.run_id.to_string() == run_id)
            .cloned();
        if let Some(found) = found {
            break found;
        }
        assert!(Instant::now() < deadline, "the sink got no run.finished");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(finished.node.as_deref(), Some("explode"));
    assert!(finished.original.unwrap().stack.is_some());
}
