//! The driver over PostgreSQL's Unix socket (`TEST_DATABASE_SOCKET_URL`, default the
//! `test` database at `/var/run/postgresql`), the cheaper way to reach a database on
//! the same machine: the URL's host is the socket's directory, percent-encoded.

mod support;

use std::sync::Arc;

use service_store::{NewThread, SystemClock};
use service_store_postgres::{PgOptions, PostgresStore};
use service_types::{IfExists, ThreadStatus};
use uuid::Uuid;

fn socket_url() -> String {
    std::env::var("TEST_DATABASE_SOCKET_URL")
        .unwrap_or_else(|_| "postgres://postgres@%2Fvar%2Frun%2Fpostgresql/test".to_owned())
}

#[tokio::test]
async fn a_store_reached_over_the_unix_socket_migrates_and_serves() {
    let schema = support::unique_schema();
    let options = PgOptions {
        url: socket_url(),
        ..support::options(&schema)
    };
    let backend = PostgresStore::connect(options, Arc::new(SystemClock))
        .await
        .unwrap_or_else(|error| {
            panic!("PostgreSQL at {} must be reachable: {error}", socket_url())
        });
    let thread_id = Uuid::now_v7();
    let new = NewThread {
        thread_id,
        metadata: Default::default(),
        status: ThreadStatus::Idle,
        ttl: None,
    };
    backend
        .store()
        .threads()
        .create(new, IfExists::Raise)
        .await
        .unwrap();
    let read = backend.store().threads().get(thread_id).await.unwrap();
    assert_eq!(read.map(|thread| thread.thread_id), Some(thread_id));

    // The pooled connections really are socket connections: no client address.
    let client = backend.pools().store.get().await.unwrap();
    let over_tcp: bool = client
        .query_one("SELECT inet_client_addr() IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!over_tcp);
    drop(client);
    drop(backend);
    support::admin(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}
