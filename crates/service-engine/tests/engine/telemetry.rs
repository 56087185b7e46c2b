//! Telemetry sinks: every settled run reaches them as `run.finished`; a failed one
//! with its RunError as clients see it, the node that threw and the original error
//! with its full stack, whatever the stack setting.

use service_engine::telemetry::{RunEvent, RunFinished, TelemetrySink};
use service_graph::GraphError;

use crate::support::*;

#[derive(Default)]
struct Recorder {
    events: std::sync::Mutex<Vec<RunFinished>>,
}

impl TelemetrySink for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn on_run_event(&self, event: &RunEvent) {
        assert_eq!(event.kind(), "run.finished");
        let RunEvent::Finished(finished) = event else {
            return;
        };
        self.events.lock().unwrap().push(finished.clone());
    }
}

struct Panicking;

impl TelemetrySink for Panicking {
    fn name(&self) -> &str {
        "panicking"
    }

    fn on_run_event(&self, _: &RunEvent) {
        panic!("a sink's own bug");
    }
}

async fn finished(recorder: &Recorder, run_id: Uuid) -> RunFinished {
    eventually(|| async {
        recorder
            .events
            .lock()
            .unwrap()
            .iter()
            .find(|event| event.run_id == run_id)
            .cloned()
    })
    .await
}

async fn run(engine: &Engine, graph: &str) -> (Run, Value) {
    let thread = new_thread(engine).await;
    let run = unscoped(engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body(
                graph,
                json!({"messages": [{"type": "human", "content": "hi"}]}),
            ),
        )
        .await
        .unwrap();
    let body = result_of(engine, run.run_id).await;
    (run, body)
}

#[tokio::test]
async fn a_sink_receives_each_run_finished_with_the_node_and_the_original_error() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let recorder = Arc::new(Recorder::default());
    // A sink that panics is logged; the others still receive the event.
    engine.add_telemetry_sink(Arc::new(Panicking));
    engine.add_telemetry_sink(recorder.clone());

    let (failed, body) = run(&engine, "fail").await;
    assert!(
        body["__error__"].get("stack").is_none(),
        "stacks are not exposed: {body}"
    );
    let event = finished(&recorder, failed.run_id).await;
    assert_eq!(event.status, RunStatus::Error);
    assert_eq!(event.thread_id, failed.thread_id);
    assert_eq!(event.assistant_id, failed.assistant_id);
    assert_eq!(event.graph_id, "fail");
    assert_eq!(event.node.as_deref(), Some("explode"));
    let error = event.error.expect("the RunError");
    assert_eq!(error.message, "boom");
    assert!(error.stack.is_none(), "as clients see it: {error:?}");
    let original = event.original.expect("the original error");
    assert_eq!(
        original.chain_summary(),
        "ValueError: boom; caused by RuntimeError: root cause"
    );
    let stack = original
        .stack
        .expect("the full stack, whatever the setting");
    assert!(stack.starts_with("ValueError: boom\n    at "), "{stack}");
    assert!(
        matches!(
            event.graph_error.as_deref(),
            Some(GraphError::NodeFailed { node, .. }) if node == "explode"
        ),
        "{:?}",
        event.graph_error
    );

    let (echoed, _) = run(&engine, "echo").await;
    let event = finished(&recorder, echoed.run_id).await;
    assert_eq!(event.status, RunStatus::Success);
    assert!(event.error.is_none() && event.node.is_none() && event.original.is_none());
    assert!(event.frames > 0, "an echo run publishes frames");
}

#[tokio::test]
async fn stacks_reach_clients_once_exposed_after_the_engine_started() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let (hidden, body) = run(&engine, "fail").await;
    assert!(body["__error__"].get("stack").is_none(), "{body}");
    let stored = settled(&engine, &hidden).await.error.unwrap();
    assert!(stored.stack.is_none(), "the run row neither: {stored:?}");

    engine.set_expose_stacks(true);
    let (shown, body) = run(&engine, "fail").await;
    let stack = body["__error__"]["stack"].as_str().unwrap_or_default();
    assert!(stack.starts_with("ValueError: boom\n    at "), "{body}");
    let stored = settled(&engine, &shown).await.error.unwrap();
    assert!(stored.stack.is_some(), "{stored:?}");
}
