//! The delivery state machine (pending → delivering → delivered | dead) and replay.
//! A driver without a deliveries repository declares so, and these rules are reported
//! as ignored (see `conformance_tests!`); undeclared, they fail on such a store.

use serde_json::json;
use service_store::containment::Enforced;
use service_store::{AttemptOutcome, DeliveriesRepo, DeliveryQuery, DeliveryRecord, ErrorKind};
use service_types::{DeliveryStatus, RunStatus, Timestamp};
use uuid::Uuid;

use std::time::Duration;

use service_store::ThreadMirror;
use service_types::ThreadStatus;

use crate::harness::{Factory, Harness, assert_kind, obj};
use crate::runs::{with_leased_webhook, with_webhook};

/// Why a delivery rule fails on a store without deliveries.
const MISSING: &str = "the driver has no deliveries repository: run the suite with \
    `conformance_tests!(factory, without: [deliveries])` so these rules are reported as skipped";

/// A started, settled run's pending delivery row.
async fn settled_delivery(h: &Harness) -> DeliveryRecord {
    assert!(h.store.deliveries().is_some(), "{MISSING}");
    let thread = h.thread().await.thread_id;
    let run_id = h.started_run(thread).await.run_id;
    let settled = h
        .store
        .runs()
        .settle(run_id, with_webhook(RunStatus::Success))
        .await
        .expect("settle");
    settled.delivery.expect("delivery row")
}

fn repo(h: &Harness) -> &dyn DeliveriesRepo {
    h.store.deliveries().expect(MISSING)
}

fn lease(h: &Harness) -> Timestamp {
    h.now().plus_minutes(1.0)
}

async fn claim(h: &Harness, id: Uuid) -> DeliveryRecord {
    repo(h)
        .claim(id, h.now(), lease(h))
        .await
        .expect("claim")
        .expect("due")
}

/// The first (inline) attempt counts as attempt 1 and marks the row delivering.
pub async fn delivery_first_attempt_counts_one(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let id = row.delivery.delivery_id;
    let claimed = claim(&h, id).await;
    assert_eq!(
        (claimed.delivery.status, claimed.delivery.attempt),
        (DeliveryStatus::Delivering, 1)
    );
    assert_eq!(
        repo(&h).claim(id, h.now(), lease(&h)).await.expect("claim"),
        None,
        "held by the first caller"
    );
}

/// A 2xx marks the row delivered and clears its payload.
pub async fn delivery_success_clears_payload(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let id = row.delivery.delivery_id;
    claim(&h, id).await;
    let done = repo(&h)
        .finish_attempt(id, AttemptOutcome::Delivered)
        .await
        .expect("finish");
    assert_eq!(
        (done.delivery.status, done.payload.clone()),
        (DeliveryStatus::Delivered, None)
    );
    assert!(!done.delivery.replayable);
    assert_eq!(repo(&h).get(id).await.expect("get"), Some(done));
    assert_kind(
        repo(&h).finish_attempt(id, AttemptOutcome::Delivered).await,
        ErrorKind::Conflict,
    );
}

/// Claiming or finishing an attempt on an unknown delivery is NotFound.
pub async fn delivery_unknown_ids_are_not_found(factory: Factory) {
    let h = Harness::new(&factory).await;
    settled_delivery(&h).await;
    let unknown = Uuid::now_v7();
    assert_kind(
        repo(&h).claim(unknown, h.now(), lease(&h)).await,
        ErrorKind::NotFound,
    );
    assert_kind(
        repo(&h)
            .finish_attempt(unknown, AttemptOutcome::Delivered)
            .await,
        ErrorKind::NotFound,
    );
}

/// A failure with attempts left goes back to pending at next_attempt_at, keeping the
/// reason; the retry is attempt 2.
pub async fn delivery_failure_schedules_retry(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let id = row.delivery.delivery_id;
    claim(&h, id).await;
    let retry_at = h.now().plus_minutes(5.0);
    let outcome = AttemptOutcome::Retry {
        error: "HTTP 500".into(),
        retry_at,
    };
    let failed = repo(&h).finish_attempt(id, outcome).await.expect("finish");
    assert_eq!(
        (failed.delivery.status, failed.delivery.next_attempt_at),
        (DeliveryStatus::Pending, Some(retry_at))
    );
    assert_eq!(failed.delivery.last_error.as_deref(), Some("HTTP 500"));
    assert!(failed.payload.is_some() && failed.delivery.replayable);
    assert_eq!(due_attempts(&h).await, []);
    h.advance_minutes(5.0);
    assert_eq!(due_attempts(&h).await, vec![(id, 2)]);
}

/// Exhausted attempts make the row dead; its payload is kept until retain_until, then
/// purged.
pub async fn delivery_dead_keeps_payload_for_retention(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let id = row.delivery.delivery_id;
    claim(&h, id).await;
    let retain_until = h.now().plus_minutes(24.0 * 60.0);
    let outcome = AttemptOutcome::Dead {
        error: "host refused".into(),
        retain_until,
    };
    let dead = repo(&h).finish_attempt(id, outcome).await.expect("finish");
    assert_eq!(
        (dead.delivery.status, dead.delivery.next_attempt_at),
        (DeliveryStatus::Dead, None)
    );
    assert!(dead.payload.is_some() && dead.delivery.replayable);
    h.advance_minutes(23.0 * 60.0);
    assert_eq!(repo(&h).purge_expired(h.now()).await.expect("purge"), 0);
    h.advance_minutes(60.0);
    assert_eq!(repo(&h).purge_expired(h.now()).await.expect("purge"), 1);
    let purged = repo(&h).get(id).await.expect("get").expect("row stays");
    assert_eq!((purged.payload, purged.delivery.replayable), (None, false));
}

/// Replay makes a dead (or pending) delivery due now; attempts resume.
pub async fn delivery_replay_makes_undelivered_due_now(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let (id, run_id) = (row.delivery.delivery_id, row.delivery.run_id);
    claim(&h, id).await;
    let outcome = AttemptOutcome::Dead {
        error: "exhausted".into(),
        retain_until: h.now().plus_minutes(60.0),
    };
    repo(&h).finish_attempt(id, outcome).await.expect("finish");
    h.advance_minutes(1.0);
    let replayed = repo(&h).replay(run_id, id).await.expect("replay");
    assert_eq!(
        (replayed.status, replayed.next_attempt_at),
        (DeliveryStatus::Pending, Some(h.now()))
    );
    assert_eq!(due_attempts(&h).await, vec![(id, 2)]);
}

/// Replaying a delivered delivery is a conflict (HTTP 409) and changes nothing.
pub async fn delivery_replay_of_delivered_conflicts(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let (id, run_id) = (row.delivery.delivery_id, row.delivery.run_id);
    claim(&h, id).await;
    let done = repo(&h)
        .finish_attempt(id, AttemptOutcome::Delivered)
        .await
        .expect("finish");
    assert_kind(repo(&h).replay(run_id, id).await, ErrorKind::Conflict);
    assert_eq!(repo(&h).get(id).await.expect("get"), Some(done));
}

/// Replaying with a delivery id that belongs to another run is NotFound (HTTP 404).
pub async fn delivery_replay_with_another_runs_id_is_not_found(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let other = settled_delivery(&h).await;
    assert_kind(
        repo(&h)
            .replay(other.delivery.run_id, row.delivery.delivery_id)
            .await,
        ErrorKind::NotFound,
    );
    assert_kind(
        repo(&h).replay(row.delivery.run_id, Uuid::now_v7()).await,
        ErrorKind::NotFound,
    );
}

/// A run's deliveries list oldest first, filter by status and page; never payloads.
pub async fn delivery_list_by_run_filters_status_and_pages(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let run_id = row.delivery.run_id;
    let other = settled_delivery(&h).await;
    let listed = repo(&h)
        .list(run_id, &DeliveryQuery::default())
        .await
        .expect("list");
    assert_eq!(listed, vec![row.delivery.clone()]);
    let delivered = DeliveryQuery {
        status: Some(DeliveryStatus::Delivered),
        ..Default::default()
    };
    assert!(
        repo(&h)
            .list(run_id, &delivered)
            .await
            .expect("list")
            .is_empty()
    );
    let skipped = DeliveryQuery {
        offset: 1,
        ..Default::default()
    };
    assert!(
        repo(&h)
            .list(run_id, &skipped)
            .await
            .expect("list")
            .is_empty()
    );
    let others = repo(&h)
        .list(other.delivery.run_id, &DeliveryQuery::default())
        .await
        .expect("list");
    assert_eq!(others.len(), 1);
}

/// Due rows are claimed by one caller only; a stalled attempt is reclaimed once its
/// lease passes.
pub async fn delivery_claim_due_is_exclusive_and_recovers_stalled(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let id = row.delivery.delivery_id;
    assert_eq!(due_attempts(&h).await, [(id, 1)]);
    assert_eq!(due_attempts(&h).await, []);
    h.advance_minutes(1.0);
    assert_eq!(due_attempts(&h).await, vec![(id, 2)]);
}

/// Deleting the thread or the run leaves its deliveries in place.
pub async fn delivery_rows_survive_thread_and_run_delete(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    h.store
        .threads()
        .delete(row.delivery.thread_id)
        .await
        .expect("delete thread");
    let kept = repo(&h).get(row.delivery.delivery_id).await.expect("get");
    assert_eq!(kept, Some(row.clone()));
    let listed = repo(&h)
        .list(row.delivery.run_id, &DeliveryQuery::default())
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
}

/// A delivery keeps its run's metadata, and a listing with an ownership filter
/// returns only the rows whose run's metadata it admits (deliveries outlive their
/// thread, whose id a later owner may take).
pub async fn delivery_rows_keep_their_owner_and_list_within_it(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    assert_eq!(row.run_metadata, obj(json!({"owner": "a", "tag": 1})));
    let kept = repo(&h).get(row.delivery.delivery_id).await.expect("get");
    assert_eq!(
        kept.map(|kept| kept.run_metadata),
        Some(row.run_metadata.clone())
    );
    let within = |owners: Vec<serde_json::Value>| DeliveryQuery {
        enforced: Some(Enforced(owners.into_iter().map(obj).collect())),
        ..Default::default()
    };
    let run_id = row.delivery.run_id;
    let owned = repo(&h)
        .list(run_id, &within(vec![json!({"owner": "a"})]))
        .await
        .expect("list");
    assert_eq!(owned, vec![row.delivery.clone()]);
    let others = repo(&h)
        .list(run_id, &within(vec![json!({"owner": "b"})]))
        .await
        .expect("list");
    assert!(others.is_empty(), "another owner's filter lists nothing");
    let none = repo(&h)
        .list(run_id, &within(Vec::new()))
        .await
        .expect("list");
    assert!(none.is_empty(), "no alternative admits nothing");
}

/// A settle asked to lease its delivery row (both kinds of settle) inserts it with
/// the inline first attempt begun: delivering, attempt 1, due again only when the
/// lease ends, so neither a claim by id nor the outbox's search takes it meanwhile;
/// its outcome is recorded as any attempt's.
pub async fn delivery_leased_at_settle_is_its_first_attempt(factory: Factory) {
    let h = Harness::new(&factory).await;
    assert!(h.store.deliveries().is_some(), "{MISSING}");
    let held = Duration::from_secs(60);
    let thread = h.thread().await.thread_id;
    let plain = h.started_run(thread).await.run_id;
    let settled = h
        .store
        .runs()
        .settle(plain, with_leased_webhook(RunStatus::Success, held))
        .await
        .expect("settle");
    let other = h.thread().await.thread_id;
    let mirrored = h.started_run(other).await.run_id;
    let mirror = ThreadMirror {
        status: ThreadStatus::Idle,
        values: None,
        interrupts: Default::default(),
        error: None,
    };
    let outcome = h
        .store
        .runs()
        .settle_and_mirror(
            mirrored,
            with_leased_webhook(RunStatus::Success, held),
            mirror,
            None,
        )
        .await
        .expect("settle and mirror");
    for row in [settled.delivery, outcome.settled.delivery] {
        let row = row.expect("delivery row");
        let id = row.delivery.delivery_id;
        assert_eq!(
            (
                row.delivery.status,
                row.delivery.attempt,
                row.delivery.next_attempt_at
            ),
            (
                DeliveryStatus::Delivering,
                1,
                Some(h.now().plus_minutes(1.0))
            )
        );
        assert_eq!(
            row.payload.as_ref().map(|p| p["status"].clone()),
            Some(json!("success"))
        );
        assert_eq!(repo(&h).get(id).await.expect("get"), Some(row.clone()));
        assert_eq!(
            repo(&h).claim(id, h.now(), lease(&h)).await.expect("claim"),
            None,
            "held by the settle's caller"
        );
    }
    assert_eq!(due_attempts(&h).await, [], "leased rows are not due");
    let id = settled_id(&h, plain).await;
    let done = repo(&h)
        .finish_attempt(id, AttemptOutcome::Delivered)
        .await
        .expect("finish");
    assert_eq!(
        (done.delivery.status, done.delivery.attempt, done.payload),
        (DeliveryStatus::Delivered, 1, None)
    );
}

/// A leased row whose attempt never reported (its sender died) is due when the lease
/// ends, and its next attempt is attempt 2: at least once.
pub async fn delivery_leased_at_settle_is_retried_when_its_lease_ends(factory: Factory) {
    let h = Harness::new(&factory).await;
    assert!(h.store.deliveries().is_some(), "{MISSING}");
    let thread = h.thread().await.thread_id;
    let run_id = h.started_run(thread).await.run_id;
    let settle = with_leased_webhook(RunStatus::Success, Duration::from_secs(60));
    let row = h
        .store
        .runs()
        .settle(run_id, settle)
        .await
        .expect("settle")
        .delivery
        .expect("delivery row");
    let id = row.delivery.delivery_id;
    h.advance_minutes(0.5);
    assert_eq!(due_attempts(&h).await, []);
    h.advance_minutes(0.5);
    assert_eq!(due_attempts(&h).await, vec![(id, 2)]);
}

/// The rows awaiting a retry are those whose attempt failed and that are neither
/// delivered nor dead: a retry due later, or one in flight.
pub async fn delivery_count_awaiting_retry_counts_failed_undelivered_rows(factory: Factory) {
    let h = Harness::new(&factory).await;
    let row = settled_delivery(&h).await;
    let id = row.delivery.delivery_id;
    let delivered = settled_delivery(&h).await.delivery.delivery_id;
    assert_eq!(awaiting_retry(&h).await, 0, "pending, never attempted");
    claim(&h, id).await;
    claim(&h, delivered).await;
    assert_eq!(awaiting_retry(&h).await, 0, "first attempts in flight");
    let retry = AttemptOutcome::Retry {
        error: "HTTP 500".into(),
        retry_at: h.now().plus_minutes(1.0),
    };
    repo(&h).finish_attempt(id, retry).await.expect("finish");
    repo(&h)
        .finish_attempt(delivered, AttemptOutcome::Delivered)
        .await
        .expect("finish");
    assert_eq!(awaiting_retry(&h).await, 1, "failed once, retry due later");
    h.advance_minutes(1.0);
    claim(&h, id).await;
    assert_eq!(awaiting_retry(&h).await, 1, "its retry in flight");
    let dead = AttemptOutcome::Dead {
        error: "HTTP 500".into(),
        retain_until: h.now().plus_minutes(60.0),
    };
    repo(&h).finish_attempt(id, dead).await.expect("finish");
    assert_eq!(awaiting_retry(&h).await, 0, "given up");
}

async fn awaiting_retry(h: &Harness) -> u64 {
    repo(h).count_awaiting_retry().await.expect("count")
}

/// The one delivery row of a settled run.
async fn settled_id(h: &Harness, run_id: Uuid) -> Uuid {
    let rows = repo(h)
        .list(run_id, &DeliveryQuery::default())
        .await
        .expect("list");
    assert_eq!(rows.len(), 1);
    rows[0].delivery_id
}

/// A driver that declares it has no deliveries repository really has none (else the
/// delivery rules it skips would hide a repository that was never checked).
pub async fn store_has_no_deliveries_repository(factory: Factory) {
    let h = Harness::new(&factory).await;
    assert!(
        h.store.deliveries().is_none() && !h.store.capabilities().deliveries,
        "declared `without: [deliveries]`, but the store has a deliveries repository"
    );
}

/// Claims the rows due now: each one's id and attempt number.
async fn due_attempts(h: &Harness) -> Vec<(Uuid, u32)> {
    repo(h)
        .claim_due(h.now(), lease(h), 10)
        .await
        .expect("claim due")
        .iter()
        .map(|row| (row.delivery.delivery_id, row.delivery.attempt))
        .collect()
}
