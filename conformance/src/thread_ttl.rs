//! Thread ttl (SPEC "Thread" ttl, "TTL and schedules" 2), driven by the manual clock.

use serde_json::json;
use service_store::{ErrorKind, NewThread, ThreadPatch, TtlChange};
use service_types::{IfExists, Metadata, PruneStrategy, Thread, ThreadStatus, TtlSetting};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind, obj};

async fn thread_with_ttl(h: &Harness, minutes: f64) -> Thread {
    let new = NewThread {
        thread_id: Uuid::now_v7(),
        metadata: Metadata::new(),
        status: ThreadStatus::Idle,
        ttl: Some(TtlSetting::Minutes(minutes)),
    };
    h.store
        .threads()
        .create(new, IfExists::Raise)
        .await
        .expect("create")
}

/// A ttl on create expires the thread `minutes` from now.
pub async fn thread_ttl_expires_minutes_after_create(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = thread_with_ttl(&h, 30.0).await;
    let ttl = thread.ttl.expect("ttl is set");
    assert_eq!(ttl.expires_at, h.now().plus_minutes(30.0));
    assert_eq!(
        (ttl.ttl_minutes, ttl.strategy),
        (30.0, PruneStrategy::Delete)
    );
    let read = h
        .store
        .threads()
        .get(thread.thread_id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(read.ttl, Some(ttl));
}

/// Patching a new ttl restarts the clock from now.
pub async fn thread_ttl_patch_restarts_the_clock(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = thread_with_ttl(&h, 30.0).await;
    h.advance_minutes(20.0);
    let patch = ThreadPatch {
        ttl: TtlChange::Set(TtlSetting::Minutes(30.0)),
        ..Default::default()
    };
    let patched = h
        .store
        .threads()
        .patch(thread.thread_id, patch)
        .await
        .expect("patch");
    assert_eq!(
        patched.ttl.expect("ttl").expires_at,
        h.now().plus_minutes(30.0)
    );
    h.advance_minutes(15.0);
    assert!(
        h.store
            .threads()
            .expired(h.now(), 10)
            .await
            .expect("expired")
            .is_empty()
    );
}

/// An explicit null pins the thread; an absent ttl leaves it unchanged.
pub async fn thread_ttl_null_pins_and_absent_keeps(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = thread_with_ttl(&h, 5.0).await;
    let metadata_only = ThreadPatch {
        metadata: Some(obj(json!({"k": 1}))),
        ttl: TtlChange::Keep,
    };
    let kept = h
        .store
        .threads()
        .patch(thread.thread_id, metadata_only)
        .await
        .expect("patch");
    assert_eq!(kept.ttl, thread.ttl);
    let clear = ThreadPatch {
        ttl: TtlChange::Clear,
        ..Default::default()
    };
    let pinned = h
        .store
        .threads()
        .patch(thread.thread_id, clear)
        .await
        .expect("patch");
    assert_eq!(pinned.ttl, None);
    h.advance_minutes(60.0);
    assert!(
        h.store
            .threads()
            .expired(h.now(), 10)
            .await
            .expect("expired")
            .is_empty()
    );
}

/// An expired thread stays readable until swept; the sweeper finds it.
pub async fn thread_expired_stays_readable_until_swept(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = thread_with_ttl(&h, 10.0).await;
    let forever = h.thread().await;
    h.advance_minutes(9.0);
    assert!(
        h.store
            .threads()
            .expired(h.now(), 10)
            .await
            .expect("expired")
            .is_empty()
    );
    h.advance_minutes(1.0);
    assert_eq!(
        h.store
            .threads()
            .expired(h.now(), 10)
            .await
            .expect("expired"),
        vec![thread.thread_id]
    );
    assert!(
        h.store
            .threads()
            .get(thread.thread_id)
            .await
            .expect("get")
            .is_some()
    );
    h.store
        .threads()
        .delete(thread.thread_id)
        .await
        .expect("delete");
    assert!(
        h.store
            .threads()
            .expired(h.now(), 10)
            .await
            .expect("expired")
            .is_empty()
    );
    assert!(
        h.store
            .threads()
            .get(forever.thread_id)
            .await
            .expect("get")
            .is_some()
    );
}

/// The sweeper's query is bounded and returns the earliest expiries first.
pub async fn thread_expired_query_is_bounded_earliest_first(factory: Factory) {
    let h = Harness::new(&factory).await;
    let late = thread_with_ttl(&h, 3.0).await;
    let early = thread_with_ttl(&h, 1.0).await;
    let middle = thread_with_ttl(&h, 2.0).await;
    h.advance_minutes(5.0);
    let all = h
        .store
        .threads()
        .expired(h.now(), 10)
        .await
        .expect("expired");
    assert_eq!(all, vec![early.thread_id, middle.thread_id, late.thread_id]);
    assert_eq!(
        h.store
            .threads()
            .expired(h.now(), 2)
            .await
            .expect("expired")
            .len(),
        2
    );
}

/// A ttl must be a positive number of minutes, at most 100 years.
pub async fn thread_ttl_must_be_positive_and_at_most_100_years(factory: Factory) {
    let h = Harness::new(&factory).await;
    let new = |ttl| NewThread {
        thread_id: Uuid::now_v7(),
        metadata: Metadata::new(),
        status: ThreadStatus::Idle,
        ttl: Some(TtlSetting::Minutes(ttl)),
    };
    for ttl in [0.0, service_types::MAX_TTL_MINUTES * 2.0, 1e30] {
        assert_kind(
            h.store.threads().create(new(ttl), IfExists::Raise).await,
            ErrorKind::Invalid,
        );
    }
    h.store
        .threads()
        .create(new(service_types::MAX_TTL_MINUTES), IfExists::Raise)
        .await
        .expect("the longest ttl");
}
