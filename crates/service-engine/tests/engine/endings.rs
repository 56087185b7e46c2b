//! How runs end: cancelled, timed out, failed, rolled back.

use crate::support::*;
use service_graph::checkpoint::{HookedSaver, SaverHooks};

#[tokio::test]
async fn cancel_stops_the_graph_mid_node() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let run = running_slow_run(&engine, thread).await;
    unscoped(&engine)
        .runs()
        .cancel(thread, run.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    // Settles long before the node's 60 s sleep would end.
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_ne!(
        unscoped(&engine)
            .threads()
            .get(thread)
            .await
            .unwrap()
            .status,
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
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 60_000})),
        )
        .await
        .unwrap();
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Timeout);
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

#[tokio::test]
async fn a_failed_run_records_its_error_chain_on_the_run_and_the_thread() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("fail", json!({"messages": []})),
        )
        .await
        .unwrap();
    let body = result_of(&engine, run.run_id).await;
    assert_eq!(body["__error__"]["message"], "boom");
    assert_eq!(body["__error__"]["cause"]["message"], "root cause");
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Error);
    assert_eq!(run.error.unwrap().message, "boom");
    let thread = unscoped(&engine).threads().get(thread).await.unwrap();
    assert_eq!(thread.status, ThreadStatus::Error);
    assert_eq!(thread.error.as_deref(), Some("boom"));
    assert_eq!(thread.metadata["error"], "boom");
}

/// Notes, when a run's checkpoints are deleted, the status that run has in the store
/// at that moment.
#[derive(Default)]
struct RollbackWitness {
    store: std::sync::OnceLock<service_store::Store>,
    seen: std::sync::Mutex<Vec<RunStatus>>,
}

#[async_trait::async_trait]
impl SaverHooks for RollbackWitness {
    async fn deleting_run(&self, _thread_id: &str, run_id: &str) {
        let store = self.store.get().expect("the store is set");
        let run = store
            .runs()
            .get(run_id.parse().expect("a run id"))
            .await
            .expect("read the run")
            .expect("the run exists");
        self.seen.lock().unwrap().push(run.status);
    }
}

/// A run cancelled with rollback loses its checkpoints while it is still running: once
/// it is settled, the thread's next run may start, and must not read them.
#[tokio::test]
async fn a_rolled_back_run_loses_its_checkpoints_before_it_settles() {
    let witness = Arc::new(HookedSaver::<RollbackWitness>::default());
    let checkpointer: Arc<dyn Checkpointer> = witness.clone();
    let harness = harness_with(EngineConfig::default(), checkpointer.clone());
    witness
        .hooks
        .store
        .set(harness.engine.system().store().clone())
        .ok();
    let Harness { engine, .. } = start(harness).await;

    let thread = new_thread(&engine).await;
    let run = running_slow_run(&engine, thread).await;
    unscoped(&engine)
        .runs()
        .cancel(thread, run.run_id, CancelAction::Rollback)
        .await
        .unwrap();
    eventually(|| async {
        unscoped(&engine)
            .runs()
            .get(thread, run.run_id)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    assert_eq!(
        *witness.hooks.seen.lock().unwrap(),
        vec![RunStatus::Running]
    );
    let history = checkpointer
        .list(
            &service_graph::CheckpointConfig::new(thread.to_string(), None),
            service_graph::CheckpointListOptions::default(),
        )
        .await
        .unwrap();
    assert!(history.is_empty(), "the run's checkpoints are gone");
    assert_ne!(
        unscoped(&engine)
            .threads()
            .get(thread)
            .await
            .unwrap()
            .status,
        ThreadStatus::Busy
    );
}

/// A run whose stored options do not decode (written by another version, or edited
/// by hand) fails with an error naming what is wrong; it never runs with defaults.
#[tokio::test]
async fn a_run_whose_stored_options_do_not_decode_fails_naming_them() {
    let harness = harness(EngineConfig::default());
    let engine = &harness.engine;
    engine.system().ensure_system_assistants().await.unwrap();
    let assistant = unscoped(engine).assistants().get("echo").await.unwrap();
    let thread = new_thread(engine).await;
    let run_id = Uuid::now_v7();
    engine
        .system()
        .store()
        .runs()
        .create(
            service_store::NewRun {
                run_id,
                thread_id: thread,
                assistant_id: assistant.assistant_id,
                metadata: Default::default(),
                multitask_strategy: None,
                kwargs: json!({"input": {}, "stream_mode": "everything"}),
                available_at: harness.clock.now(),
                assistant_as_read: None,
                claimed: false,
                traceparent: None,
            },
            Default::default(),
        )
        .await
        .unwrap();
    // A starting instance searches the queue for what was queued before it.
    engine.start();
    let run = unscoped(engine).runs().get(thread, run_id).await.unwrap();
    let run = settled(engine, &run).await;
    assert_eq!(run.status, RunStatus::Error);
    let error = run.error.unwrap();
    assert_eq!(error.error, "RunOptionsError");
    assert!(
        error.chain_summary().contains("stream_mode"),
        "names the field: {}",
        error.chain_summary()
    );
}

/// An engine built without a webhook sender refuses a run (or cron) carrying a
/// webhook rather than accept a callback it would never send.
#[tokio::test]
async fn an_engine_without_webhooks_refuses_runs_that_carry_one() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let body = RunCreate {
        webhook: Some("https://hooks.example.com/x".into()),
        ..run_body("echo", json!({}))
    };
    let error = unscoped(&engine)
        .runs()
        .create(RunTarget::Stateless, body.clone())
        .await
        .unwrap_err();
    assert_eq!(error.kind, service_engine::ErrorKind::Unprocessable);
    assert!(error.message.contains("webhooks"), "{}", error.message);
    let cron = CronCreate {
        schedule: "*/5 * * * *".into(),
        run: body,
        ..CronCreate::default()
    };
    let error = unscoped(&engine)
        .crons()
        .create(None, cron)
        .await
        .unwrap_err();
    assert_eq!(error.kind, service_engine::ErrorKind::Unprocessable);
}

#[tokio::test]
async fn a_cancelled_run_reads_back_with_why_it_was_cancelled() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let reason_of = |run: Run| run.cancel_reason;

    let run = running_slow_run(&engine, thread).await;
    let cancelled = unscoped(&engine)
        .runs()
        .cancel(thread, run.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    let requested = "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel";
    // Recorded with the request, before the run has stopped.
    assert_eq!(cancelled.cancel_reason.as_deref(), Some(requested));
    let run = settled(&engine, &run).await;
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(reason_of(run).as_deref(), Some(requested));

    let run = running_slow_run(&engine, thread).await;
    let bulk = service_types::BulkCancel {
        thread_id: Some(thread),
        run_ids: Some(vec![run.run_id]),
        ..Default::default()
    };
    unscoped(&engine)
        .runs()
        .cancel_many(bulk, CancelAction::Interrupt)
        .await
        .unwrap();
    assert_eq!(
        reason_of(settled(&engine, &run).await).as_deref(),
        Some("interrupt requested via POST /runs/cancel")
    );

    let run = running_slow_run(&engine, thread).await;
    let mut interrupting = run_body("echo", json!({}));
    interrupting.multitask_strategy = Some(MultitaskStrategy::Interrupt);
    let newer = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), interrupting)
        .await
        .unwrap();
    assert_eq!(
        reason_of(settled(&engine, &run).await),
        Some(format!(
            "superseded by run {} (multitask_strategy=interrupt)",
            newer.run_id
        ))
    );
    let newer = settled(&engine, &newer).await;
    assert_eq!(
        (newer.status, newer.cancel_reason),
        (RunStatus::Success, None)
    );
}
