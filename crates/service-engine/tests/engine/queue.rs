//! The queue: runs execute, one at a time per thread, in order; multitask strategies;
//! delayed runs.

use crate::support::*;

#[tokio::test]
async fn a_queued_run_executes_and_its_thread_mirrors_the_result() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let input = json!({"messages": [{"type": "human", "content": "hi"}]});
    let run = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), run_body("echo", input))
        .await
        .unwrap();
    assert_eq!(
        result_of(&engine, run.run_id).await["messages"][1]["content"],
        "echo: hi"
    );
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
    let thread = unscoped(&engine).threads().get(thread).await.unwrap();
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
            unscoped(&engine)
                .runs()
                .create(RunTarget::Thread(thread), body)
                .await
                .unwrap(),
        );
    }
    eventually(|| async {
        let first = unscoped(&engine)
            .runs()
            .get(thread, runs[0].run_id)
            .await
            .ok()?;
        (first.status == RunStatus::Running).then_some(())
    })
    .await;
    // Ten idle workers, yet the second run waits for the thread.
    let second = unscoped(&engine)
        .runs()
        .get(thread, runs[1].run_id)
        .await
        .unwrap();
    assert_eq!(second.status, RunStatus::Pending);
    assert_eq!(
        unscoped(&engine)
            .threads()
            .get(thread)
            .await
            .unwrap()
            .status,
        ThreadStatus::Busy
    );
    assert_eq!(settled(&engine, &runs[0]).await.status, RunStatus::Success);
    assert_eq!(settled(&engine, &runs[1]).await.status, RunStatus::Success);
    assert_eq!(
        unscoped(&engine)
            .threads()
            .get(thread)
            .await
            .unwrap()
            .status,
        ThreadStatus::Idle
    );
}

#[tokio::test]
async fn reject_refuses_a_second_run_while_the_thread_is_busy() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 5000})),
        )
        .await
        .unwrap();
    let mut second = run_body("echo", json!({}));
    second.multitask_strategy = Some(MultitaskStrategy::Reject);
    let error = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), second)
        .await
        .unwrap_err();
    assert_eq!(error.kind, service_engine::ErrorKind::Conflict);
}

/// Tokio's clock is paused and moved by hand beside the engine's, so the delayed-run
/// timer sleeps as it would in real time.
#[tokio::test(start_paused = true)]
async fn a_delayed_run_starts_when_due_with_no_other_work() {
    let Harness { engine, clock } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let mut body = run_body("echo", json!({"messages": []}));
    body.after_seconds = Some(30.0);
    let run = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    // A run due now on another thread runs meanwhile; the delayed one waits.
    let other = new_thread(&engine).await;
    let now = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(other),
            run_body("echo", json!({"messages": []})),
        )
        .await
        .unwrap();
    assert_eq!(settled(&engine, &now).await.status, RunStatus::Success);
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(
        unscoped(&engine)
            .runs()
            .get(thread, run.run_id)
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
    let run = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), run_body("echo", json!({})))
        .await
        .unwrap();
    // Before any worker runs (one runtime thread, no await in between).
    clock.set(queued_at.plus_millis(-1_000));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        unscoped(&engine)
            .runs()
            .get(thread, run.run_id)
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
