//! What a claim by id reports besides the run: whether its thread has no checkpoint,
//! so a run made with its thread knows, once claimed, that it has nothing to read.

use serde_json::json;
use service_graph::CheckpointConfig;
use service_store::{ClaimNext, NewRun, ThreadMirror, ThreadRunCreated};
use service_types::{JsonText, RunStatus, ThreadStatus};
use uuid::Uuid;

use crate::harness::{Factory, Harness, busy_thread, obj, settlement};

/// A claim by id, and the claim of a settle's next run, say whether the thread has no
/// checkpoint in the checkpointer its runs write to: a run that started and wrote
/// none leaves the thread without one; a checkpoint counts though the run that wrote
/// it was deleted since.
pub async fn run_claim_says_whether_its_thread_has_a_checkpoint(factory: Factory) {
    let harness = Harness::new(&factory).await;
    let h = &harness;
    let no_checkpoint_by_id = |run_id| async move {
        let claimed = h.store.runs().claim(run_id, h.now()).await.expect("claim");
        let claimed = claimed.expect("claimable");
        assert_eq!(claimed.run.run_id, run_id);
        claimed.thread_has_no_checkpoint
    };
    let settle = |run_id| async move {
        h.store
            .runs()
            .settle(run_id, settlement(RunStatus::Success))
            .await
            .expect("settle");
    };
    let checkpoint = |thread_id: Uuid| async move {
        h.checkpointer
            .put(
                &CheckpointConfig::new(thread_id.to_string(), None),
                JsonText::new(&json!({"step": 0})),
                obj(json!({"step": 0})),
            )
            .await
            .expect("put");
    };
    let with_thread = |claimed: bool| async move {
        let thread_id = Uuid::now_v7();
        let thread = busy_thread(thread_id);
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

    // Made with its thread; a run queued there later starts first and writes a
    // checkpoint, then is deleted.
    let made = with_thread(false).await;
    let later = h.run_on(made.thread_id).await.run_id;
    assert!(no_checkpoint_by_id(later).await, "nothing written yet");
    checkpoint(made.thread_id).await;
    settle(later).await;
    h.store.runs().delete(later).await.expect("delete");
    assert!(
        !no_checkpoint_by_id(made.run_id).await,
        "the deleted run's checkpoint stays"
    );
    settle(made.run_id).await;

    // A run that started and wrote nothing leaves nothing to read.
    let thread = h.thread().await.thread_id;
    settle(h.started_run(thread).await.run_id).await;
    let after_nothing = h.run_on(thread).await.run_id;
    assert!(no_checkpoint_by_id(after_nothing).await, "nothing written");
    settle(after_nothing).await;

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
        claimed.thread_has_no_checkpoint
    };
    let made = with_thread(false).await;
    assert!(claimed_in_settle(made.run_id).await, "an empty thread");
    checkpoint(made.thread_id).await;
    settle(made.run_id).await;
    let second = h.run_on(made.thread_id).await.run_id;
    assert!(
        !claimed_in_settle(second).await,
        "a thread with a checkpoint"
    );
    settle(second).await;
}
