//! Idempotency keys: concurrent duplicates never both act; retries replay.

use std::sync::Arc;

use service_store::{Begin, StoredResponse};

use crate::harness::{Factory, Harness};

fn response() -> StoredResponse {
    StoredResponse {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: b"{}".to_vec(),
    }
}

/// The first begin acquires the key; a duplicate while it runs is in progress.
pub async fn idempotency_first_begin_acquires_duplicate_is_in_progress(factory: Factory) {
    let h = Harness::new(&factory).await;
    let until = h.now().plus_minutes(60.0);
    let repo = h.store.idempotency();
    assert_eq!(
        repo.begin("k", "fp", h.now(), until).await.expect("begin"),
        Begin::Acquired
    );
    assert_eq!(
        repo.begin("k", "fp", h.now(), until).await.expect("begin"),
        Begin::InProgress
    );
    assert_eq!(
        repo.begin("other", "fp", h.now(), until)
            .await
            .expect("begin"),
        Begin::Acquired
    );
}

/// A completed key replays the recorded response.
pub async fn idempotency_completed_key_replays_response(factory: Factory) {
    let h = Harness::new(&factory).await;
    let until = h.now().plus_minutes(60.0);
    let repo = h.store.idempotency();
    repo.begin("k", "fp", h.now(), until).await.expect("begin");
    repo.complete("k", response()).await.expect("complete");
    assert_eq!(
        repo.begin("k", "fp", h.now(), until).await.expect("begin"),
        Begin::Completed(response())
    );
}

/// The same key with a different request fingerprint is a mismatch.
pub async fn idempotency_fingerprint_mismatch(factory: Factory) {
    let h = Harness::new(&factory).await;
    let until = h.now().plus_minutes(60.0);
    let repo = h.store.idempotency();
    repo.begin("k", "fp", h.now(), until).await.expect("begin");
    assert_eq!(
        repo.begin("k", "other", h.now(), until)
            .await
            .expect("begin"),
        Begin::FingerprintMismatch
    );
    repo.complete("k", response()).await.expect("complete");
    assert_eq!(
        repo.begin("k", "other", h.now(), until)
            .await
            .expect("begin"),
        Begin::FingerprintMismatch
    );
}

/// Abandoning a held key lets a retry acquire it again.
pub async fn idempotency_abandon_releases_the_key(factory: Factory) {
    let h = Harness::new(&factory).await;
    let until = h.now().plus_minutes(60.0);
    let repo = h.store.idempotency();
    repo.begin("k", "fp", h.now(), until).await.expect("begin");
    repo.abandon("k").await.expect("abandon");
    assert_eq!(
        repo.begin("k", "fp", h.now(), until).await.expect("begin"),
        Begin::Acquired
    );
}

/// An expired key starts fresh, and expire removes expired entries.
pub async fn idempotency_expired_key_starts_fresh(factory: Factory) {
    let h = Harness::new(&factory).await;
    let repo = h.store.idempotency();
    repo.begin("k", "fp", h.now(), h.now().plus_minutes(10.0))
        .await
        .expect("begin");
    repo.complete("k", response()).await.expect("complete");
    repo.begin("j", "fp", h.now(), h.now().plus_minutes(30.0))
        .await
        .expect("begin");
    h.advance_minutes(10.0);
    assert_eq!(repo.expire(h.now()).await.expect("expire"), 1);
    let until = h.now().plus_minutes(10.0);
    assert_eq!(
        repo.begin("k", "new", h.now(), until).await.expect("begin"),
        Begin::Acquired
    );
    assert_eq!(
        repo.begin("j", "fp", h.now(), until).await.expect("begin"),
        Begin::InProgress
    );
}

/// Of many concurrent duplicates, exactly one acquires the key.
pub async fn idempotency_concurrent_duplicates_acquire_once(factory: Factory) {
    let h = Arc::new(Harness::new(&factory).await);
    let until = h.now().plus_minutes(60.0);
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let h = h.clone();
            tokio::spawn(async move {
                h.store
                    .idempotency()
                    .begin("k", "fp", h.now(), until)
                    .await
                    .expect("begin")
            })
        })
        .collect();
    let mut acquired = 0;
    for task in tasks {
        if task.await.expect("task") == Begin::Acquired {
            acquired += 1;
        }
    }
    assert_eq!(acquired, 1);
}
