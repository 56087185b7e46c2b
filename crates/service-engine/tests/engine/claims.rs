//! How a run gets to a worker: claimed by id, with its predecessor's settle, or at
//! its creation for an idle worker.

use crate::observed::*;
use crate::support::*;

/// A worker takes the next run its instance queued in the same step as the settle of
/// the run it finishes: with one worker and three runs queued behind a running one,
/// on threads of their own, only the first run is claimed by id.
#[tokio::test]
async fn a_worker_claims_its_next_queued_run_with_its_settle() {
    let (engine, runs) = one_worker_on_runs(ObservedRuns::default()).await;
    let first = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(new_thread(&engine).await),
            run_body("slow", json!({"delay_ms": 300})),
        )
        .await
        .unwrap();
    let mut queued = Vec::new();
    for n in 0..3 {
        let input = json!({"messages": [{"type": "human", "content": format!("hi {n}")}]});
        let thread = new_thread(&engine).await;
        let run = unscoped(&engine)
            .runs()
            .create(RunTarget::Thread(thread), run_body("echo", input))
            .await
            .unwrap();
        queued.push(run);
    }
    settled(&engine, &first).await;
    for (n, run) in queued.iter().enumerate() {
        assert_eq!(
            result_of(&engine, run.run_id).await["messages"][1]["content"],
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
    idle_workers(&engine, 1).await;

    let (target, body) = echo_on_new_thread("watched");
    let (run, _frames) = unscoped(&engine)
        .runs()
        .create_watched(target, body)
        .await
        .unwrap();
    assert_eq!(
        result_of(&engine, run.run_id).await["messages"][1]["content"],
        "echo: watched"
    );
    assert_eq!(claims(), (0, 0), "created claimed");

    let (target, body) = echo_on_new_thread("background");
    let run = unscoped(&engine).runs().create(target, body).await.unwrap();
    assert_eq!(run.status, RunStatus::Pending);
    settled(&engine, &run).await;
    assert_eq!(claims(), (1, 0), "queued, then claimed by id");

    // The one worker is busy: a watched run waits, pending, for it.
    let slow = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(new_thread(&engine).await),
            run_body("slow", json!({"delay_ms": 300})),
        )
        .await
        .unwrap();
    let slow = eventually(|| async {
        let run = engine
            .system()
            .store()
            .runs()
            .get(slow.run_id)
            .await
            .ok()??;
        (run.status == RunStatus::Running).then_some(run)
    })
    .await;
    let (target, body) = echo_on_new_thread("behind");
    let (behind, _frames) = unscoped(&engine)
        .runs()
        .create_watched(target, body)
        .await
        .unwrap();
    assert_eq!(
        engine
            .system()
            .store()
            .runs()
            .get(behind.run_id)
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Pending
    );
    settled(&engine, &slow).await;
    assert_eq!(
        result_of(&engine, behind.run_id).await["messages"][1]["content"],
        "echo: behind"
    );
    assert_eq!(claims(), (2, 1), "claimed with the slow run's settle");
}

/// A run created claimed is registered before its row exists, so a cancel sent the
/// moment its creation answers stops it, as it stops any running run.
#[tokio::test]
async fn a_run_created_claimed_is_cancelled_at_once() {
    let (engine, runs) = one_worker_on_runs(ObservedRuns::default()).await;
    idle_workers(&engine, 1).await;
    let thread = Uuid::now_v7();
    let mut body = run_body("slow", json!({"delay_ms": 60_000}));
    body.if_not_exists = Some(IfNotExists::Create);
    let (run, _frames) = unscoped(&engine)
        .runs()
        .create_watched(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    unscoped(&engine)
        .runs()
        .cancel(thread, run.run_id, CancelAction::Interrupt)
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
    let hold = Arc::new(Hold::default());
    let (engine, runs) = one_worker_on_runs(ObservedRuns {
        hold_claimed_creation: Some(hold.clone()),
        ..ObservedRuns::default()
    })
    .await;
    // Run creations on one thread are serialized by a gate the thread's id picks among
    // a power-of-two number of them, and the watched creation is held inside its gate:
    // ids whose lowest bits differ never share one, so the other creations go on.
    let with_low_bit = |bit: u128| Uuid::from_u128((Uuid::now_v7().as_u128() & !1) | bit);
    let mut threads = Vec::new();
    for _ in 0..3 {
        let body = ThreadCreate {
            thread_id: Some(with_low_bit(0)),
            ..ThreadCreate::default()
        };
        threads.push(
            unscoped(&engine)
                .threads()
                .create(body)
                .await
                .unwrap()
                .thread_id,
        );
    }
    idle_workers(&engine, 1).await;

    // Promised the idle worker, and held in its creation.
    let watched = tokio::spawn({
        let engine = engine.clone();
        async move {
            let mut body = run_body("echo", json!({"messages": []}));
            body.if_not_exists = Some(IfNotExists::Create);
            unscoped(&engine)
                .runs()
                .create_watched(RunTarget::Thread(with_low_bit(1)), body)
                .await
                .unwrap()
        }
    });
    hold.reached().await;
    // Meanwhile the worker takes a slow run, and two more queue behind it.
    let slow = running_slow_run(&engine, threads[0]).await;
    let mut queued = Vec::new();
    for thread in &threads[1..] {
        let run = unscoped(&engine)
            .runs()
            .create(
                RunTarget::Thread(*thread),
                run_body("echo", json!({"messages": []})),
            )
            .await
            .unwrap();
        queued.push(run);
    }
    // Created claimed now, and handed over while the worker runs the slow run.
    hold.release();
    let (watched, _frames) = watched.await.unwrap();
    unscoped(&engine)
        .runs()
        .cancel(threads[0], slow.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    for run in &queued {
        settled(&engine, run).await;
    }
    assert_eq!(
        runs.settled.lock().unwrap().clone(),
        vec![
            slow.run_id,
            watched.run_id,
            queued[0].run_id,
            queued[1].run_id
        ]
    );
}

/// `if_not_exists: create` on a thread another instance creates between this one's
/// read and its insert: the run is queued on that thread as on any existing one (its
/// metadata now names the run's graph), and runs.
#[tokio::test]
async fn a_run_whose_new_thread_another_instance_made_meanwhile_runs_on_that_thread() {
    let (engine, _) = engine_on_runs(
        ObservedRuns {
            threads_made_elsewhere: true,
            ..ObservedRuns::default()
        },
        test_clock(),
        EngineConfig::default(),
        Arc::new(InMemorySaver::new()),
    )
    .await;
    let thread = Uuid::now_v7();
    let mut body = run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": "hi"}]}),
    );
    body.if_not_exists = Some(IfNotExists::Create);
    let run = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    assert_eq!(run.thread_id, thread);
    assert_eq!(
        result_of(&engine, run.run_id).await["messages"][1]["content"],
        "echo: hi"
    );
    let made = unscoped(&engine).threads().get(thread).await.unwrap();
    assert_eq!(
        (
            made.metadata["made"].clone(),
            made.metadata["graph_id"].clone()
        ),
        (json!("elsewhere"), json!("echo"))
    );
}
