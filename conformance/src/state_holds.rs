//! State holds: an edit of a thread's state never races a run of the thread. A hold
//! is refused while a run is active, and while it lives no run of the thread starts.

use service_store::{ClaimNext, ErrorKind, ThreadMirror};
use service_types::{RunStatus, ThreadStatus};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind, settlement};

/// A hold is refused while a run of the thread is pending or running, or another hold
/// lives; an unknown thread is `NotFound`.
pub async fn state_hold_is_refused_while_the_thread_is_busy(factory: Factory) {
    let h = Harness::new(&factory).await;
    let until = h.now().plus_minutes(1.0);
    let threads = h.store.threads();
    let thread = h.thread().await.thread_id;
    let pending = h.run_on(thread).await.run_id;
    let refused = threads.hold_state(thread, until).await;
    assert_kind(refused, ErrorKind::Conflict);
    let claimed = h.store.runs().claim_next(h.now()).await.expect("claim");
    assert_eq!(claimed.map(|claimed| claimed.run.run_id), Some(pending));
    assert_kind(threads.hold_state(thread, until).await, ErrorKind::Conflict);
    h.store
        .runs()
        .settle(pending, settlement(RunStatus::Success))
        .await
        .expect("settle");
    let hold = threads
        .hold_state(thread, until)
        .await
        .expect("an idle thread");
    let second = threads.hold_state(thread, until).await;
    let message = second.as_ref().map_err(|error| error.message.clone()).err();
    assert_eq!(
        message.as_deref(),
        Some("Thread is busy with a running job. Cannot update state."),
        "a second edit meanwhile is refused"
    );
    threads.release_state(hold).await.expect("release");
    threads.hold_state(thread, until).await.expect("held again");
    assert_kind(
        threads.hold_state(Uuid::now_v7(), until).await,
        ErrorKind::NotFound,
    );
}

/// While a hold lives, runs created on the thread stay pending: no claim takes them
/// (next, by id, or with a settle); after the release they run.
pub async fn state_hold_keeps_the_threads_runs_pending_until_released(factory: Factory) {
    let h = Harness::new(&factory).await;
    let threads = h.store.threads();
    let held = h.thread().await.thread_id;
    let hold = threads
        .hold_state(held, h.now().plus_minutes(1.0))
        .await
        .expect("hold");
    let waiting = h.run_on(held).await.run_id;
    let claim_next = || async {
        h.store
            .runs()
            .claim_next(h.now())
            .await
            .expect("claim")
            .map(|claimed| claimed.run.run_id)
    };
    assert_eq!(claim_next().await, None);
    assert_eq!(
        h.store.runs().claim(waiting, h.now()).await.expect("claim"),
        None
    );
    let other = h.started_run(h.thread().await.thread_id).await.run_id;
    let idle = ThreadMirror {
        status: ThreadStatus::Idle,
        values: None,
        interrupts: Default::default(),
        error: None,
    };
    let next = ClaimNext {
        run_id: waiting,
        now: h.now(),
    };
    let settled = h
        .store
        .runs()
        .settle_and_mirror(other, settlement(RunStatus::Success), idle, Some(next))
        .await
        .expect("settle");
    assert_eq!(
        settled.next, None,
        "a settle claims no run of a held thread"
    );
    threads.release_state(hold).await.expect("release");
    assert_eq!(claim_next().await, Some(waiting));
}

/// A hold whose lease passed (its holder died) no longer keeps runs waiting, and its
/// late release leaves a newer hold alone; deleting the thread ends its hold.
pub async fn state_hold_lease_ends_it_and_a_late_release_keeps_the_next(factory: Factory) {
    let h = Harness::new(&factory).await;
    let threads = h.store.threads();
    let thread = h.thread().await.thread_id;
    let stale = threads
        .hold_state(thread, h.now().plus_minutes(1.0))
        .await
        .expect("hold");
    h.advance_minutes(2.0);
    let fresh = threads
        .hold_state(thread, h.now().plus_minutes(1.0))
        .await
        .expect("the lease passed");
    threads.release_state(stale).await.expect("late release");
    let run = h.run_on(thread).await.run_id;
    let claimed = h.store.runs().claim_next(h.now()).await.expect("claim");
    assert_eq!(claimed, None, "the newer hold still lives");
    h.advance_minutes(2.0);
    let claimed = h.store.runs().claim_next(h.now()).await.expect("claim");
    assert_eq!(claimed.map(|claimed| claimed.run.run_id), Some(run));
    threads.release_state(fresh).await.expect("release");
    let gone = h.thread().await.thread_id;
    let hold = threads
        .hold_state(gone, h.now().plus_minutes(1.0))
        .await
        .expect("hold");
    threads.delete(gone).await.expect("delete");
    threads
        .release_state(hold)
        .await
        .expect("release after delete");
}
