//! What a claim by id reports besides the run: whether it is the first run of its
//! thread to start, so a run made with its thread knows, once claimed, that no run
//! wrote a checkpoint there before it.

use service_store::{ClaimNext, NewRun, ThreadMirror, ThreadRunCreated};
use service_types::{RunStatus, ThreadStatus};
use uuid::Uuid;

use crate::harness::{Factory, Harness, settlement};

/// A claim by id, and the claim of a settle's next run, say whether any run of the
/// thread (the claimed one included) had started before: a run created claimed, or
/// claimed by id or by `claim_next`, had; a pending or cancelled one never did. A run
/// made with its thread and overtaken by a run queued there later is not the first.
pub async fn run_claim_says_whether_its_thread_had_a_run_started(factory: Factory) {
    let harness = Harness::new(&factory).await;
    let h = &harness;
    let first_by_id = |run_id| async move {
        let claimed = h.store.runs().claim(run_id, h.now()).await.expect("claim");
        let claimed = claimed.expect("claimable");
        assert_eq!(claimed.run.run_id, run_id);
        claimed.first_on_thread
    };
    let settle = |run_id| async move {
        h.store
            .runs()
            .settle(run_id, settlement(RunStatus::Success))
            .await
            .expect("settle");
    };
    let with_thread = |claimed: bool| async move {
        let thread_id = Uuid::now_v7();
        let thread = service_store::NewThread {
            thread_id,
            metadata: Default::default(),
            status: ThreadStatus::Busy,
            ttl: None,
        };
        let run = NewRun {
            claimed,
            ..h.new_run(thread_id)
        };
        let created = h.store.runs().create_with_thread(thread, run).await;
        let Ok(ThreadRunCreated::Created(run)) = created else {
            panic!("a fresh thread id is created: {created:?}");
        };
        run
    };

    // Made with its thread; a run queued there later starts first.
    let made = with_thread(false).await;
    let later = h.run_on(made.thread_id).await.run_id;
    assert!(first_by_id(later).await, "the made run never started");
    settle(later).await;
    assert!(!first_by_id(made.run_id).await, "overtaken");
    settle(made.run_id).await;

    // A run cancelled before it started does not count; one created claimed does.
    let thread = h.thread().await.thread_id;
    let cancelled = h.run_on(thread).await.run_id;
    h.store
        .runs()
        .request_cancel(cancelled, "cancelled")
        .await
        .expect("cancel");
    let first = h.run_on(thread).await.run_id;
    assert!(first_by_id(first).await, "only a cancelled run came before");
    settle(first).await;
    let created_claimed = with_thread(true).await;
    settle(created_claimed.run_id).await;
    let after_created = h.run_on(created_claimed.thread_id).await.run_id;
    assert!(
        !first_by_id(after_created).await,
        "a run created claimed started"
    );
    settle(after_created).await;
    // One claimed by `claim_next` did too.
    let thread = h.thread().await.thread_id;
    settle(h.started_run(thread).await.run_id).await;
    let after_next = h.run_on(thread).await.run_id;
    assert!(
        !first_by_id(after_next).await,
        "a run claimed by claim_next"
    );
    settle(after_next).await;

    // A settle's claim of the next run says the same.
    let claimed_in_settle = |next| async move {
        let settling = with_thread(true).await.run_id;
        let mirror = ThreadMirror {
            status: ThreadStatus::Idle,
            values: None,
            interrupts: Default::default(),
            error: None,
        };
        let next = ClaimNext {
            run_id: next,
            now: h.now(),
        };
        let outcome = h
            .store
            .runs()
            .settle_and_mirror(settling, settlement(RunStatus::Success), mirror, Some(next))
            .await
            .expect("settle");
        let claimed = outcome.next.expect("the next run is claimed");
        assert_eq!(claimed.run.run_id, next.run_id);
        claimed.first_on_thread
    };
    let made = with_thread(false).await;
    assert!(
        claimed_in_settle(made.run_id).await,
        "the thread's first run"
    );
    settle(made.run_id).await;
    let second = h.run_on(made.thread_id).await.run_id;
    assert!(!claimed_in_settle(second).await, "the thread's second run");
    settle(second).await;
}
