//! The PostgreSQL coordinator against a real server: a thread's execution claim is
//! exclusive across instances and dies with the connection that holds it.

use std::sync::Arc;

use service_engine::coordination::Coordinator;
use service_server::postgres::PgCoordinator;
use service_store::{Clock, SystemClock};
use service_store_postgres::{PgOptions, PostgresStore};
use uuid::Uuid;

fn database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// One "instance": its own pools and coordinator on the shared database.
async fn instance() -> PgCoordinator {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut options = PgOptions::new(database_url());
    options.pool_max = 2;
    let backend = PostgresStore::connect(options, clock)
        .await
        .expect("PostgreSQL reachable");
    let pools = backend.pools().clone();
    PgCoordinator::start(database_url().parse().unwrap(), pools.store, pools.claim)
}

#[tokio::test]
async fn a_thread_claim_is_exclusive_and_dies_with_its_connection() {
    let (first, second) = (instance().await, instance().await);
    let thread = Uuid::new_v4();
    assert!(second.thread_unclaimed(thread).await.unwrap());

    let claim = first.claim_thread(thread).await.unwrap();
    assert!(
        !second.thread_unclaimed(thread).await.unwrap(),
        "held by the first instance"
    );

    // The first instance crashes: its claim connection is killed.
    let (client, connection) = tokio_postgres::connect(&database_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let key = {
        let (high, low) = thread.as_u64_pair();
        (high ^ low) as i64
    };
    // With a timeout, pg_terminate_backend waits until the backend has exited (and so
    // released its locks) instead of returning as soon as the signal is sent.
    let killed = client
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_locks \
             WHERE locktype = 'advisory' AND granted \
               AND ((classid::bigint << 32) | objid::bigint) = $1",
            &[&key],
        )
        .await
        .unwrap();
    assert_eq!(killed.get::<_, i64>(0), 1);
    std::mem::forget(claim);

    assert!(
        second.thread_unclaimed(thread).await.unwrap(),
        "freed with its connection"
    );
    let _taken = second.claim_thread(thread).await.unwrap();
}

#[tokio::test]
async fn a_released_claim_can_be_taken_by_another_instance() {
    let (first, second) = (instance().await, instance().await);
    let thread = Uuid::new_v4();
    let claim = first.claim_thread(thread).await.unwrap();
    drop(claim);
    // Release happens on a spawned task; claiming waits for it rather than failing.
    let _taken = second.claim_thread(thread).await.unwrap();
    assert!(!first.thread_unclaimed(thread).await.unwrap());
}
