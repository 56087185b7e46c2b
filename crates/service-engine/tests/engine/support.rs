//! What every engine test uses: an engine on the in-memory store with the example
//! graphs and an injected clock, and bounded waits for what the engine does.

pub(crate) use std::sync::Arc;
pub(crate) use std::sync::atomic::Ordering::SeqCst;
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize};
pub(crate) use std::time::Duration;

pub(crate) use serde_json::{Value, json};
pub(crate) use service_engine::bus::MemoryBus;
use service_engine::views::View;
pub(crate) use service_engine::{Engine, EngineConfig, EngineParts, RunTarget};
pub(crate) use service_graph::{Checkpointer, InMemorySaver};
pub(crate) use service_store::{Clock, ManualClock};
pub(crate) use service_store_memory::{MemoryOptions, memory_store};
pub(crate) use service_types::{
    CancelAction, CronCreate, IfNotExists, MultitaskStrategy, Run, RunCreate, RunStatus,
    ThreadCreate, ThreadStatus, Timestamp, TtlSetting,
};
pub(crate) use uuid::Uuid;

pub(crate) struct Harness {
    pub(crate) engine: Engine,
    pub(crate) clock: Arc<ManualClock>,
}

pub(crate) fn harness(config: EngineConfig) -> Harness {
    harness_with(config, Arc::new(InMemorySaver::new()))
}

/// An engine on the in-memory store and this checkpointer.
pub(crate) fn harness_with(config: EngineConfig, checkpointer: Arc<dyn Checkpointer>) -> Harness {
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let engine = Engine::new(EngineParts {
        webhooks: None,
        store: memory_store(MemoryOptions::new(dyn_clock.clone())),
        graphs: Box::new(service_example_graphs::registry),
        checkpointer,
        bus: MemoryBus::new(config.bus),
        clock: dyn_clock,
        config,
    })
    .expect("example graphs");
    Harness { engine, clock }
}

pub(crate) async fn started(config: EngineConfig) -> Harness {
    start(harness(config)).await
}

pub(crate) async fn start(harness: Harness) -> Harness {
    harness
        .engine
        .system()
        .ensure_system_assistants()
        .await
        .expect("system assistants");
    harness.engine.start();
    harness
}

/// Polls `check` until it returns `Some`, for at most 10 s.
pub(crate) async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The engine's unscoped views, as the server's own work sees them.
pub(crate) fn unscoped(engine: &Engine) -> View<'_> {
    engine.system().view()
}

pub(crate) fn run_body(assistant: &str, input: Value) -> RunCreate {
    RunCreate {
        assistant_id: assistant.into(),
        input: Some(input),
        ..RunCreate::default()
    }
}

pub(crate) async fn new_thread(engine: &Engine) -> Uuid {
    unscoped(engine)
        .threads()
        .create(ThreadCreate::default())
        .await
        .expect("thread")
        .thread_id
}

/// Waits until the thread is deleted (a stateless run's, once settled).
pub(crate) async fn thread_gone(engine: &Engine, thread_id: Uuid) {
    eventually(|| async {
        unscoped(engine)
            .threads()
            .get(thread_id)
            .await
            .is_err()
            .then_some(())
    })
    .await;
}

pub(crate) async fn settled(engine: &Engine, run: &Run) -> Run {
    eventually(|| async {
        let run = unscoped(engine)
            .runs()
            .get(run.thread_id, run.run_id)
            .await
            .ok()?;
        run.status.is_terminal().then_some(run)
    })
    .await
}

/// A `slow` run of a minute on `thread`, once a worker executes it.
pub(crate) async fn running_slow_run(engine: &Engine, thread: Uuid) -> Run {
    let run = unscoped(engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 60_000})),
        )
        .await
        .unwrap();
    eventually(|| async {
        let run = unscoped(engine).runs().get(thread, run.run_id).await.ok()?;
        (run.status == RunStatus::Running).then_some(run)
    })
    .await
}

/// Waits until `count` workers wait for work: whatever was queued before has been
/// taken, and a run created now finds them idle.
pub(crate) async fn idle_workers(engine: &Engine, count: usize) {
    eventually(|| async { (engine.idle_workers() == count).then_some(()) }).await;
}

/// The run's wait/join result, within 30 s: a run that never ends fails the test
/// instead of hanging it.
pub(crate) async fn result_of(engine: &Engine, run_id: Uuid) -> Value {
    tokio::time::timeout(
        Duration::from_secs(30),
        unscoped(engine).runs().result(run_id),
    )
    .await
    .expect("the run ended within 30 s")
    .expect("the system view reads every run")
}
