//! Instances sharing a store: remembered assistants, thread execution claims,
//! announcements, recovery of runs whose executor died.

use service_engine::coordination::CoordinationTuning;

use crate::support::*;

/// An engine (workers not started) sharing its store with other instances through
/// `coordinator`.
async fn coordinated(
    coordinator: Arc<dyn service_engine::coordination::Coordinator>,
) -> (Engine, service_store::Store, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let config = EngineConfig::default();
    let store = memory_store(MemoryOptions::new(dyn_clock.clone()));
    let engine = Engine::with_coordinator(
        EngineParts {
            webhooks: None,
            store: store.clone(),
            graphs: Box::new(service_example_graphs::registry),
            checkpointer: Arc::new(InMemorySaver::new()),
            bus: MemoryBus::new(config.bus),
            clock: dyn_clock,
            config,
        },
        coordinator,
    )
    .unwrap();
    engine.system().ensure_system_assistants().await.unwrap();
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
        let config = EngineConfig::default();
        Engine::new(EngineParts {
            webhooks: None,
            store: store.clone(),
            graphs: Box::new(service_example_graphs::registry),
            checkpointer: Arc::new(InMemorySaver::new()),
            bus: MemoryBus::new(config.bus),
            clock: clock.clone(),
            config,
        })
        .unwrap()
    };
    let (running, editing) = (instance(), instance());
    let assistant = unscoped(&editing)
        .assistants()
        .create(service_types::AssistantCreate {
            graph_id: Some("echo".into()),
            metadata: Some(json!({"edition": 1}).as_object().cloned().unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = assistant.assistant_id.to_string();
    let queue = || async {
        let thread = new_thread(&running).await;
        unscoped(&running)
            .runs()
            .create(RunTarget::Thread(thread), run_body(&id, json!({})))
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
    unscoped(&editing)
        .assistants()
        .update(&id, patch)
        .await
        .unwrap();
    assert_eq!(queue().await.metadata["edition"], 2);
    unscoped(&editing)
        .assistants()
        .set_latest(&id, 1)
        .await
        .unwrap();
    assert_eq!(queue().await.metadata["edition"], 1);

    unscoped(&editing)
        .assistants()
        .delete(&id, false)
        .await
        .unwrap();
    let thread = new_thread(&running).await;
    let gone = unscoped(&running)
        .runs()
        .create(RunTarget::Thread(thread), run_body(&id, json!({})))
        .await
        .unwrap_err();
    assert_eq!(gone.kind, service_engine::ErrorKind::NotFound);
}

/// A coordinator standing in for other instances: it counts announcements and holds
/// the first one until released, says whether thread claims are free as the test
/// decides, counts the claims taken and released, and carries announced cancels to
/// every engine sharing it.
struct TestCoordinator {
    announced: AtomicUsize,
    release_first_announcement: tokio::sync::Semaphore,
    claims_freed: AtomicBool,
    /// The timings the engine is told: no spacing of announcements, claims only
    /// after an hour, no look for cancels from elsewhere within a test.
    tuning: CoordinationTuning,
    /// How long a claim takes to answer once taken, like a lock's round trip.
    claim_answer: Duration,
    refuse_claims: AtomicBool,
    claims: Arc<ClaimCounts>,
    cancels: tokio::sync::broadcast::Sender<Uuid>,
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
            tuning: CoordinationTuning {
                announce_spacing: Duration::ZERO,
                claim_delay: Duration::from_secs(3600),
                check_interval: Duration::from_secs(3600),
                ..CoordinationTuning::default()
            },
            claim_answer: Duration::ZERO,
            refuse_claims: Default::default(),
            claims: Default::default(),
            cancels: tokio::sync::broadcast::Sender::new(16),
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
    fn tuning(&self) -> Option<&CoordinationTuning> {
        Some(&self.tuning)
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
    async fn thread_unclaimed(&self, _thread_id: Uuid) -> service_engine::EngineResult<bool> {
        Ok(self.claims_freed.load(SeqCst))
    }
    async fn announce_cancel(&self, run_id: Uuid) {
        // No subscriber: no engine sharing this coordinator was started.
        let _ = self.cancels.send(run_id);
    }
    fn announced_cancels(&self) -> futures::stream::BoxStream<'static, Uuid> {
        let cancels = self.cancels.subscribe();
        let next = |mut cancels: tokio::sync::broadcast::Receiver<Uuid>| async move {
            let run_id = cancels.recv().await.ok()?;
            Some((run_id, cancels))
        };
        Box::pin(futures::stream::unfold(cancels, next))
    }
}

/// Two engines (workers not started) sharing one store, on the system clock, and
/// `coordinator`.
async fn two_instances(coordinator: Arc<TestCoordinator>) -> (Engine, Engine) {
    let clock: Arc<dyn Clock> = Arc::new(service_store::SystemClock);
    let store = memory_store(MemoryOptions::new(clock.clone()));
    let instance = || {
        let config = EngineConfig::default();
        Engine::with_coordinator(
            EngineParts {
                webhooks: None,
                store: store.clone(),
                graphs: Box::new(service_example_graphs::registry),
                checkpointer: Arc::new(InMemorySaver::new()),
                bus: MemoryBus::new(config.bus),
                clock: clock.clone(),
                config,
            },
            coordinator.clone(),
        )
        .unwrap()
    };
    let (first, second) = (instance(), instance());
    first.system().ensure_system_assistants().await.unwrap();
    (first, second)
}

/// A run takes its thread's execution claim only once it outlives the claim delay,
/// and holds it until it is settled.
#[tokio::test]
async fn only_a_run_outliving_the_claim_delay_takes_its_threads_claim() {
    let coordinator = Arc::new(TestCoordinator {
        tuning: CoordinationTuning {
            claim_delay: Duration::from_millis(100),
            ..TestCoordinator::default().tuning
        },
        ..TestCoordinator::default()
    });
    let claims = coordinator.claims.clone();
    let (engine, _store, _clock) = coordinated(coordinator).await;
    engine.start();
    let thread = new_thread(&engine).await;
    let quick = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), run_body("echo", json!({})))
        .await
        .unwrap();
    assert_eq!(settled(&engine, &quick).await.status, RunStatus::Success);
    assert_eq!(claims.taken.load(SeqCst), 0, "a quick run takes no claim");

    let slow = running_slow_run(&engine, thread).await;
    eventually(|| async { (claims.taken.load(SeqCst) == 1).then_some(()) }).await;
    assert_eq!(claims.released.load(SeqCst), 0, "held while the run runs");
    unscoped(&engine)
        .runs()
        .cancel(thread, slow.run_id, CancelAction::Interrupt)
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
        tuning: CoordinationTuning {
            claim_delay: Duration::from_millis(10),
            ..TestCoordinator::default().tuning
        },
        claim_answer: Duration::from_millis(300),
        ..TestCoordinator::default()
    });
    let claims = coordinator.claims.clone();
    let (engine, _store, _clock) = coordinated(coordinator).await;
    engine.start();
    let thread = new_thread(&engine).await;
    // Ends while its claim is being answered.
    let run = unscoped(&engine)
        .runs()
        .create(
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
        tuning: CoordinationTuning {
            claim_delay: Duration::from_millis(20),
            ..TestCoordinator::default().tuning
        },
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
        unscoped(&engine)
            .runs()
            .create(RunTarget::Thread(thread), run_body("echo", json!({})))
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
/// has passed. Tokio's clock is paused: the spacing passes only when every task waits.
#[tokio::test(start_paused = true)]
async fn runs_queued_within_the_announcement_spacing_are_announced_once_after_it() {
    let coordinator = Arc::new(TestCoordinator {
        tuning: CoordinationTuning {
            announce_spacing: Duration::from_millis(500),
            ..TestCoordinator::default().tuning
        },
        ..TestCoordinator::default()
    });
    coordinator.release_first_announcement.add_permits(1);
    let (engine, _store, _clock) = coordinated(coordinator.clone()).await;
    engine.start();
    let made = || coordinator.announced.load(SeqCst);
    let queue = || async {
        let thread = new_thread(&engine).await;
        unscoped(&engine)
            .runs()
            .create(RunTarget::Thread(thread), run_body("echo", json!({})))
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
    let run = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), run_body("echo", json!({})))
        .await
        .unwrap();
    let claimed = store.runs().claim_next(clock.now()).await.unwrap().unwrap();
    assert_eq!(claimed.run.run_id, run.run_id);

    clock.advance(Duration::from_secs(60));
    assert_eq!(
        engine.system().recover_orphaned_runs().await,
        0,
        "its claim is still held"
    );
    coordinator.claims_freed.store(true, SeqCst);
    assert_eq!(engine.system().recover_orphaned_runs().await, 1);

    let run = unscoped(&engine)
        .runs()
        .get(thread, run.run_id)
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Error);
    assert_eq!(run.error.unwrap().error, "ExecutorLost");
    assert_eq!(
        unscoped(&engine)
            .threads()
            .get(thread)
            .await
            .unwrap()
            .status,
        ThreadStatus::Error
    );
}

/// A run created and waited on on one instance but executed by another: the waiting
/// instance's bus gets none of its frames, so the wait ends once the run has settled
/// in the store, with the stored result, instead of never.
#[tokio::test]
async fn a_wait_ends_when_its_run_settles_on_another_instance() {
    let coordinator = Arc::new(TestCoordinator {
        tuning: CoordinationTuning {
            check_interval: Duration::from_millis(20),
            ..TestCoordinator::default().tuning
        },
        ..TestCoordinator::default()
    });
    let (waiting, executing) = two_instances(coordinator).await;
    let thread = new_thread(&waiting).await;
    let input = json!({"messages": [{"type": "human", "content": "across"}]});
    let (run, subscription) = unscoped(&waiting)
        .runs()
        .create_watched(RunTarget::Thread(thread), run_body("echo", input))
        .await
        .unwrap();
    // Started after the run exists, so its workers find it on their first look.
    executing.start();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        unscoped(&waiting).runs().wait(subscription),
    )
    .await
    .expect("the wait ends");
    let settled = executing
        .system()
        .store()
        .runs()
        .get(run.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(settled.status, RunStatus::Success);
    assert!(
        result["messages"]
            .as_array()
            .is_some_and(|messages| !messages.is_empty()),
        "the stored result: {result}"
    );
}

/// A run executing on one instance stops once another records its cancel, on every
/// path that records one there (a cancel, a bulk cancel, an interrupting run, the
/// thread's deletion). The executing instance would look for it in the store only
/// after an hour, so only the announcement can have stopped it.
#[tokio::test]
async fn a_cancel_recorded_on_another_instance_stops_the_run_through_its_announcement() {
    let coordinator = Arc::new(TestCoordinator::default());
    assert_eq!(coordinator.tuning.check_interval, Duration::from_secs(3600));
    let (executing, requesting) = two_instances(coordinator).await;
    // Only this one executes runs: each run below is created through it.
    executing.start();

    let thread = new_thread(&executing).await;
    let run = running_slow_run(&executing, thread).await;
    unscoped(&requesting)
        .runs()
        .cancel(thread, run.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    assert_eq!(settled(&executing, &run).await.status, RunStatus::Cancelled);

    let run = running_slow_run(&executing, thread).await;
    let bulk = service_types::BulkCancel {
        thread_id: Some(thread),
        run_ids: Some(vec![run.run_id]),
        ..Default::default()
    };
    unscoped(&requesting)
        .runs()
        .cancel_many(bulk, CancelAction::Interrupt)
        .await
        .unwrap();
    assert_eq!(settled(&executing, &run).await.status, RunStatus::Cancelled);

    let run = running_slow_run(&executing, thread).await;
    let mut interrupting = run_body("echo", json!({}));
    interrupting.multitask_strategy = Some(MultitaskStrategy::Interrupt);
    unscoped(&requesting)
        .runs()
        .create(RunTarget::Thread(thread), interrupting)
        .await
        .unwrap();
    assert_eq!(settled(&executing, &run).await.status, RunStatus::Cancelled);

    let thread = new_thread(&executing).await;
    running_slow_run(&executing, thread).await;
    unscoped(&requesting)
        .threads()
        .delete(thread)
        .await
        .unwrap();
    idle_workers(&executing, executing.config().run_concurrency).await;
}
