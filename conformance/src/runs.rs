//! Runs as the queue: claims, cancel, the atomic settle.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use service_store::containment::Enforced;
use service_store::{
    ActiveRunsQuery, CancelOutcome, ClaimNext, Claimed, ErrorKind, NewRun, RunListQuery,
    SettledRun, Settlement, ThreadMirror, WebhookRequest,
};
use service_types::{DeliveryStatus, Metadata, RunError, RunStatus, ThreadStatus};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind, busy_thread, obj, settlement};
pub use crate::runs_claim_checkpoints::*;
pub use crate::runs_on_existing::*;
pub use crate::runs_traceparent::*;

/// The cancel reason of tests that are not about it.
const REASON: &str = "interrupt requested via POST /runs/cancel";

/// A settlement carrying a webhook.
pub fn with_webhook(status: RunStatus) -> Settlement {
    Settlement {
        webhook: Some(WebhookRequest {
            url: "https://example.test/hook".into(),
            payload: obj(json!({"run_id": "r", "values": {"n": 1}})),
            payload_truncated: false,
            run_metadata: obj(json!({"owner": "a", "tag": 1})),
            inline_lease: None,
        }),
        ..settlement(status)
    }
}

/// [`with_webhook`], its delivery row leased for `lease` from the settle for the
/// caller's inline first attempt.
pub fn with_leased_webhook(status: RunStatus, lease: std::time::Duration) -> Settlement {
    let mut settlement = with_webhook(status);
    if let Some(webhook) = &mut settlement.webhook {
        webhook.inline_lease = Some(lease);
    }
    settlement
}

/// Settles `run_id` with a webhook and checks that it had started: its settle writes
/// a delivery row exactly when the store records deliveries.
pub(crate) async fn settles_as_started(h: &Harness, run_id: Uuid) {
    let settled = h
        .store
        .runs()
        .settle(run_id, with_webhook(RunStatus::Success))
        .await
        .expect("settle");
    assert_eq!(
        settled.delivery.is_some(),
        h.store.deliveries().is_some(),
        "a started run's settle writes a delivery row when the store records them"
    );
}

/// A new run is pending; its thread must exist and its id must be new.
pub async fn run_create_is_pending_on_an_existing_thread(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await;
    let run = h.run_on(thread.thread_id).await;
    assert_eq!(
        (run.status, run.created_at, run.error.clone()),
        (RunStatus::Pending, h.now(), None)
    );
    assert_eq!(
        h.store.runs().get(run.run_id).await.expect("get"),
        Some(run.clone())
    );
    assert_kind(
        h.store
            .runs()
            .create(h.new_run(Uuid::now_v7()), Metadata::new())
            .await,
        ErrorKind::NotFound,
    );
    let duplicate = service_store::NewRun {
        run_id: run.run_id,
        ..h.new_run(thread.thread_id)
    };
    assert_kind(
        h.store.runs().create(duplicate, Metadata::new()).await,
        ErrorKind::Conflict,
    );
}

/// A run created on an existing thread marks the thread busy and merges the given
/// metadata into it in the same step; a create that fails (unknown thread, run id in
/// use, assistant changed since read) leaves the thread as it was.
pub async fn run_create_marks_its_thread_busy_or_changes_nothing(factory: Factory) {
    let h = Harness::new(&factory).await;
    let assistant = h.assistant().await;
    let thread = h.thread_with(json!({"owner": "x"})).await;
    let latest = || obj(json!({"graph_id": "echo", "assistant_id": "a"}));
    h.clock.advance_minutes(1.0);
    let first = h
        .store
        .runs()
        .create(h.new_run(thread.thread_id), latest())
        .await
        .expect("create");
    let busy = h.store.threads().get(thread.thread_id).await.expect("get");
    let busy = busy.expect("the thread exists");
    assert_eq!(busy.status, ThreadStatus::Busy);
    assert_eq!(
        serde_json::Value::Object(busy.metadata.clone()),
        json!({"owner": "x", "graph_id": "echo", "assistant_id": "a"})
    );
    assert_eq!(busy.updated_at, h.now());

    // Back to idle, so a failed create that touched the thread would show.
    h.store
        .threads()
        .set_status(thread.thread_id, ThreadStatus::Idle)
        .await
        .expect("idle");
    let before = h.store.threads().get(thread.thread_id).await.expect("get");
    h.clock.advance_minutes(1.0);
    let other = || obj(json!({"graph_id": "other"}));

    let duplicate = service_store::NewRun {
        run_id: first.run_id,
        ..h.new_run(thread.thread_id)
    };
    assert_kind(
        h.store.runs().create(duplicate, other()).await,
        ErrorKind::Conflict,
    );
    let patch = service_store::AssistantPatch {
        name: Some("b".into()),
        ..Default::default()
    };
    h.store
        .assistants()
        .update(assistant.assistant_id, patch)
        .await
        .expect("update");
    let stale = service_store::NewRun {
        assistant_id: assistant.assistant_id,
        assistant_as_read: Some(service_store::AssistantStamp::of(&assistant)),
        ..h.new_run(thread.thread_id)
    };
    assert_kind(
        h.store.runs().create(stale, other()).await,
        ErrorKind::Stale,
    );
    assert_eq!(
        h.store.threads().get(thread.thread_id).await.expect("get"),
        before,
        "a failed create leaves the thread as it was"
    );
}

/// A thread made for its run is created with the run in one step: both readable after;
/// an existing thread, or a run id in use, writes nothing (an existing thread is
/// returned as stored).
pub async fn run_create_with_thread_writes_both_or_neither(factory: Factory) {
    let h = Harness::new(&factory).await;
    let new_thread = |thread_id| service_store::NewThread {
        thread_id,
        metadata: obj(json!({"graph_id": "echo"})),
        status: service_types::ThreadStatus::Busy,
        ttl: Some(service_types::TtlSetting::Minutes(10.0)),
    };
    let thread_id = Uuid::now_v7();
    let service_store::ThreadRunCreated::Created(run) = h
        .store
        .runs()
        .create_with_thread(new_thread(thread_id), h.new_run(thread_id))
        .await
        .expect("create")
    else {
        panic!("a fresh thread id is created");
    };
    assert_eq!(
        (run.status, run.thread_id, run.created_at),
        (RunStatus::Pending, thread_id, h.now())
    );
    assert_eq!(
        h.store.runs().get(run.run_id).await.expect("get"),
        Some(run.clone())
    );
    let thread = h
        .store
        .threads()
        .get(thread_id)
        .await
        .expect("get")
        .expect("thread created");
    assert_eq!(
        (thread.status, thread.metadata, thread.created_at),
        (
            service_types::ThreadStatus::Busy,
            obj(json!({"graph_id": "echo"})),
            h.now()
        )
    );
    assert_eq!(thread.ttl.expect("ttl").ttl_minutes, 10.0);

    // The thread exists: nothing is written, and the thread comes back as stored.
    let again = h.new_run(thread_id);
    let existing = h
        .store
        .runs()
        .create_with_thread(new_thread(thread_id), again.clone())
        .await
        .expect("create on an existing thread");
    let stored = h.store.threads().get(thread_id).await.expect("get");
    assert_eq!(
        existing,
        service_store::ThreadRunCreated::ThreadExists(stored)
    );
    assert_eq!(h.store.runs().get(again.run_id).await.expect("get"), None);

    let fresh = Uuid::now_v7();
    let reused = service_store::NewRun {
        run_id: run.run_id,
        ..h.new_run(fresh)
    };
    assert_kind(
        h.store
            .runs()
            .create_with_thread(new_thread(fresh), reused)
            .await,
        ErrorKind::Conflict,
    );
    assert_eq!(
        h.store.threads().get(fresh).await.expect("get"),
        None,
        "no thread without its run"
    );
    assert_kind(
        h.store
            .runs()
            .create_with_thread(new_thread(Uuid::now_v7()), h.new_run(fresh))
            .await,
        ErrorKind::Invalid,
    );
}

/// A run created claimed with its thread is running and started at once: no claim
/// takes it, its thread's next run waits behind it, and its settle with a webhook
/// writes a delivery. `create` refuses a claimed run.
pub async fn run_create_with_thread_claimed_is_running_and_started(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread_id = Uuid::now_v7();
    let new_thread = service_store::NewThread {
        thread_id,
        metadata: obj(json!({"graph_id": "echo"})),
        status: service_types::ThreadStatus::Busy,
        ttl: None,
    };
    let claimed = service_store::NewRun {
        claimed: true,
        ..h.new_run(thread_id)
    };
    let service_store::ThreadRunCreated::Created(run) = h
        .store
        .runs()
        .create_with_thread(new_thread, claimed)
        .await
        .expect("create")
    else {
        panic!("a fresh thread id is created");
    };
    assert_eq!(
        (run.status, run.created_at, run.updated_at),
        (RunStatus::Running, h.now(), h.now())
    );
    assert_eq!(
        h.store.runs().get(run.run_id).await.expect("get"),
        Some(run.clone())
    );
    let next = h.run_on(thread_id).await.run_id;
    assert!(
        h.store
            .runs()
            .claim_next(h.now())
            .await
            .expect("claim")
            .is_none(),
        "nothing to claim: the run is taken and its thread busy"
    );
    assert_eq!(
        h.store.runs().claim(next, h.now()).await.expect("claim"),
        None
    );
    settles_as_started(&h, run.run_id).await;
    let by_id = h.store.runs().claim(next, h.now()).await.expect("claim");
    assert_eq!(by_id.map(|claimed| claimed.run.run_id), Some(next));
}

/// A run built from its assistant as read earlier is queued only while the assistant
/// is still in that state: once it changed (or went), nothing is written (`Stale`).
pub async fn run_create_requires_its_assistant_unchanged_when_asked(factory: Factory) {
    let h = Harness::new(&factory).await;
    let assistant = h.assistant().await;
    let as_read = |thread_id| service_store::NewRun {
        assistant_id: assistant.assistant_id,
        assistant_as_read: Some(service_store::AssistantStamp::of(&assistant)),
        claimed: false,
        ..h.new_run(thread_id)
    };
    let thread = h.thread().await.thread_id;
    h.store
        .runs()
        .create(as_read(thread), Metadata::new())
        .await
        .expect("the assistant is as read");

    let patch = service_store::AssistantPatch {
        name: Some("b".into()),
        ..Default::default()
    };
    let changed = h
        .store
        .assistants()
        .update(assistant.assistant_id, patch)
        .await
        .expect("update");
    let stale = as_read(thread);
    assert_kind(
        h.store.runs().create(stale.clone(), Metadata::new()).await,
        ErrorKind::Stale,
    );
    assert_eq!(h.store.runs().get(stale.run_id).await.expect("get"), None);
    let new_thread = busy_thread;
    let fresh = Uuid::now_v7();
    assert_kind(
        h.store
            .runs()
            .create_with_thread(new_thread(fresh), as_read(fresh))
            .await,
        ErrorKind::Stale,
    );
    assert_eq!(h.store.threads().get(fresh).await.expect("get"), None);

    let current = service_store::NewRun {
        assistant_as_read: Some(service_store::AssistantStamp::of(&changed)),
        claimed: false,
        ..as_read(fresh)
    };
    let created = h
        .store
        .runs()
        .create_with_thread(new_thread(fresh), current)
        .await
        .expect("the assistant as it is now");
    assert!(matches!(
        created,
        service_store::ThreadRunCreated::Created(_)
    ));

    h.store
        .assistants()
        .delete(assistant.assistant_id)
        .await
        .expect("delete");
    let gone = service_store::NewRun {
        assistant_as_read: Some(service_store::AssistantStamp::of(&changed)),
        claimed: false,
        ..as_read(thread)
    };
    assert_kind(
        h.store.runs().create(gone, Metadata::new()).await,
        ErrorKind::Stale,
    );
}

/// A claim says whether another run may be due: surely when one is claimable, never
/// when none is pending and due.
pub async fn run_claim_tells_whether_more_runs_wait(factory: Factory) {
    let h = Harness::new(&factory).await;
    let a = h.thread().await.thread_id;
    let b = h.thread().await.thread_id;
    h.run_on(a).await;
    h.run_on(b).await;
    let later = service_store::NewRun {
        available_at: h.now().plus_minutes(1.0),
        ..h.new_run(h.thread().await.thread_id)
    };
    h.store
        .runs()
        .create(later, Metadata::new())
        .await
        .expect("create");
    let claim = || async { h.store.runs().claim_next(h.now()).await.expect("claim") };
    assert!(claim().await.expect("first").more_pending, "b's run is due");
    assert!(
        !claim().await.expect("second").more_pending,
        "only a run not yet due is left"
    );
    assert_eq!(claim().await, None);
}

/// One thread runs one run at a time: the next claim skips it until the running run
/// settles, and meanwhile takes other threads' runs.
pub async fn run_claim_serializes_runs_of_one_thread(factory: Factory) {
    let h = Harness::new(&factory).await;
    let a = h.thread().await.thread_id;
    let b = h.thread().await.thread_id;
    let a1 = h.run_on(a).await.run_id;
    let a2 = h.run_on(a).await.run_id;
    let b1 = h.run_on(b).await.run_id;
    let hr = &h;
    let claim = move || async move {
        hr.store
            .runs()
            .claim_next(hr.now())
            .await
            .expect("claim")
            .map(|claimed| claimed.run.run_id)
    };
    assert_eq!(claim().await, Some(a1));
    assert_eq!(claim().await, Some(b1));
    assert_eq!(claim().await, None);
    h.store
        .runs()
        .settle(a1, settlement(RunStatus::Success))
        .await
        .expect("settle");
    assert_eq!(claim().await, Some(a2));
    let running = h.store.runs().get(a2).await.expect("get").expect("exists");
    assert_eq!(running.status, RunStatus::Running);
}

/// A run claimed by id starts only when `claim_next` could take it: pending, due, and
/// its thread idle; claimed once.
pub async fn run_claim_by_id_takes_only_a_claimable_run(factory: Factory) {
    let h = Harness::new(&factory).await;
    let a = h.thread().await.thread_id;
    let first = h.run_on(a).await.run_id;
    let second = h.run_on(a).await.run_id;
    let delayed = service_store::NewRun {
        available_at: h.now().plus_minutes(1.0),
        ..h.new_run(h.thread().await.thread_id)
    };
    let delayed = h
        .store
        .runs()
        .create(delayed, Metadata::new())
        .await
        .expect("create")
        .run_id;
    let hr = &h;
    let claim = move |run_id| async move {
        hr.store
            .runs()
            .claim(run_id, hr.now())
            .await
            .expect("claim")
            .map(|claimed| (claimed.run.run_id, claimed.run.status))
    };
    assert_eq!(claim(first).await, Some((first, RunStatus::Running)));
    assert_eq!(claim(first).await, None, "already running");
    assert_eq!(claim(second).await, None, "its thread is busy");
    assert_eq!(claim(delayed).await, None, "not yet due");
    assert_eq!(claim(Uuid::now_v7()).await, None, "unknown");
    h.store
        .runs()
        .settle(first, settlement(RunStatus::Success))
        .await
        .expect("settle");
    assert_eq!(claim(second).await, Some((second, RunStatus::Running)));
    h.advance_minutes(1.0);
    let cancelled = h.run_on(h.thread().await.thread_id).await.run_id;
    h.store
        .runs()
        .request_cancel(cancelled, REASON)
        .await
        .expect("cancel");
    assert_eq!(claim(cancelled).await, None, "cancelled before it started");
    assert_eq!(claim(delayed).await, Some((delayed, RunStatus::Running)));
    // A run claimed by id was started: its settle with a webhook writes a delivery.
    settles_as_started(&h, delayed).await;
}

/// A delayed run is not claimed before available_at, and the worker learns when.
pub async fn run_claim_waits_for_available_at(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let due = h.now().plus_minutes(2.0);
    let delayed = service_store::NewRun {
        available_at: due,
        ..h.new_run(thread)
    };
    let run_id = h
        .store
        .runs()
        .create(delayed, Metadata::new())
        .await
        .expect("create")
        .run_id;
    assert_eq!(
        h.store.runs().claim_next(h.now()).await.expect("claim"),
        None
    );
    assert_eq!(
        h.store
            .runs()
            .next_available_at(h.now())
            .await
            .expect("next"),
        Some(due)
    );
    h.advance_minutes(2.0);
    assert_eq!(
        h.store
            .runs()
            .next_available_at(h.now())
            .await
            .expect("next"),
        None
    );
    let claimed = h.store.runs().claim_next(h.now()).await.expect("claim");
    assert_eq!(claimed.map(|claimed| claimed.run.run_id), Some(run_id));
}

/// Cancelling a pending run cancels it at once; it never starts, so no webhook.
pub async fn run_cancel_pending_is_immediate_and_sends_no_webhook(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let run_id = h.run_on(thread).await.run_id;
    let outcome = h
        .store
        .runs()
        .request_cancel(run_id, REASON)
        .await
        .expect("cancel");
    assert!(
        matches!(&outcome, CancelOutcome::Cancelled(run) if run.status == RunStatus::Cancelled)
    );
    assert_eq!(
        h.store.runs().claim_next(h.now()).await.expect("claim"),
        None
    );
    let settled = h
        .store
        .runs()
        .settle(run_id, with_webhook(RunStatus::Success))
        .await
        .expect("settle");
    assert_eq!(
        (settled.changed, settled.run.status, settled.delivery),
        (false, RunStatus::Cancelled, None)
    );
    let again = h
        .store
        .runs()
        .request_cancel(run_id, REASON)
        .await
        .expect("cancel");
    assert!(matches!(again, CancelOutcome::AlreadyTerminal(_)));
    assert_kind(
        h.store.runs().request_cancel(Uuid::now_v7(), REASON).await,
        ErrorKind::NotFound,
    );
}

/// Cancelling a running run leaves it running with a durable cancel mark.
pub async fn run_cancel_running_is_a_durable_request(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let run_id = h.started_run(thread).await.run_id;
    assert!(!h.store.runs().cancel_requested(run_id).await.expect("flag"));
    let outcome = h
        .store
        .runs()
        .request_cancel(run_id, REASON)
        .await
        .expect("cancel");
    assert!(matches!(&outcome, CancelOutcome::Requested(run) if run.status == RunStatus::Running));
    assert!(h.store.runs().cancel_requested(run_id).await.expect("flag"));
}

/// A pending run's cancel records its reason with the cancelled status; every read
/// (by id, a thread's listing, its latest run) shows it, and a run nobody cancelled
/// has none. A cancel of the settled run changes nothing.
pub async fn run_cancel_of_a_pending_run_records_its_reason(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let kept = h.started_run(thread).await.run_id;
    let run_id = h.run_on(thread).await.run_id;
    let reason =
        "superseded by run 0190c6a3-1b2c-7d4e-8f00-000000000001 (multitask_strategy=interrupt)";
    let outcome = h
        .store
        .runs()
        .request_cancel(run_id, reason)
        .await
        .expect("cancel");
    assert!(matches!(&outcome,
        CancelOutcome::Cancelled(run) if run.cancel_reason.as_deref() == Some(reason)));
    let read = h.store.runs().get(run_id).await.expect("get").expect("run");
    assert_eq!(
        (read.status, read.cancel_reason.as_deref()),
        (RunStatus::Cancelled, Some(reason))
    );
    let listed = h
        .store
        .runs()
        .list(thread, &RunListQuery::default())
        .await
        .expect("list");
    let reasons: Vec<_> = listed
        .iter()
        .map(|run| (run.run_id, run.cancel_reason.as_deref()))
        .collect();
    assert_eq!(reasons, vec![(run_id, Some(reason)), (kept, None)]);
    let latest = h.store.runs().latest(thread).await.expect("latest");
    assert_eq!(
        latest.and_then(|run| run.cancel_reason),
        Some(reason.to_owned())
    );
    let again = h
        .store
        .runs()
        .request_cancel(run_id, "rollback requested via POST /runs/cancel")
        .await
        .expect("cancel");
    assert!(matches!(&again,
        CancelOutcome::AlreadyTerminal(run) if run.cancel_reason.as_deref() == Some(reason)));
}

/// A running run's cancel records its reason at once, with the request; the first
/// reason stays when another cancel follows, and the run settles cancelled with it.
/// A run that settled without a cancel has no reason, and a late cancel adds none.
pub async fn run_cancel_of_a_running_run_keeps_the_first_reason_through_settle(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let run_id = h.started_run(thread).await.run_id;
    let first = "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel";
    let outcome = h
        .store
        .runs()
        .request_cancel(run_id, first)
        .await
        .expect("cancel");
    assert!(matches!(&outcome,
        CancelOutcome::Requested(run) if run.cancel_reason.as_deref() == Some(first)));
    h.store
        .runs()
        .request_cancel(run_id, "rollback requested via POST /runs/cancel")
        .await
        .expect("cancel again");
    let active = h
        .store
        .runs()
        .active(&ActiveRunsQuery {
            thread_id: Some(thread),
            ..ActiveRunsQuery::default()
        })
        .await
        .expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].cancel_reason.as_deref(), Some(first));
    h.store
        .runs()
        .settle(run_id, settlement(RunStatus::Success))
        .await
        .expect("settle");
    let read = h.store.runs().get(run_id).await.expect("get").expect("run");
    assert_eq!(
        (read.status, read.cancel_reason.as_deref()),
        (RunStatus::Cancelled, Some(first))
    );

    let thread = h.thread().await.thread_id;
    let done = h.started_run(thread).await.run_id;
    h.store
        .runs()
        .settle(done, settlement(RunStatus::Success))
        .await
        .expect("settle");
    let late = h
        .store
        .runs()
        .request_cancel(done, first)
        .await
        .expect("cancel");
    assert!(matches!(late, CancelOutcome::AlreadyTerminal(_)));
    let read = h.store.runs().get(done).await.expect("get").expect("run");
    assert_eq!(
        (read.status, read.cancel_reason),
        (RunStatus::Success, None)
    );
}

/// A cancel requested before settle wins: the run ends cancelled whatever the
/// settlement said, and the webhook reports cancelled. With or without a webhook (a
/// driver may take a shorter path when there is no delivery to write).
pub async fn run_settle_cancel_wins_the_race(factory: Factory) {
    let h = Harness::new(&factory).await;
    for webhook in [true, false] {
        let thread = h.thread().await.thread_id;
        let run_id = h.started_run(thread).await.run_id;
        h.store
            .runs()
            .request_cancel(run_id, REASON)
            .await
            .expect("cancel");
        let mut outcome = if webhook {
            with_webhook(RunStatus::Error)
        } else {
            settlement(RunStatus::Error)
        };
        outcome.error = Some(RunError::new("ValueError", "late"));
        let settled = h
            .store
            .runs()
            .settle(run_id, outcome)
            .await
            .expect("settle");
        assert!(settled.changed);
        assert_eq!(
            (settled.run.status, settled.run.error.clone()),
            (RunStatus::Cancelled, None)
        );
        if let Some(delivery) = settled.delivery {
            assert_eq!(
                delivery.payload.expect("payload")["status"],
                json!("cancelled")
            );
        }
    }
}

/// Settle and mirror in one step: a run that settles as planned has its outcome
/// mirrored (the thread stays busy while another run waits, and says so); with or
/// without a webhook. A cancel that won the race, or a run already terminal, mirrors
/// nothing and says so, leaving the thread as it was.
pub async fn run_settle_and_mirror_mirrors_only_the_planned_outcome(factory: Factory) {
    let h = Harness::new(&factory).await;
    let planned = |n: i64| ThreadMirror {
        status: ThreadStatus::Error,
        values: Some(json!({"n": n})),
        interrupts: Default::default(),
        error: Some("boom".into()),
    };
    let failed = |webhook: bool| {
        let mut outcome = if webhook {
            with_webhook(RunStatus::Error)
        } else {
            settlement(RunStatus::Error)
        };
        outcome.error = Some(RunError::new("ValueError", "boom"));
        outcome
    };
    let thread_of = |thread_id| {
        let h = &h;
        async move {
            h.store
                .threads()
                .get(thread_id)
                .await
                .expect("get")
                .expect("thread")
        }
    };
    for webhook in [false, true] {
        let thread = h.thread().await.thread_id;
        let first = h.started_run(thread).await.run_id;
        let second = h.run_on(thread).await.run_id;
        let outcome = h
            .store
            .runs()
            .settle_and_mirror(first, failed(webhook), planned(1), None)
            .await
            .expect("settle and mirror");
        assert!(outcome.settled.changed);
        assert_eq!(outcome.settled.run.status, RunStatus::Error);
        assert_eq!(
            outcome
                .settled
                .run
                .error
                .as_ref()
                .map(|e| e.message.as_str()),
            Some("boom")
        );
        assert_eq!(outcome.settled.delivery.is_some(), webhook);
        assert_eq!(outcome.others_wait, Some(true), "the second run waits");
        let mirrored = thread_of(thread).await;
        assert_eq!(
            (mirrored.status, mirrored.values, mirrored.error),
            (
                ThreadStatus::Busy,
                Some(json!({"n": 1})),
                Some("boom".into())
            )
        );
        assert_eq!(mirrored.metadata.get("error"), Some(&json!("boom")));

        let claimed = h.store.runs().claim(second, h.now()).await.expect("claim");
        assert!(claimed.is_some());
        let outcome = h
            .store
            .runs()
            .settle_and_mirror(second, failed(webhook), planned(2), None)
            .await
            .expect("settle and mirror");
        assert_eq!(outcome.others_wait, Some(false), "no run waits");
        let mirrored = thread_of(thread).await;
        assert_eq!(
            (mirrored.status, mirrored.values),
            (ThreadStatus::Error, Some(json!({"n": 2})))
        );

        // Settled already: nothing is written.
        let again = h
            .store
            .runs()
            .settle_and_mirror(second, settlement(RunStatus::Success), planned(3), None)
            .await
            .expect("settle and mirror");
        assert!(!again.settled.changed);
        assert_eq!(
            (again.settled.run.status, again.others_wait),
            (RunStatus::Error, None)
        );
        assert_eq!(thread_of(thread).await.values, Some(json!({"n": 2})));

        // A cancel won the race: the run is cancelled and the thread left alone.
        let third = h.started_run(thread).await.run_id;
        let before = thread_of(thread).await;
        h.store
            .runs()
            .request_cancel(third, REASON)
            .await
            .expect("cancel");
        let outcome = h
            .store
            .runs()
            .settle_and_mirror(third, failed(webhook), planned(4), None)
            .await
            .expect("settle and mirror");
        assert!(outcome.settled.changed);
        assert_eq!(
            (outcome.settled.run.status, outcome.others_wait),
            (RunStatus::Cancelled, None)
        );
        let after = thread_of(thread).await;
        assert_eq!(
            (after.status, after.values, after.updated_at),
            (before.status, before.values, before.updated_at)
        );
    }
    assert_kind(
        h.store
            .runs()
            .settle_and_mirror(
                Uuid::now_v7(),
                settlement(RunStatus::Success),
                planned(5),
                None,
            )
            .await,
        ErrorKind::NotFound,
    );
}

/// A settle claims the next run in its own step when asked: a claimable run of
/// another thread is claimed as `claim` would (running, stamped, started: its own
/// settle with a webhook writes a delivery); a run of the settled run's own thread, of
/// a busy thread, a delayed, a cancelled or an unknown run is not, nor is anything
/// when the run had settled already. With or without a webhook on the settle.
pub async fn run_settle_and_mirror_claims_the_next_run(factory: Factory) {
    let h = Harness::new(&factory).await;
    let idle = ThreadMirror {
        status: ThreadStatus::Idle,
        values: Some(json!({"done": true})),
        interrupts: Default::default(),
        error: None,
    };
    let status_of = |run_id| {
        let h = &h;
        async move {
            h.store
                .runs()
                .get(run_id)
                .await
                .expect("get")
                .expect("run")
                .status
        }
    };
    for webhook in [false, true] {
        let outcome_of = |status| {
            if webhook {
                with_webhook(status)
            } else {
                settlement(status)
            }
        };
        let settle = |run_id, next: Option<Uuid>| {
            let (h, idle) = (&h, idle.clone());
            async move {
                h.store
                    .runs()
                    .settle_and_mirror(
                        run_id,
                        outcome_of(RunStatus::Success),
                        idle,
                        next.map(|run_id| ClaimNext {
                            run_id,
                            now: h.now(),
                        }),
                    )
                    .await
                    .expect("settle and mirror")
            }
        };
        // Every running run is started before any other is queued, as `started_run`
        // claims the oldest pending run.
        let shared = h.thread().await.thread_id;
        let busy = h.thread().await.thread_id;
        let mut running = Vec::new();
        for thread_id in [h.thread().await.thread_id, shared, busy] {
            running.push(h.started_run(thread_id).await.run_id);
        }
        for _ in 0..4 {
            running.push(h.started_run(h.thread().await.thread_id).await.run_id);
        }
        let other = h.run_on(h.thread().await.thread_id).await.run_id;
        let same = h.run_on(shared).await.run_id;
        let behind_busy = h.run_on(busy).await.run_id;
        let delayed = service_store::NewRun {
            available_at: h.now().plus_minutes(1.0),
            ..h.new_run(h.thread().await.thread_id)
        };
        let delayed = h
            .store
            .runs()
            .create(delayed, Metadata::new())
            .await
            .expect("create")
            .run_id;
        let cancelled = h.run_on(h.thread().await.thread_id).await.run_id;
        h.store
            .runs()
            .request_cancel(cancelled, REASON)
            .await
            .expect("cancel");
        h.advance_minutes(0.5);

        let outcome = settle(running[0], Some(other)).await;
        assert!(outcome.settled.changed);
        assert_eq!(outcome.others_wait, Some(false), "mirrored as before");
        let claimed = outcome.next.expect("the next run is claimed").run;
        assert_eq!(
            (claimed.run_id, claimed.status, claimed.updated_at),
            (other, RunStatus::Running, h.now())
        );
        assert_eq!(status_of(other).await, RunStatus::Running);
        settles_as_started(&h, other).await;

        // Its own thread was busy until this settle: left for a claim by id.
        let outcome = settle(running[1], Some(same)).await;
        assert!(outcome.settled.changed);
        assert_eq!(outcome.next, None, "a run of the settled run's thread");
        assert_eq!(status_of(same).await, RunStatus::Pending);
        let by_id = h.store.runs().claim(same, h.now()).await.expect("claim");
        assert_eq!(by_id.map(|claimed| claimed.run.run_id), Some(same));

        for (settled, next, why) in [
            (running[3], behind_busy, "its thread is busy"),
            (running[4], delayed, "not yet due"),
            (running[5], cancelled, "cancelled"),
            (running[6], Uuid::now_v7(), "unknown"),
        ] {
            let outcome = settle(settled, Some(next)).await;
            assert!(outcome.settled.changed);
            assert_eq!(outcome.next, None, "{why}");
        }
        assert_eq!(status_of(behind_busy).await, RunStatus::Pending);
        assert_eq!(status_of(delayed).await, RunStatus::Pending);
        assert_eq!(status_of(cancelled).await, RunStatus::Cancelled);

        // Settled already: nothing is claimed.
        let later = h.run_on(h.thread().await.thread_id).await.run_id;
        let again = settle(running[0], Some(later)).await;
        assert!(!again.settled.changed);
        assert_eq!(again.next, None);
        assert_eq!(status_of(later).await, RunStatus::Pending);

        // Clear the queue for the next round's `started_run`.
        for run_id in [running[2], same] {
            settle(run_id, None).await;
        }
        for run_id in [behind_busy, later] {
            h.store.runs().delete(run_id).await.expect("delete");
        }
        h.advance_minutes(1.0);
        let due = h.store.runs().claim(delayed, h.now()).await.expect("claim");
        assert_eq!(due.map(|claimed| claimed.run.run_id), Some(delayed));
        settle(delayed, None).await;
    }
}

/// Settle writes terminal status, error and (run started + webhook) the pending
/// delivery row in one step; the row is readable at once.
pub async fn run_settle_writes_status_error_and_delivery_in_one_step(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let run_id = h.started_run(thread).await.run_id;
    h.advance_minutes(1.0);
    let mut outcome = with_webhook(RunStatus::Error);
    outcome.error = Some(RunError::new("ValueError", "boom"));
    let settled = h
        .store
        .runs()
        .settle(run_id, outcome)
        .await
        .expect("settle");
    assert!(settled.changed);
    assert_eq!(
        (settled.run.status, settled.run.updated_at),
        (RunStatus::Error, h.now())
    );
    assert_eq!(
        settled.run.error.as_ref().map(|e| e.message.as_str()),
        Some("boom")
    );
    let stored = h
        .store
        .runs()
        .get(run_id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(SettledRun::from(&stored), settled.run);
    let Some(deliveries) = h.store.deliveries() else {
        assert_eq!(
            settled.delivery, None,
            "a store without deliveries writes no row"
        );
        return;
    };
    let delivery = settled
        .delivery
        .expect("delivery row written with the status");
    assert_eq!(
        (delivery.delivery.status, delivery.delivery.attempt),
        (DeliveryStatus::Pending, 0)
    );
    assert_eq!(delivery.delivery.next_attempt_at, Some(h.now()));
    assert_eq!(
        (delivery.delivery.run_id, delivery.delivery.thread_id),
        (run_id, thread)
    );
    assert!(delivery.delivery.replayable);
    let payload = delivery.payload.clone().expect("payload");
    assert_eq!(
        (payload["status"].clone(), payload["values"].clone()),
        (json!("error"), json!({"n": 1}))
    );
    assert_eq!(
        deliveries
            .get(delivery.delivery.delivery_id)
            .await
            .expect("get"),
        Some(delivery)
    );
}

/// A run settled without having started gets no delivery row.
pub async fn run_settle_of_never_started_run_writes_no_delivery(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let run_id = h.run_on(thread).await.run_id;
    let settled = h
        .store
        .runs()
        .settle(run_id, with_webhook(RunStatus::Cancelled))
        .await
        .expect("settle");
    assert_eq!(
        (settled.run.status, settled.delivery),
        (RunStatus::Cancelled, None)
    );
}

/// A run that paused on an interrupt is stored as success; its webhook says interrupted.
pub async fn run_settle_reports_interrupted_webhook_status(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let run_id = h.started_run(thread).await.run_id;
    let outcome = Settlement {
        interrupted: true,
        ..with_webhook(RunStatus::Success)
    };
    let settled = h
        .store
        .runs()
        .settle(run_id, outcome)
        .await
        .expect("settle");
    assert_eq!(settled.run.status, RunStatus::Success);
    if h.store.capabilities().deliveries {
        let payload = settled.delivery.and_then(|d| d.payload).expect("payload");
        assert_eq!(payload["status"], json!("interrupted"));
    }
}

/// Settling a terminal run is a no-op returning it; a non-terminal status is invalid.
pub async fn run_settle_of_terminal_run_is_a_noop(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let run_id = h.started_run(thread).await.run_id;
    assert_kind(
        h.store
            .runs()
            .settle(run_id, settlement(RunStatus::Running))
            .await,
        ErrorKind::Invalid,
    );
    let first = h
        .store
        .runs()
        .settle(run_id, settlement(RunStatus::Success))
        .await
        .expect("settle");
    h.advance_minutes(1.0);
    for again in [with_webhook(RunStatus::Error), settlement(RunStatus::Error)] {
        let second = h.store.runs().settle(run_id, again).await.expect("settle");
        assert_eq!((second.changed, second.delivery), (false, None));
        assert_eq!(second.run, first.run);
    }
    assert_kind(
        h.store
            .runs()
            .settle(Uuid::now_v7(), settlement(RunStatus::Success))
            .await,
        ErrorKind::NotFound,
    );
}

/// The run list filters by status and pages with offset.
pub async fn run_list_filters_status_and_pages(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let done = h.started_run(thread).await.run_id;
    h.store
        .runs()
        .settle(done, settlement(RunStatus::Success))
        .await
        .expect("settle");
    let mut pending = Vec::new();
    for _ in 0..3 {
        h.advance_minutes(1.0);
        pending.push(h.run_on(thread).await.run_id);
    }
    let query = RunListQuery {
        status: Some(RunStatus::Pending),
        limit: Some(2),
        offset: 1,
    };
    let listed: Vec<Uuid> = h
        .store
        .runs()
        .list(thread, &query)
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(listed, vec![pending[1], pending[0]]);
    let query = RunListQuery {
        status: Some(RunStatus::Success),
        ..Default::default()
    };
    assert_eq!(
        h.store
            .runs()
            .list(thread, &query)
            .await
            .expect("list")
            .len(),
        1
    );
}

/// Active runs list pending and running runs, per thread or across threads.
pub async fn run_active_lists_pending_and_running(factory: Factory) {
    let h = Harness::new(&factory).await;
    let a = h.thread().await.thread_id;
    let b = h.thread().await.thread_id;
    let running = h.started_run(a).await.run_id;
    let queued = h.run_on(a).await.run_id;
    let other = h.run_on(b).await.run_id;
    let done = h.run_on(b).await.run_id;
    h.store
        .runs()
        .request_cancel(done, REASON)
        .await
        .expect("cancel");
    let hr = &h;
    let ids = move |query: ActiveRunsQuery| async move {
        hr.store
            .runs()
            .active(&query)
            .await
            .expect("active")
            .into_iter()
            .map(|r| r.run_id)
            .collect::<HashSet<_>>()
    };
    assert_eq!(
        ids(ActiveRunsQuery::default()).await,
        HashSet::from([running, queued, other])
    );
    let of_a = ActiveRunsQuery {
        thread_id: Some(a),
        ..Default::default()
    };
    assert_eq!(ids(of_a).await, HashSet::from([running, queued]));
    let pending_only = ActiveRunsQuery {
        status: Some(RunStatus::Pending),
        ..Default::default()
    };
    assert_eq!(ids(pending_only).await, HashSet::from([queued, other]));
}

/// Active runs within an enforced filter: only runs whose metadata it admits, across
/// threads and on one thread.
pub async fn run_active_within_enforced_metadata(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let owned = |owner: &str| NewRun {
        metadata: obj(json!({"owner": owner})),
        ..h.new_run(thread)
    };
    let mine = h
        .store
        .runs()
        .create(owned("me"), Metadata::new())
        .await
        .expect("create")
        .run_id;
    h.store
        .runs()
        .create(owned("you"), Metadata::new())
        .await
        .expect("create");
    let enforced = Some(Enforced::metadata(obj(json!({"owner": "me"}))));
    for thread_id in [None, Some(thread)] {
        let query = ActiveRunsQuery {
            thread_id,
            enforced: enforced.clone(),
            ..Default::default()
        };
        let found: Vec<Uuid> = h
            .store
            .runs()
            .active(&query)
            .await
            .expect("active")
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(found, vec![mine], "{thread_id:?}");
    }
}

/// Delete removes one run (running ones too, freeing the thread); unknown is NotFound.
pub async fn run_delete_removes_only_that_run(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let running = h.started_run(thread).await.run_id;
    let next = h.run_on(thread).await.run_id;
    h.store.runs().delete(running).await.expect("delete");
    assert_eq!(h.store.runs().get(running).await.expect("get"), None);
    let claimed = h
        .store
        .runs()
        .claim_next(h.now())
        .await
        .expect("claim")
        .map(|claimed| claimed.run.run_id);
    assert_eq!(claimed, Some(next));
    assert_kind(h.store.runs().delete(running).await, ErrorKind::NotFound);
}

/// Many concurrent workers never run two runs of one thread at once and never claim
/// a run twice.
pub async fn run_concurrent_claims_never_double_run_a_thread(factory: Factory) {
    let h = Arc::new(Harness::new(&factory).await);
    let mut threads = Vec::new();
    for _ in 0..4 {
        let thread = h.thread().await.thread_id;
        for _ in 0..5 {
            h.run_on(thread).await;
        }
        threads.push(thread);
    }
    let mut workers = Vec::new();
    for _ in 0..8 {
        let h = h.clone();
        workers.push(tokio::spawn(async move {
            let mut done = Vec::new();
            let mut idle_rounds = 0;
            while idle_rounds < 50 {
                match h.store.runs().claim_next(h.now()).await.expect("claim") {
                    Some(Claimed { run, .. }) => {
                        idle_rounds = 0;
                        let active = ActiveRunsQuery {
                            thread_id: Some(run.thread_id),
                            status: Some(RunStatus::Running),
                            ..Default::default()
                        };
                        let running = h.store.runs().active(&active).await.expect("active");
                        assert_eq!(running.len(), 1, "one running run per thread");
                        tokio::task::yield_now().await;
                        h.store
                            .runs()
                            .settle(run.run_id, settlement(RunStatus::Success))
                            .await
                            .expect("settle");
                        done.push(run.run_id);
                    }
                    None => {
                        idle_rounds += 1;
                        tokio::task::yield_now().await;
                    }
                }
            }
            done
        }));
    }
    let mut claimed = Vec::new();
    for worker in workers {
        claimed.extend(worker.await.expect("worker"));
    }
    let unique: HashSet<Uuid> = claimed.iter().copied().collect();
    assert_eq!(
        (claimed.len(), unique.len()),
        (20, 20),
        "each run claimed exactly once"
    );
}
