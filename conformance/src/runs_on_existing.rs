//! Runs on an existing thread: created claimed only while the thread is free for them,
//! and the thread read with its active runs (what such a run is checked against).

use service_store::ActiveRunsQuery;
use service_types::{Metadata, RunStatus, ThreadStatus};
use uuid::Uuid;

use crate::harness::{Factory, Harness, settlement};
use crate::runs::settles_as_started;

/// A run created claimed on an existing thread starts running (started: its settle
/// writes a delivery) only when the thread is free for it: no other pending or running
/// run and no live state hold; else it is queued pending, and claimed later as any.
pub async fn run_create_claimed_on_existing_thread_starts_only_if_free(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread_id = h.thread().await.thread_id;
    let claimed = || service_store::NewRun {
        claimed: true,
        ..h.new_run(thread_id)
    };
    let create = |new| h.store.runs().create(new, Metadata::new());
    let first = create(claimed()).await.expect("create");
    assert_eq!(
        (first.status, first.created_at, first.updated_at),
        (RunStatus::Running, h.now(), h.now())
    );
    assert_eq!(
        h.store.runs().get(first.run_id).await.expect("get"),
        Some(first.clone())
    );
    assert_eq!(
        h.store
            .threads()
            .get(thread_id)
            .await
            .expect("get")
            .map(|t| t.status),
        Some(ThreadStatus::Busy)
    );
    let behind_running = create(claimed()).await.expect("create");
    assert_eq!(behind_running.status, RunStatus::Pending);
    settles_as_started(&h, first.run_id).await;
    let behind_pending = create(claimed()).await.expect("create");
    assert_eq!(
        behind_pending.status,
        RunStatus::Pending,
        "a pending run of the thread goes first"
    );
    let next = h.store.runs().claim_next(h.now()).await.expect("claim");
    assert_eq!(
        next.map(|next| next.run.run_id),
        Some(behind_running.run_id)
    );

    let held = h.thread().await.thread_id;
    let hold = h
        .store
        .threads()
        .hold_state(held, h.now().plus_minutes(1.0))
        .await
        .expect("hold");
    let on_held = service_store::NewRun {
        claimed: true,
        ..h.new_run(held)
    };
    let queued = create(on_held).await.expect("create");
    assert_eq!(queued.status, RunStatus::Pending, "a state hold lives");
    h.store
        .threads()
        .release_state(hold)
        .await
        .expect("release");
    let later = service_store::NewRun {
        claimed: true,
        available_at: h.now().plus_minutes(1.0),
        ..h.new_run(h.thread().await.thread_id)
    };
    assert_eq!(
        create(later).await.expect("create").status,
        RunStatus::Pending,
        "not due yet"
    );
}

/// A thread and its active runs read together: the runs as `active` lists them for
/// the thread (queue order, terminal runs left out); an unknown thread is `None`.
pub async fn run_thread_and_active_reads_both(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await;
    let read = |thread_id| h.store.runs().thread_and_active(thread_id);
    let idle = read(thread.thread_id).await.expect("read").expect("thread");
    assert_eq!((idle.thread, idle.active), (thread.clone(), Vec::new()));
    let done = h.started_run(thread.thread_id).await.run_id;
    h.store
        .runs()
        .settle(done, settlement(RunStatus::Success))
        .await
        .expect("settle");
    let running = h.started_run(thread.thread_id).await;
    let pending = h.run_on(thread.thread_id).await;
    let busy = read(thread.thread_id).await.expect("read").expect("thread");
    let listed = h
        .store
        .runs()
        .active(&ActiveRunsQuery {
            thread_id: Some(thread.thread_id),
            ..ActiveRunsQuery::default()
        })
        .await
        .expect("active");
    assert_eq!(
        busy.active.iter().map(|run| run.run_id).collect::<Vec<_>>(),
        vec![running.run_id, pending.run_id]
    );
    assert_eq!(busy.active, listed);
    assert_eq!(
        Some(busy.thread),
        h.store.threads().get(thread.thread_id).await.expect("get")
    );
    assert_eq!(read(Uuid::now_v7()).await.expect("read"), None);
}
