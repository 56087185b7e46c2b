//! A run's trace context (`Run::traceparent`): stored beside the run, never in the
//! kwargs its clients read, and handed back by every read a worker or the outbox
//! starts a span from.

use service_store::{ActiveRunsQuery, NewRun, RunListQuery, ThreadRunCreated};
use uuid::Uuid;

use crate::harness::{Factory, Harness, busy_thread};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The traceparent a run was created with comes back from its creation, a read by id,
/// the thread's list, latest and active runs, and both claims; a run created without
/// one has none, and neither's kwargs gain one.
pub async fn run_keeps_its_traceparent_beside_its_kwargs(factory: Factory) {
    let harness = Harness::new(&factory).await;
    let h = &harness;
    let traced = |thread_id| NewRun {
        traceparent: Some(TRACEPARENT.to_owned()),
        ..h.new_run(thread_id)
    };
    let expect_traced = |run: &service_types::Run, read: &str| {
        assert_eq!(run.traceparent.as_deref(), Some(TRACEPARENT), "{read}");
        assert!(run.kwargs.get("traceparent").is_none(), "{read}");
    };

    // On an existing thread, pending, then claimed as the next run.
    let thread = h.thread().await;
    let created = h
        .store
        .runs()
        .create(traced(thread.thread_id), Default::default())
        .await
        .expect("create");
    expect_traced(&created, "create");
    let read = h.store.runs().get(created.run_id).await.expect("get");
    expect_traced(&read.expect("the run exists"), "get");
    let listed = h
        .store
        .runs()
        .list(thread.thread_id, &RunListQuery::default())
        .await
        .expect("list");
    expect_traced(&listed[0], "list");
    let latest = h
        .store
        .runs()
        .latest(thread.thread_id)
        .await
        .expect("latest");
    expect_traced(&latest.expect("a latest run"), "latest");
    let active = h
        .store
        .runs()
        .active(&ActiveRunsQuery {
            thread_id: Some(thread.thread_id),
            ..Default::default()
        })
        .await
        .expect("active");
    expect_traced(&active[0], "active");
    let claimed = h
        .store
        .runs()
        .claim_next(h.now())
        .await
        .expect("claim next");
    expect_traced(&claimed.expect("claimable").run, "claim next");

    // With its thread, then claimed by id; and one created without a context.
    let thread_id = Uuid::now_v7();
    let new_thread = busy_thread(thread_id);
    let created = h
        .store
        .runs()
        .create_with_thread(new_thread, traced(thread_id))
        .await;
    let Ok(ThreadRunCreated::Created(created)) = created else {
        panic!("a fresh thread id is created: {created:?}");
    };
    expect_traced(&created, "create with thread");
    let claimed = h.store.runs().claim(created.run_id, h.now()).await;
    expect_traced(&claimed.expect("claim").expect("claimable").run, "claim");

    let untraced = h.run_on(h.thread().await.thread_id).await;
    assert_eq!(untraced.traceparent, None);
    let read = h.store.runs().get(untraced.run_id).await.expect("get");
    assert_eq!(read.expect("the run exists").traceparent, None);
}
