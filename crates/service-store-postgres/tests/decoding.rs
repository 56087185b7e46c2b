//! A stored row that does not decode is a typed error naming its column, with the
//! driver's error as its source; it never panics. Each test retypes a column in a
//! schema of its own, which it drops after (never handed to another test).

mod support;

use std::error::Error as _;
use std::sync::Arc;

use serde_json::json;
use service_graph::{CheckpointConfig, Checkpointer, GraphError};
use service_store::{ErrorKind, NewRun, NewThread, SystemClock};
use service_store_postgres::PostgresStore;
use service_types::{IfExists, JsonText, ThreadStatus, Timestamp};
use uuid::Uuid;

/// A migrated store in a fresh schema that no other test reuses.
async fn private_store(schema: &str) -> PostgresStore {
    PostgresStore::connect(support::options(schema), Arc::new(SystemClock))
        .await
        .expect("PostgreSQL must be reachable")
}

/// Gives `column` of `table` the type `text`, so its stored values no longer decode.
async fn retype_as_text(schema: &str, table: &str, column: &str) {
    support::admin(&format!(
        "ALTER TABLE {schema}.{table} ALTER COLUMN {column} TYPE text USING {column}::text"
    ))
    .await
    .unwrap();
}

async fn drop_schema(schema: &str) {
    support::admin(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_run_whose_kwargs_do_not_decode_is_an_unexpected_error_naming_the_column() {
    let schema = support::unique_schema();
    let backend = private_store(&schema).await;
    let store = backend.store();
    let thread_id = Uuid::new_v4();
    store
        .threads()
        .create(
            NewThread {
                thread_id,
                metadata: Default::default(),
                status: ThreadStatus::Idle,
                ttl: None,
            },
            IfExists::Raise,
        )
        .await
        .unwrap();
    let run_id = Uuid::now_v7();
    store
        .runs()
        .create(
            NewRun {
                run_id,
                thread_id,
                assistant_id: Uuid::nil(),
                metadata: Default::default(),
                multitask_strategy: None,
                kwargs: json!({}),
                available_at: Timestamp::parse("2025-01-15T12:00:00Z").unwrap(),
                assistant_as_read: None,
                claimed: false,
                traceparent: None,
            },
            Default::default(),
        )
        .await
        .unwrap();
    retype_as_text(&schema, "runs", "kwargs").await;

    let error = store
        .runs()
        .get(run_id)
        .await
        .expect_err("kwargs are text now");
    assert_eq!(error.kind, ErrorKind::Unexpected);
    assert!(
        error.message.starts_with("column \"kwargs\" of runs: "),
        "{}",
        error.message
    );
    assert!(
        error
            .source()
            .is_some_and(|source| source.is::<tokio_postgres::Error>())
    );

    drop(backend);
    drop_schema(&schema).await;
}

#[tokio::test]
async fn a_checkpoint_whose_body_does_not_decode_is_a_checkpointer_error_naming_the_column() {
    let schema = support::unique_schema();
    let backend = private_store(&schema).await;
    let saver = backend.checkpointer();
    let root = CheckpointConfig {
        thread_id: Uuid::new_v4().to_string(),
        checkpoint_ns: String::new(),
        checkpoint_id: None,
    };
    let written = saver
        .put(&root, JsonText::new(&json!({"v": 1})), Default::default())
        .await
        .unwrap();
    retype_as_text(&schema, "checkpoints", "body").await;

    let error = saver
        .get_tuple(&written)
        .await
        .expect_err("the body is text now");
    let GraphError::Checkpointer { message, source } = &error else {
        panic!("not a checkpointer error: {error:?}");
    };
    assert!(
        message.starts_with("column \"body\" of checkpoints: "),
        "{message}"
    );
    assert!(
        source
            .as_ref()
            .is_some_and(|source| source.is::<tokio_postgres::Error>())
    );

    drop(backend);
    drop_schema(&schema).await;
}
