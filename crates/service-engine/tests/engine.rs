//! Engine behaviour with the in-memory store, the example graphs and an injected
//! clock: scheduling, expiry, timeouts, cancellation and per-thread serialization.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Duration;

use serde_json::{Value, json};
use service_engine::bus::MemoryBus;
use service_engine::{Engine, EngineConfig, EngineParts, RunTarget};
use service_graph::{Checkpointer, InMemorySaver};
use service_store::{Clock, ManualClock};
use service_store_memory::{MemoryOptions, memory_store};
use service_types::{
    CancelAction, CronCreate, IfNotExists, JsonText, MultitaskStrategy, Run, RunCreate, RunStatus,
    ThreadCreate, ThreadStatus, Timestamp, TtlSetting,
};
use uuid::Uuid;

struct Harness {
    engine: Engine,
    clock: Arc<ManualClock>,
}

fn harness(config: EngineConfig) -> Harness {
    harness_with(config, Arc::new(InMemorySaver::new()))
}

/// An engine on the in-memory store and this checkpointer.
fn harness_with(config: EngineConfig, checkpointer: Arc<dyn Checkpointer>) -> Harness {
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let graphs =
        Arc::new(service_example_graphs::registry(checkpointer.clone()).expect("example graphs"));
    let engine = Engine::new(EngineParts {
        store: memory_store(MemoryOptions::new(dyn_clock.clone())),
        graphs,
        checkpointer,
        bus: MemoryBus::new(config.bus),
        clock: dyn_clock,
        config,
    });
    Harness { engine, clock }
}

async fn started(config: EngineConfig) -> Harness {
    start(harness(config)).await
}

async fn start(harness: Harness) -> Harness {
    harness
        .engine
        .ensure_system_assistants()
        .await
        .expect("system assistants");
    harness.engine.start();
    harness
}

/// Polls `check` until it returns `Some`, for at most 10 s.
async fn eventually<T, F, Fut>(mut check: F) -> T
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

fn run_body(assistant: &str, input: Value) -> RunCreate {
    RunCreate {
        assistant_id: assistant.into(),
        input: Some(input),
        ..RunCreate::default()
    }
}

async fn new_thread(engine: &Engine) -> Uuid {
    engine
        .create_thread(ThreadCreate::default())
        .await
        .expect("thread")
        .thread_id
}

/// Waits until the thread is deleted (a stateless run's, once settled).
async fn thread_gone(engine: &Engine, thread_id: Uuid) {
    eventually(|| async { engine.get_thread(thread_id).await.is_err().then_some(()) }).await;
}

async fn settled(engine: &Engine, run: &Run) -> Run {
    eventually(|| async {
        let run = engine.get_run(Some(run.thread_id), run.run_id).await.ok()?;
        run.status.is_terminal().then_some(run)
    })
    .await
}

#[tokio::test]
async fn a_queued_run_executes_and_its_thread_mirrors_the_result() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let input = json!({"messages": [{"type": "human", "content": "hi"}]});
    let run = engine
        .create_run(RunTarget::Thread(thread), run_body("echo", input))
        .await
        .unwrap();
    assert_eq!(
        engine.run_result(run.run_id).await["messages"][1]["content"],
        "echo: hi"
    );
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
    let thread = engine.get_thread(thread).await.unwrap();
    assert_eq!(thread.status, ThreadStatus::Idle);
    assert_eq!(thread.values.unwrap()["messages"][1]["content"], "echo: hi");
}

#[tokio::test]
async fn enqueued_runs_on_one_thread_execute_one_at_a_time_in_order() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let mut runs = Vec::new();
    for delay in [300, 10] {
        let mut body = run_body("slow", json!({"delay_ms": delay}));
        body.multitask_strategy = Some(MultitaskStrategy::Enqueue);
        runs.push(
            engine
                .create_run(RunTarget::Thread(thread), body)
                .await
                .unwrap(),
        );
    }
    eventually(|| async {
        let first = engine.get_run(Some(thread), runs[0].run_id).await.ok()?;
        (first.status == RunStatus::Running).then_some(())
    })
    .await;
    // Ten idle workers, yet the second run waits for the thread.
    let second = engine.get_run(Some(thread), runs[1].run_id).await.unwrap();
    assert_eq!(second.status, RunStatus::Pending);
    assert_eq!(
        engine.get_thread(thread).await.unwrap().status,
        ThreadStatus::Busy
    );
    assert_eq!(settled(&engine, &runs[0]).await.status, RunStatus::Success);
    assert_eq!(settled(&engine, &runs[1]).await.status, RunStatus::Success);
    assert_eq!(
        engine.get_thread(thread).await.unwrap().status,
        ThreadStatus::Idle
    );
}

#[tokio::test]
async fn reject_refuses_a_second_run_while_the_thread_is_busy() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    engine
        .create_run(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 5000})),
        )
        .await
        .unwrap();
    let mut second = run_body("echo", json!({}));
    second.multitask_strategy = Some(MultitaskStrategy::Reject);
    let error = engine
        .create_run(RunTarget::Thread(thread), second)
        .await
        .unwrap_err();
    assert_eq!(error.kind, service_engine::ErrorKind::Conflict);
}

/// A `slow` run of a minute on `thread`, once a worker executes it.
async fn running_slow_run(engine: &Engine, thread: Uuid) -> Run {
    let run = engine
        .create_run(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 60_000})),
        )
        .await
        .unwrap();
    eventually(|| async {
        let run = engine.get_run(Some(thread), run.run_id).await.ok()?;
        (run.status == RunStatus::Running).then_some(run)
    })
    .await
}

#[tokio::test]
async fn cancel_stops_the_graph_mid_node() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let run = running_slow_run(&engine, thread).await;
    engine
        .cancel_run(thread, run.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    // Settles long before the node's 60 s sleep would end.
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_ne!(
        engine.get_thread(thread).await.unwrap().status,
        ThreadStatus::Busy
    );
}

#[tokio::test]
async fn a_run_longer_than_the_run_timeout_ends_as_timeout() {
    let config = EngineConfig {
        run_timeout: Some(Duration::from_millis(50)),
        ..EngineConfig::default()
    };
    let Harness { engine, .. } = started(config).await;
    let thread = new_thread(&engine).await;
    let run = engine
        .create_run(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 60_000})),
        )
        .await
        .unwrap();
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Timeout);
    assert_eq!(
        engine.get_thread(thread).await.unwrap().status,
        ThreadStatus::Error
    );
}

#[tokio::test]
async fn a_failed_run_records_its_error_chain_on_the_run_and_the_thread() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let run = engine
        .create_run(
            RunTarget::Thread(thread),
            run_body("fail", json!({"messages": []})),
        )
        .await
        .unwrap();
    let body = engine.run_result(run.run_id).await;
    assert_eq!(body["__error__"]["message"], "boom");
    assert_eq!(body["__error__"]["cause"]["message"], "root cause");
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Error);
    assert_eq!(run.error.unwrap().message, "boom");
    let thread = engine.get_thread(thread).await.unwrap();
    assert_eq!(thread.status, ThreadStatus::Error);
    assert_eq!(thread.error.as_deref(), Some("boom"));
    assert_eq!(thread.metadata["error"], "boom");
}

#[tokio::test]
async fn a_due_cron_fires_one_run_per_occurrence() {
    let Harness { engine, clock } = harness(EngineConfig::default());
    engine.ensure_system_assistants().await.unwrap();
    let thread = new_thread(&engine).await;
    let body = CronCreate {
        schedule: "*/5 * * * *".into(),
        run: run_body(
            "echo",
            json!({"messages": [{"type": "human", "content": "tick"}]}),
        ),
        ..CronCreate::default()
    };
    let cron = engine.create_cron(Some(thread), body).await.unwrap();
    let next = cron.next_run_date.expect("next occurrence");
    engine.fire_due_crons().await;
    assert!(
        engine
            .list_runs(thread, None, None, None)
            .await
            .unwrap()
            .is_empty()
    );

    clock.set(next);
    engine.fire_due_crons().await;
    engine.fire_due_crons().await;
    let runs = engine.list_runs(thread, None, None, None).await.unwrap();
    assert_eq!(runs.len(), 1, "one occurrence fires exactly one run");
    let advanced = engine.get_cron(cron.cron_id).await.unwrap();
    assert!(advanced.next_run_date.unwrap() > next);
}

#[tokio::test]
async fn an_expired_thread_stays_readable_until_the_sweeper_collects_it() {
    let Harness { engine, clock } = harness(EngineConfig::default());
    let body = ThreadCreate {
        ttl: Some(TtlSetting::Minutes(10.0)),
        ..ThreadCreate::default()
    };
    let thread = engine.create_thread(body).await.unwrap().thread_id;
    clock.advance(Duration::from_secs(11 * 60));
    assert!(engine.get_thread(thread).await.is_ok());
    engine.sweep_once().await;
    assert!(engine.get_thread(thread).await.is_err());
}

/// Tokio's clock is paused and moved by hand beside the engine's, so the delayed-run
/// timer sleeps as it would in real time.
#[tokio::test(start_paused = true)]
async fn a_delayed_run_starts_when_due_with_no_other_work() {
    let Harness { engine, clock } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let mut body = run_body("echo", json!({"messages": []}));
    body.after_seconds = Some(30.0);
    let run = engine
        .create_run(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    // A run due now on another thread runs meanwhile; the delayed one waits.
    let other = new_thread(&engine).await;
    let now = engine
        .create_run(
            RunTarget::Thread(other),
            run_body("echo", json!({"messages": []})),
        )
        .await
        .unwrap();
    assert_eq!(settled(&engine, &now).await.status, RunStatus::Success);
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(
        engine
            .get_run(Some(thread), run.run_id)
            .await
            .unwrap()
            .status,
        RunStatus::Pending
    );
    clock.advance(Duration::from_secs(31));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
}

/// A run this instance queued that its claim by id cannot take yet (here: the clock
/// went back after it was queued) is not forgotten: the queue search and the
/// delayed-run timer take it once it is due.
#[tokio::test(start_paused = true)]
async fn a_queued_run_its_claim_by_id_missed_still_starts_when_due() {
    let Harness { engine, clock } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    // The workers have looked at the queue and sleep; the timer knows of no delay.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let queued_at = clock.now();
    let run = engine
        .create_run(RunTarget::Thread(thread), run_body("echo", json!({})))
        .await
        .unwrap();
    // Before any worker runs (one runtime thread, no await in between).
    clock.set(queued_at.plus_millis(-1_000));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        engine
            .get_run(Some(thread), run.run_id)
            .await
            .unwrap()
            .status,
        RunStatus::Pending,
        "not due by the clock yet"
    );
    clock.set(queued_at);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
}

/// The runs of a store, counting how runs are claimed; with `threads_made_elsewhere`,
/// as shared with another instance that, just before this one inserts a thread made
/// for its run, creates that thread itself, too late for the insert to read it back.
#[derive(Default)]
struct ObservedRuns {
    store: Option<service_store::Store>,
    threads_made_elsewhere: bool,
    /// How long the creation of a claimed run takes.
    claimed_creation: Duration,
    claimed_by_id: AtomicUsize,
    claimed_in_settle: AtomicUsize,
    /// Runs in the order they were settled (and mirrored).
    settled: std::sync::Mutex<Vec<Uuid>>,
}

impl ObservedRuns {
    fn of(&self) -> &service_store::Store {
        self.store.as_ref().expect("a store")
    }
}

#[async_trait::async_trait]
impl service_store::RunsRepo for ObservedRuns {
    async fn create(&self, new: service_store::NewRun) -> service_store::StoreResult<Run> {
        self.of().runs().create(new).await
    }
    async fn create_with_thread(
        &self,
        thread: service_store::NewThread,
        run: service_store::NewRun,
    ) -> service_store::StoreResult<service_store::ThreadRunCreated> {
        if !self.threads_made_elsewhere {
            if run.claimed {
                tokio::time::sleep(self.claimed_creation).await;
            }
            return self.of().runs().create_with_thread(thread, run).await;
        }
        let elsewhere = service_store::NewThread {
            metadata: json!({"made": "elsewhere"}).as_object().cloned().unwrap(),
            status: ThreadStatus::Idle,
            ..thread.clone()
        };
        self.of()
            .threads()
            .create(elsewhere, service_types::IfExists::Raise)
            .await?;
        match self.of().runs().create_with_thread(thread, run).await? {
            service_store::ThreadRunCreated::ThreadExists(_) => {
                Ok(service_store::ThreadRunCreated::ThreadExists(None))
            }
            created => Ok(created),
        }
    }
    async fn get(&self, run_id: Uuid) -> service_store::StoreResult<Option<Run>> {
        self.of().runs().get(run_id).await
    }
    async fn list(
        &self,
        thread_id: Uuid,
        query: &service_store::RunListQuery,
    ) -> service_store::StoreResult<Vec<Run>> {
        self.of().runs().list(thread_id, query).await
    }
    async fn latest(&self, thread_id: Uuid) -> service_store::StoreResult<Option<Run>> {
        self.of().runs().latest(thread_id).await
    }
    async fn active(
        &self,
        query: &service_store::ActiveRunsQuery,
    ) -> service_store::StoreResult<Vec<Run>> {
        self.of().runs().active(query).await
    }
    async fn claim_next(
        &self,
        now: Timestamp,
    ) -> service_store::StoreResult<Option<service_store::Claimed>> {
        self.of().runs().claim_next(now).await
    }
    async fn claim(&self, run_id: Uuid, now: Timestamp) -> service_store::StoreResult<Option<Run>> {
        self.claimed_by_id.fetch_add(1, SeqCst);
        self.of().runs().claim(run_id, now).await
    }
    async fn next_available_at(
        &self,
        now: Timestamp,
    ) -> service_store::StoreResult<Option<Timestamp>> {
        self.of().runs().next_available_at(now).await
    }
    async fn request_cancel(
        &self,
        run_id: Uuid,
    ) -> service_store::StoreResult<service_store::CancelOutcome> {
        self.of().runs().request_cancel(run_id).await
    }
    async fn cancel_requested(&self, run_id: Uuid) -> service_store::StoreResult<bool> {
        self.of().runs().cancel_requested(run_id).await
    }
    async fn settle(
        &self,
        run_id: Uuid,
        settlement: service_store::Settlement,
    ) -> service_store::StoreResult<service_store::Settled> {
        self.of().runs().settle(run_id, settlement).await
    }
    async fn settle_and_mirror(
        &self,
        run_id: Uuid,
        settlement: service_store::Settlement,
        mirror: service_store::ThreadMirror,
        next: Option<service_store::ClaimNext>,
    ) -> service_store::StoreResult<service_store::SettledAndMirrored> {
        let outcome = self
            .of()
            .runs()
            .settle_and_mirror(run_id, settlement, mirror, next)
            .await?;
        if outcome.next.is_some() {
            self.claimed_in_settle.fetch_add(1, SeqCst);
        }
        self.settled.lock().unwrap().push(run_id);
        Ok(outcome)
    }
    async fn delete(&self, run_id: Uuid) -> service_store::StoreResult<()> {
        self.of().runs().delete(run_id).await
    }
}

/// A started engine on the in-memory store whose runs go through `runs` (its store is
/// set here); returns the engine and `runs`.
async fn engine_on_runs(
    mut runs: ObservedRuns,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
) -> (Engine, Arc<ObservedRuns>) {
    let shared = memory_store(MemoryOptions::new(clock.clone()));
    runs.store = Some(shared.clone());
    let runs = Arc::new(runs);
    let store = service_store::Store::new(service_store::StoreParts {
        runs: runs.clone(),
        ..shared.parts()
    });
    let checkpointer: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let engine = Engine::new(EngineParts {
        store,
        graphs: Arc::new(service_example_graphs::registry(checkpointer.clone()).unwrap()),
        checkpointer,
        bus: MemoryBus::new(config.bus),
        clock,
        config,
    });
    engine.ensure_system_assistants().await.unwrap();
    engine.start();
    (engine, runs)
}

/// [`engine_on_runs`] with one worker, so runs queue behind each other.
async fn one_worker_on_runs(runs: ObservedRuns) -> (Engine, Arc<ObservedRuns>) {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let config = EngineConfig {
        run_concurrency: 1,
        ..EngineConfig::default()
    };
    engine_on_runs(runs, clock, config).await
}

/// A worker takes the next run its instance queued in the same step as the settle of
/// the run it finishes: with one worker and three runs queued behind a running one,
/// on threads of their own, only the first run is claimed by id.
#[tokio::test]
async fn a_worker_claims_its_next_queued_run_with_its_settle() {
    let (engine, runs) = one_worker_on_runs(ObservedRuns::default()).await;
    let first = engine
        .create_run(
            RunTarget::Thread(new_thread(&engine).await),
            run_body("slow", json!({"delay_ms": 300})),
        )
        .await
        .unwrap();
    let mut queued = Vec::new();
    for n in 0..3 {
        let input = json!({"messages": [{"type": "human", "content": format!("hi {n}")}]});
        let thread = new_thread(&engine).await;
        let run = engine
            .create_run(RunTarget::Thread(thread), run_body("echo", input))
            .await
            .unwrap();
        queued.push(run);
    }
    settled(&engine, &first).await;
    for (n, run) in queued.iter().enumerate() {
        assert_eq!(
            engine.run_result(run.run_id).await["messages"][1]["content"],
            format!("echo: hi {n}")
        );
    }
    assert_eq!(
        (
            runs.claimed_by_id.load(SeqCst),
            runs.claimed_in_settle.load(SeqCst)
        ),
        (1, 3)
    );
}

/// A run that is waited on, on a thread made for it, is created claimed when a worker
/// is idle: it starts with no claim. One that is not watched, or that finds every
/// worker busy, is queued pending and claimed as before.
#[tokio::test]
async fn a_watched_run_on_a_new_thread_is_created_claimed_for_an_idle_worker() {
    let (engine, runs) = one_worker_on_runs(ObservedRuns::default()).await;
    let claims = || {
        (
            runs.claimed_by_id.load(SeqCst),
            runs.claimed_in_settle.load(SeqCst),
        )
    };
    let echo_on_new_thread = |text: &str| {
        let mut body = run_body(
            "echo",
            json!({"messages": [{"type": "human", "content": text}]}),
        );
        body.if_not_exists = Some(IfNotExists::Create);
        (RunTarget::Thread(Uuid::now_v7()), body)
    };
    // The worker is waiting for work by now.
    tokio::time::sleep(Duration::from_millis(50)).await;

    let (target, body) = echo_on_new_thread("watched");
    let (run, _frames) = engine.create_run_watched(target, body).await.unwrap();
    assert_eq!(
        engine.run_result(run.run_id).await["messages"][1]["content"],
        "echo: watched"
    );
    assert_eq!(claims(), (0, 0), "created claimed");

    let (target, body) = echo_on_new_thread("background");
    let run = engine.create_run(target, body).await.unwrap();
    assert_eq!(run.status, RunStatus::Pending);
    settled(&engine, &run).await;
    assert_eq!(claims(), (1, 0), "queued, then claimed by id");

    // The one worker is busy: a watched run waits, pending, for it.
    let slow = engine
        .create_run(
            RunTarget::Thread(new_thread(&engine).await),
            run_body("slow", json!({"delay_ms": 300})),
        )
        .await
        .unwrap();
    let slow = eventually(|| async {
        let run = engine.get_run(None, slow.run_id).await.ok()?;
        (run.status == RunStatus::Running).then_some(run)
    })
    .await;
    let (target, body) = echo_on_new_thread("behind");
    let (behind, _frames) = engine.create_run_watched(target, body).await.unwrap();
    assert_eq!(
        engine.get_run(None, behind.run_id).await.unwrap().status,
        RunStatus::Pending
    );
    settled(&engine, &slow).await;
    assert_eq!(
        engine.run_result(behind.run_id).await["messages"][1]["content"],
        "echo: behind"
    );
    assert_eq!(claims(), (2, 1), "claimed with the slow run's settle");
}

/// A run created claimed is registered before its row exists, so a cancel sent the
/// moment its creation answers stops it, as it stops any running run.
#[tokio::test]
async fn a_run_created_claimed_is_cancelled_at_once() {
    let (engine, runs) = one_worker_on_runs(ObservedRuns::default()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let thread = Uuid::now_v7();
    let mut body = run_body("slow", json!({"delay_ms": 60_000}));
    body.if_not_exists = Some(IfNotExists::Create);
    let (run, _frames) = engine
        .create_run_watched(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    engine
        .cancel_run(thread, run.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    // Settles long before the node's 60 s sleep would end.
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Cancelled);
    assert_eq!(runs.claimed_by_id.load(SeqCst), 0, "created claimed");
}

/// A run created claimed for a worker that meanwhile took other work runs as soon as
/// that work ends, before the runs queued behind it: a worker going from one queued run
/// to the next would otherwise keep it waiting for as long as runs are queued.
#[tokio::test]
async fn a_run_created_claimed_goes_before_runs_queued_meanwhile() {
    let (engine, runs) = one_worker_on_runs(ObservedRuns {
        claimed_creation: Duration::from_millis(400),
        ..ObservedRuns::default()
    })
    .await;
    let threads = [
        new_thread(&engine).await,
        new_thread(&engine).await,
        new_thread(&engine).await,
    ];
    tokio::time::sleep(Duration::from_millis(50)).await;

    // Promised the idle worker, and slow to be created.
    let watched = tokio::spawn({
        let engine = engine.clone();
        async move {
            let mut body = run_body("echo", json!({"messages": []}));
            body.if_not_exists = Some(IfNotExists::Create);
            let (run, _frames) = engine
                .create_run_watched(RunTarget::Thread(Uuid::now_v7()), body)
                .await
                .unwrap();
            engine.run_result(run.run_id).await;
            run.run_id
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Meanwhile the worker takes a slow run, and two more queue behind it.
    let slow = engine
        .create_run(
            RunTarget::Thread(threads[0]),
            run_body("slow", json!({"delay_ms": 600})),
        )
        .await
        .unwrap();
    let mut queued = Vec::new();
    for thread in &threads[1..] {
        let run = engine
            .create_run(
                RunTarget::Thread(*thread),
                run_body("echo", json!({"messages": []})),
            )
            .await
            .unwrap();
        queued.push(run);
    }
    let watched = watched.await.unwrap();
    for run in &queued {
        settled(&engine, run).await;
    }
    assert_eq!(
        runs.settled.lock().unwrap().clone(),
        vec![slow.run_id, watched, queued[0].run_id, queued[1].run_id]
    );
}

/// A thread `if_not_exists: create` makes for its run gets the default thread ttl, as a
/// thread made by `POST /threads` does.
#[tokio::test]
async fn a_thread_made_for_its_run_gets_the_default_ttl() {
    let config = EngineConfig {
        thread_default_ttl_minutes: Some(10.0),
        ..EngineConfig::default()
    };
    let Harness { engine, clock } = started(config).await;
    let thread = Uuid::now_v7();
    let mut body = run_body("echo", json!({"messages": []}));
    body.if_not_exists = Some(IfNotExists::Create);
    engine
        .create_run(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    let ttl = engine.get_thread(thread).await.unwrap().ttl.expect("ttl");
    assert_eq!(
        (ttl.ttl_minutes, ttl.expires_at),
        (10.0, clock.now().plus_minutes(10.0))
    );
}

/// `if_not_exists: create` on a thread another instance creates between this one's
/// read and its insert: the run is queued on that thread as on any existing one (its
/// metadata now names the run's graph), and runs.
#[tokio::test]
async fn a_run_whose_new_thread_another_instance_made_meanwhile_runs_on_that_thread() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let (engine, _) = engine_on_runs(
        ObservedRuns {
            threads_made_elsewhere: true,
            ..ObservedRuns::default()
        },
        clock,
        EngineConfig::default(),
    )
    .await;
    let thread = Uuid::now_v7();
    let mut body = run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": "hi"}]}),
    );
    body.if_not_exists = Some(IfNotExists::Create);
    let run = engine
        .create_run(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    assert_eq!(run.thread_id, thread);
    assert_eq!(
        engine.run_result(run.run_id).await["messages"][1]["content"],
        "echo: hi"
    );
    let made = engine.get_thread(thread).await.unwrap();
    assert_eq!(
        (
            made.metadata["made"].clone(),
            made.metadata["graph_id"].clone()
        ),
        (json!("elsewhere"), json!("echo"))
    );
}

/// An engine (workers not started) sharing its store with other instances through
/// `coordinator`.
async fn coordinated(
    coordinator: Arc<dyn service_engine::coordination::Coordinator>,
) -> (Engine, service_store::Store, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let checkpointer: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let graphs = Arc::new(service_example_graphs::registry(checkpointer.clone()).unwrap());
    let config = EngineConfig::default();
    let store = memory_store(MemoryOptions::new(dyn_clock.clone()));
    let engine = Engine::with_coordinator(
        EngineParts {
            store: store.clone(),
            graphs,
            checkpointer,
            bus: MemoryBus::new(config.bus),
            clock: dyn_clock,
            config,
        },
        coordinator,
    );
    engine.ensure_system_assistants().await.unwrap();
    (engine, store, clock)
}

/// An instance remembers the assistants it built runs from; a change made through
/// another instance still reaches its next run (one retry, never the old version).
#[tokio::test]
async fn a_run_follows_its_assistant_as_changed_through_another_instance() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let store = memory_store(MemoryOptions::new(clock.clone()));
    let instance = || {
        let checkpointer: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
        let config = EngineConfig::default();
        Engine::new(EngineParts {
            store: store.clone(),
            graphs: Arc::new(service_example_graphs::registry(checkpointer.clone()).unwrap()),
            checkpointer,
            bus: MemoryBus::new(config.bus),
            clock: clock.clone(),
            config,
        })
    };
    let (running, editing) = (instance(), instance());
    let assistant = editing
        .create_assistant(service_types::AssistantCreate {
            graph_id: Some("echo".into()),
            metadata: Some(json!({"edition": 1}).as_object().cloned().unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = assistant.assistant_id.to_string();
    let queue = || async {
        let thread = new_thread(&running).await;
        running
            .create_run(RunTarget::Thread(thread), run_body(&id, json!({})))
            .await
            .unwrap()
    };
    assert_eq!(queue().await.metadata["edition"], 1);
    assert_eq!(queue().await.metadata["edition"], 1, "remembered");

    // Edited elsewhere, at the same instant by the clock: the new version shows.
    let patch = service_types::AssistantPatch {
        metadata: Some(json!({"edition": 2}).as_object().cloned().unwrap()),
        ..Default::default()
    };
    editing.update_assistant(&id, patch).await.unwrap();
    assert_eq!(queue().await.metadata["edition"], 2);
    editing.set_latest_assistant_version(&id, 1).await.unwrap();
    assert_eq!(queue().await.metadata["edition"], 1);

    editing.delete_assistant(&id, false).await.unwrap();
    let thread = new_thread(&running).await;
    let gone = running
        .create_run(RunTarget::Thread(thread), run_body(&id, json!({})))
        .await
        .unwrap_err();
    assert_eq!(gone.kind, service_engine::ErrorKind::NotFound);
}

/// A coordinator standing in for other instances: it counts announcements and holds
/// the first one until released, says whether thread claims are free as the test
/// decides, and counts the claims taken and released.
struct TestCoordinator {
    announced: AtomicUsize,
    release_first_announcement: tokio::sync::Semaphore,
    claims_freed: AtomicBool,
    /// The spacing of announcements the engine is told.
    announce_spacing: Duration,
    /// The claim delay the engine is told; `None` asks for no claims.
    claim_delay: Option<Duration>,
    /// How long a claim takes to answer once taken, like a lock's round trip.
    claim_answer: Duration,
    refuse_claims: AtomicBool,
    claims: Arc<ClaimCounts>,
}

#[derive(Default)]
struct ClaimCounts {
    taken: AtomicUsize,
    released: AtomicUsize,
}

struct CountedClaim(Arc<ClaimCounts>);

impl service_engine::coordination::ThreadClaim for CountedClaim {}

impl Drop for CountedClaim {
    fn drop(&mut self) {
        self.0.released.fetch_add(1, SeqCst);
    }
}

impl Default for TestCoordinator {
    fn default() -> Self {
        Self {
            announced: Default::default(),
            release_first_announcement: tokio::sync::Semaphore::new(0),
            claims_freed: Default::default(),
            announce_spacing: Duration::ZERO,
            claim_delay: None,
            claim_answer: Duration::ZERO,
            refuse_claims: Default::default(),
            claims: Default::default(),
        }
    }
}

#[async_trait::async_trait]
impl service_engine::coordination::Coordinator for TestCoordinator {
    async fn announce_work(&self) {
        if self.announced.fetch_add(1, SeqCst) == 0 {
            drop(self.release_first_announcement.acquire().await);
        }
    }
    fn announce_spacing(&self) -> Option<Duration> {
        Some(self.announce_spacing)
    }
    async fn other_work(&self) {
        std::future::pending::<()>().await;
    }
    async fn claim_thread(
        &self,
        _thread_id: Uuid,
    ) -> service_engine::EngineResult<Box<dyn service_engine::coordination::ThreadClaim>> {
        if self.refuse_claims.load(SeqCst) {
            return Err(service_engine::EngineError::new(
                service_engine::ErrorKind::Unavailable,
                "no claim for you",
            ));
        }
        // Taken before the answer arrives: a caller that stops listening now would
        // leave it held, as a dropped lock statement would.
        self.claims.taken.fetch_add(1, SeqCst);
        tokio::time::sleep(self.claim_answer).await;
        Ok(Box::new(CountedClaim(self.claims.clone())))
    }
    fn claim_delay(&self) -> Option<Duration> {
        self.claim_delay
    }
    async fn thread_unclaimed(&self, _thread_id: Uuid) -> service_engine::EngineResult<bool> {
        Ok(self.claims_freed.load(SeqCst))
    }
    fn check_interval(&self) -> Option<Duration> {
        Some(Duration::from_secs(3600))
    }
}

/// A run takes its thread's execution claim only once it outlives the claim delay,
/// and holds it until it is settled.
#[tokio::test]
async fn only_a_run_outliving_the_claim_delay_takes_its_threads_claim() {
    let coordinator = Arc::new(TestCoordinator {
        claim_delay: Some(Duration::from_millis(100)),
        ..TestCoordinator::default()
    });
    let claims = coordinator.claims.clone();
    let (engine, _store, _clock) = coordinated(coordinator).await;
    engine.start();
    let thread = new_thread(&engine).await;
    let quick = engine
        .create_run(RunTarget::Thread(thread), run_body("echo", json!({})))
        .await
        .unwrap();
    assert_eq!(settled(&engine, &quick).await.status, RunStatus::Success);
    assert_eq!(claims.taken.load(SeqCst), 0, "a quick run takes no claim");

    let slow = running_slow_run(&engine, thread).await;
    eventually(|| async { (claims.taken.load(SeqCst) == 1).then_some(()) }).await;
    assert_eq!(claims.released.load(SeqCst), 0, "held while the run runs");
    engine
        .cancel_run(thread, slow.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    settled(&engine, &slow).await;
    eventually(|| async { (claims.released.load(SeqCst) == 1).then_some(()) }).await;
}

/// A claim the run started taking is finished and released even when the run ends
/// first, never abandoned half taken.
#[tokio::test]
async fn a_claim_taken_as_its_run_ends_is_still_released() {
    let coordinator = Arc::new(TestCoordinator {
        claim_delay: Some(Duration::from_millis(10)),
        claim_answer: Duration::from_millis(300),
        ..TestCoordinator::default()
    });
    let claims = coordinator.claims.clone();
    let (engine, _store, _clock) = coordinated(coordinator).await;
    engine.start();
    let thread = new_thread(&engine).await;
    // Ends while its claim is being answered.
    let run = engine
        .create_run(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 50})),
        )
        .await
        .unwrap();
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
    assert_eq!(claims.taken.load(SeqCst), 1);
    eventually(|| async { (claims.released.load(SeqCst) == 1).then_some(()) }).await;
}

#[tokio::test]
async fn a_run_that_cannot_take_its_threads_claim_stops_with_an_error() {
    let coordinator = Arc::new(TestCoordinator {
        claim_delay: Some(Duration::from_millis(20)),
        ..TestCoordinator::default()
    });
    coordinator.refuse_claims.store(true, SeqCst);
    let (engine, _store, _clock) = coordinated(coordinator).await;
    engine.start();
    let thread = new_thread(&engine).await;
    let run = running_slow_run(&engine, thread).await;
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Error);
    let error = run.error.unwrap();
    assert_eq!(error.error, "ExecutionClaimError");
    assert!(
        error.message.contains("no claim for you"),
        "{}",
        error.message
    );
}

/// Runs queued while an announcement is out are announced once, after it: other
/// instances learn of every run, without a round trip per run.
#[tokio::test]
async fn runs_queued_during_an_announcement_are_announced_once_after_it() {
    let coordinator = Arc::new(TestCoordinator::default());
    let (engine, _store, _clock) = coordinated(coordinator.clone()).await;
    engine.start();
    let made = || coordinator.announced.load(SeqCst);
    let mut runs = Vec::new();
    let queue = || async {
        let thread = new_thread(&engine).await;
        engine
            .create_run(RunTarget::Thread(thread), run_body("echo", json!({})))
            .await
            .unwrap()
    };
    runs.push(queue().await);
    eventually(|| async { (made() == 1).then_some(()) }).await;
    for _ in 0..9 {
        runs.push(queue().await);
    }
    coordinator.release_first_announcement.add_permits(1);
    for run in &runs {
        assert_eq!(settled(&engine, run).await.status, RunStatus::Success);
    }
    eventually(|| async { (made() == 2).then_some(()) }).await;
    assert_eq!(
        made(),
        2,
        "one announcement for the nine runs queued meanwhile"
    );
}

/// Runs queued within the spacing after an announcement are announced once, when it
/// has passed.
#[tokio::test]
async fn runs_queued_within_the_announcement_spacing_are_announced_once_after_it() {
    let coordinator = Arc::new(TestCoordinator {
        announce_spacing: Duration::from_millis(500),
        ..TestCoordinator::default()
    });
    coordinator.release_first_announcement.add_permits(1);
    let (engine, _store, _clock) = coordinated(coordinator.clone()).await;
    engine.start();
    let made = || coordinator.announced.load(SeqCst);
    let queue = || async {
        let thread = new_thread(&engine).await;
        engine
            .create_run(RunTarget::Thread(thread), run_body("echo", json!({})))
            .await
            .unwrap()
    };
    queue().await;
    eventually(|| async { (made() == 1).then_some(()) }).await;
    for _ in 0..5 {
        queue().await;
    }
    assert_eq!(made(), 1, "not before the spacing passed");
    eventually(|| async { (made() == 2).then_some(()) }).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(made(), 2, "one announcement for the five runs");
}

#[tokio::test]
async fn a_run_whose_executor_died_is_settled_as_an_error_once_its_claim_is_free() {
    let coordinator = Arc::new(TestCoordinator::default());
    let (engine, store, clock) = coordinated(coordinator.clone()).await;
    let thread = new_thread(&engine).await;
    // Workers are not started: the run is claimed as another instance would, then
    // that instance "dies".
    let run = engine
        .create_run(RunTarget::Thread(thread), run_body("echo", json!({})))
        .await
        .unwrap();
    let claimed = store.runs().claim_next(clock.now()).await.unwrap().unwrap();
    assert_eq!(claimed.run.run_id, run.run_id);

    clock.advance(Duration::from_secs(60));
    assert_eq!(
        engine.recover_orphaned_runs().await,
        0,
        "its claim is still held"
    );
    coordinator.claims_freed.store(true, SeqCst);
    assert_eq!(engine.recover_orphaned_runs().await, 1);

    let run = engine.get_run(Some(thread), run.run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::Error);
    assert_eq!(run.error.unwrap().error, "ExecutorLost");
    assert_eq!(
        engine.get_thread(thread).await.unwrap().status,
        ThreadStatus::Error
    );
}

#[tokio::test]
async fn a_stateless_run_deletes_its_thread_once_settled_yet_its_result_stays_answerable() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let input = json!({"messages": [{"type": "human", "content": "once"}]});
    let run = engine
        .create_run(RunTarget::Stateless, run_body("echo", input))
        .await
        .unwrap();
    let body = engine.run_result(run.run_id).await;
    assert_eq!(body["messages"][1]["content"], "echo: once");
    thread_gone(&engine, run.thread_id).await;

    let mut kept = run_body("echo", json!({"messages": []}));
    kept.on_completion = Some(service_types::OnCompletion::Keep);
    let run = engine.create_run(RunTarget::Stateless, kept).await.unwrap();
    engine.run_result(run.run_id).await;
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
    let thread = engine.get_thread(run.thread_id).await.unwrap();
    // Created naming the graph and assistant of its run, like a thread a run patched.
    assert_eq!(thread.metadata["graph_id"], "echo");
    assert_eq!(
        thread.metadata["assistant_id"],
        run.assistant_id.to_string().as_str()
    );
}

#[tokio::test]
async fn a_watched_stateless_run_answers_even_after_the_bus_forgot_it() {
    // The bus keeps one finished run; a waiter that subscribed only after its run ended
    // and dropped out of that retention had nothing left to read (a 404 under load).
    let mut config = EngineConfig::default();
    config.bus.max_retained_topics = 1;
    let Harness { engine, .. } = started(config).await;
    let input = json!({"messages": [{"type": "human", "content": "watched"}]});
    let (run, subscription) = engine
        .create_run_watched(RunTarget::Stateless, run_body("echo", input))
        .await
        .unwrap();
    // Settled and cleaned up: a stateless run's row goes with its thread.
    thread_gone(&engine, run.thread_id).await;
    for _ in 0..2 {
        let (other, watching) = engine
            .create_run_watched(
                RunTarget::Stateless,
                run_body("echo", json!({"messages": []})),
            )
            .await
            .unwrap();
        engine.run_result_from(other.run_id, Some(watching)).await;
    }

    // Without the subscription taken at creation, the result is gone.
    let late = engine.run_result(run.run_id).await;
    assert_eq!(late["__error__"]["message"], "404: Run not found");
    let body = engine.run_result_from(run.run_id, Some(subscription)).await;
    assert_eq!(body["messages"][1]["content"], "echo: watched");
}

#[tokio::test]
async fn a_thread_made_by_its_run_names_the_graph_and_is_idle_after_it() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = Uuid::now_v7();
    let mut body = run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": "new"}]}),
    );
    body.if_not_exists = Some(service_types::IfNotExists::Create);
    let (run, watching) = engine
        .create_run_watched(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    assert_eq!(run.thread_id, thread);
    // The run's metadata takes in its new thread's, which names the graph.
    assert_eq!(run.metadata["graph_id"], "echo");
    let result = engine.run_result_from(run.run_id, Some(watching)).await;
    assert_eq!(result["messages"][1]["content"], "echo: new");
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
    let made = eventually(|| async {
        let made = engine.get_thread(thread).await.ok()?;
        (made.status == ThreadStatus::Idle).then_some(made)
    })
    .await;
    assert_eq!(made.metadata["graph_id"], "echo");
    assert_eq!(
        made.metadata["assistant_id"],
        run.assistant_id.to_string().as_str()
    );

    // Now an existing thread: the next run takes the ordinary path.
    let mut again = run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": "again"}]}),
    );
    again.if_not_exists = Some(service_types::IfNotExists::Create);
    let second = engine
        .create_run(RunTarget::Thread(thread), again)
        .await
        .unwrap();
    assert_eq!(settled(&engine, &second).await.status, RunStatus::Success);
    let values = engine.get_thread(thread).await.unwrap().values.unwrap();
    assert_eq!(values["messages"].as_array().unwrap().len(), 4);

    // And its multitask strategy holds: a busy thread rejects.
    running_slow_run(&engine, thread).await;
    let mut rejected = run_body("echo", json!({}));
    rejected.if_not_exists = Some(service_types::IfNotExists::Create);
    rejected.multitask_strategy = Some(MultitaskStrategy::Reject);
    let error = engine
        .create_run(RunTarget::Thread(thread), rejected)
        .await
        .unwrap_err();
    assert_eq!(error.kind, service_engine::ErrorKind::Conflict);
}

/// The frames of a run's topic up to its end (internal records left out).
async fn frames(mut subscription: service_engine::bus::Subscription) -> Vec<(String, Value)> {
    use futures::StreamExt;
    let mut frames = Vec::new();
    while let Some(delivery) = subscription.next().await {
        if let service_engine::bus::Delivery::Frame(frame) = delivery
            && !frame.is_internal()
        {
            let data = serde_json::from_slice(&frame.data).expect("JSON frame");
            frames.push((frame.event, data));
        }
    }
    frames
}

/// A run's stream starts with its `metadata` frame as soon as the run is created, also
/// while it waits to start; a run that executes sends it once.
#[tokio::test]
async fn a_run_stream_starts_with_metadata_before_the_run_starts() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let mut delayed = run_body("echo", json!({"messages": []}));
    delayed.after_seconds = Some(30.0);
    let (run, mut subscription) = engine
        .create_run_watched(RunTarget::Thread(thread), delayed)
        .await
        .unwrap();
    let first = tokio::time::timeout(
        Duration::from_secs(5),
        futures::StreamExt::next(&mut subscription),
    )
    .await
    .expect("a frame while the run waits")
    .expect("a frame");
    let service_engine::bus::Delivery::Frame(first) = first else {
        panic!("a frame, not {first:?}");
    };
    assert_eq!(first.event, "metadata");
    assert_eq!(
        serde_json::from_slice::<Value>(&first.data).unwrap(),
        json!({"run_id": run.run_id, "attempt": 1})
    );
    let waiting = engine.get_run(Some(thread), run.run_id).await.unwrap();
    assert_eq!(waiting.status, RunStatus::Pending);

    let (run, subscription) = engine
        .create_run_watched(
            RunTarget::Stateless,
            run_body("echo", json!({"messages": []})),
        )
        .await
        .unwrap();
    let frames = frames(subscription).await;
    let events: Vec<&str> = frames.iter().map(|(event, _)| event.as_str()).collect();
    assert_eq!(events.first(), Some(&"metadata"));
    assert_eq!(events.iter().filter(|e| **e == "metadata").count(), 1);
    assert!(events.contains(&"values"), "{events:?}");
    assert_eq!(frames[0].1["run_id"], json!(run.run_id));
}

/// An in-memory saver that notes, when a run's checkpoints are deleted, the status
/// that run has in the store at that moment.
struct RollbackWitness {
    saver: InMemorySaver,
    store: std::sync::OnceLock<service_store::Store>,
    seen: std::sync::Mutex<Vec<RunStatus>>,
}

#[async_trait::async_trait]
impl Checkpointer for RollbackWitness {
    async fn get_tuple(
        &self,
        config: &service_graph::CheckpointConfig,
    ) -> Result<Option<service_graph::CheckpointTuple>, service_graph::GraphError> {
        self.saver.get_tuple(config).await
    }
    async fn list(
        &self,
        config: &service_graph::CheckpointConfig,
        options: service_graph::CheckpointListOptions,
    ) -> Result<Vec<service_graph::CheckpointTuple>, service_graph::GraphError> {
        self.saver.list(config, options).await
    }
    async fn put(
        &self,
        config: &service_graph::CheckpointConfig,
        checkpoint: JsonText,
        metadata: service_types::Metadata,
    ) -> Result<service_graph::CheckpointConfig, service_graph::GraphError> {
        self.saver.put(config, checkpoint, metadata).await
    }
    async fn put_writes(
        &self,
        config: &service_graph::CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
    ) -> Result<(), service_graph::GraphError> {
        self.saver.put_writes(config, task_id, writes).await
    }
    async fn merge_metadata(
        &self,
        config: &service_graph::CheckpointConfig,
        metadata: service_types::Metadata,
    ) -> Result<(), service_graph::GraphError> {
        self.saver.merge_metadata(config, metadata).await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<(), service_graph::GraphError> {
        self.saver.delete_thread(thread_id).await
    }
    async fn copy_thread(&self, from: &str, to: &str) -> Result<(), service_graph::GraphError> {
        self.saver.copy_thread(from, to).await
    }
    async fn prune(
        &self,
        thread_id: &str,
        strategy: service_types::PruneStrategy,
    ) -> Result<(), service_graph::GraphError> {
        self.saver.prune(thread_id, strategy).await
    }
    async fn delete_run(
        &self,
        thread_id: &str,
        run_id: &str,
    ) -> Result<(), service_graph::GraphError> {
        let store = self.store.get().expect("the store is set");
        let run = store
            .runs()
            .get(run_id.parse().expect("a run id"))
            .await
            .expect("read the run")
            .expect("the run exists");
        self.seen.lock().unwrap().push(run.status);
        self.saver.delete_run(thread_id, run_id).await
    }
}

/// A run cancelled with rollback loses its checkpoints while it is still running: once
/// it is settled, the thread's next run may start, and must not read them.
#[tokio::test]
async fn a_rolled_back_run_loses_its_checkpoints_before_it_settles() {
    let witness = Arc::new(RollbackWitness {
        saver: InMemorySaver::new(),
        store: std::sync::OnceLock::new(),
        seen: std::sync::Mutex::new(Vec::new()),
    });
    let checkpointer: Arc<dyn Checkpointer> = witness.clone();
    let harness = harness_with(EngineConfig::default(), checkpointer.clone());
    witness.store.set(harness.engine.store().clone()).ok();
    let Harness { engine, .. } = start(harness).await;

    let thread = new_thread(&engine).await;
    let run = running_slow_run(&engine, thread).await;
    engine
        .cancel_run(thread, run.run_id, CancelAction::Rollback)
        .await
        .unwrap();
    eventually(|| async {
        engine
            .get_run(Some(thread), run.run_id)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    assert_eq!(*witness.seen.lock().unwrap(), vec![RunStatus::Running]);
    let history = checkpointer
        .list(
            &service_graph::CheckpointConfig::new(thread.to_string(), None),
            service_graph::CheckpointListOptions::default(),
        )
        .await
        .unwrap();
    assert!(history.is_empty(), "the run's checkpoints are gone");
    assert_ne!(
        engine.get_thread(thread).await.unwrap().status,
        ThreadStatus::Busy
    );
}
