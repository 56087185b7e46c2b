//! The migrator against the real server: concurrent boots migrate once, a
//! `-- no-transaction` file that fails partway leaves no ledger row and is retried,
//! and an INVALID index left by an interrupted concurrent build is rebuilt.

mod support;

use service_store_postgres::migrate::{self, LEDGER, MIGRATIONS, Migration};

async fn ledger(schema: &str) -> Vec<i32> {
    let (client, connection) =
        tokio_postgres::connect(&support::database_url(), tokio_postgres::NoTls)
            .await
            .expect("PostgreSQL must be reachable");
    tokio::spawn(connection);
    client
        .query(
            &format!("SELECT version FROM {schema}.{LEDGER} ORDER BY version"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// `(exists, valid)` of an index in `schema`.
async fn index_state(schema: &str, index: &str) -> (bool, bool) {
    let (client, connection) =
        tokio_postgres::connect(&support::database_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    let row = client
        .query_opt(
            "SELECT i.indisvalid FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relname = $1 AND n.nspname = $2",
            &[&index, &schema],
        )
        .await
        .unwrap();
    (row.is_some(), row.is_some_and(|row| row.get(0)))
}

async fn drop_schema(schema: &str) {
    support::admin(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}

#[tokio::test]
async fn two_concurrent_boots_migrate_once() {
    let schema = support::unique_schema();
    let options = support::options(&schema);
    let (a, b) = tokio::join!(migrate::run(&options), migrate::run(&options));
    let (a, b) = (a.expect("first boot"), b.expect("second boot"));
    let all: Vec<i32> = MIGRATIONS.iter().map(|m| m.version).collect();
    // One boot applied everything; the other waited on the lock and found nothing to do.
    assert!(
        (a == all && b.is_empty()) || (b == all && a.is_empty()),
        "{a:?} {b:?}"
    );
    assert_eq!(ledger(&schema).await, all);
    // A third boot is a no-op.
    assert!(migrate::run(&options).await.unwrap().is_empty());
    drop_schema(&schema).await;
}

#[tokio::test]
async fn interrupted_concurrent_index_build_is_retried_by_the_next_boot() {
    let schema = support::unique_schema();
    let options = support::options(&schema);
    migrate::run(&options).await.unwrap();
    // Simulate a boot killed during 0005: its ledger row is missing, one index was
    // never built, another was left INVALID by a failed concurrent build.
    let (invalid, missing) = ("threads_status_updated", "runs_thread_created");
    support::admin(&format!(
        "SET search_path = {schema};
         DELETE FROM {LEDGER} WHERE version = 5;
         DROP INDEX {invalid};
         DROP INDEX {missing};
         INSERT INTO threads (thread_id, created_at, updated_at, state_updated_at, metadata,
             status, config, interrupts)
         VALUES (gen_random_uuid(), now(), now(), now(), '{{}}', 'idle', '{{}}', '{{}}'),
                (gen_random_uuid(), now(), now(), now(), '{{}}', 'idle', '{{}}', '{{}}');"
    ))
    .await
    .unwrap();
    let failed = support::admin(&format!(
        "CREATE UNIQUE INDEX CONCURRENTLY {invalid} ON {schema}.threads (status)"
    ))
    .await;
    assert!(
        failed.is_err(),
        "duplicate statuses make the unique build fail"
    );
    assert_eq!(index_state(&schema, invalid).await, (true, false));

    let applied = migrate::run(&options).await.unwrap();
    assert_eq!(applied, vec![5]);
    assert_eq!(index_state(&schema, invalid).await, (true, true));
    assert_eq!(index_state(&schema, missing).await, (true, true));
    assert_eq!(
        ledger(&schema).await,
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    );
    drop_schema(&schema).await;
}

static BROKEN: &[Migration] = &[Migration {
    version: 1,
    name: "0001_broken.sql",
    sql: "-- no-transaction\nCREATE TABLE IF NOT EXISTS a (id int);\nSELECT no_such_function();\n",
}];

static FIXED: &[Migration] = &[Migration {
    version: 1,
    name: "0001_broken.sql",
    sql: "-- no-transaction\nCREATE TABLE IF NOT EXISTS a (id int);\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a_id ON a (id);\n",
}];

#[tokio::test]
async fn no_transaction_file_failing_partway_leaves_no_ledger_row_and_is_retried() {
    let schema = support::unique_schema();
    let options = support::options(&schema);
    let error = migrate::run_migrations(&options, BROKEN).await.unwrap_err();
    assert!(error.to_string().contains("migration 1"), "{error}");
    assert!(ledger(&schema).await.is_empty());
    // The statement before the failure stays (it is idempotent); the retry succeeds.
    assert_eq!(
        migrate::run_migrations(&options, FIXED).await.unwrap(),
        vec![1]
    );
    assert_eq!(ledger(&schema).await, vec![1]);
    assert_eq!(index_state(&schema, "a_id").await, (true, true));
    drop_schema(&schema).await;
}

#[tokio::test]
async fn unreachable_server_fails_the_boot() {
    let options = service_store_postgres::PgOptions {
        connection_timeout: Some(std::time::Duration::from_secs(2)),
        ..service_store_postgres::PgOptions::new("postgres://postgres@127.0.0.1:1/test")
    };
    assert!(migrate::run(&options).await.is_err());
}

/// 0008 moves checkpoint bodies into their rows: checkpoints written under 0004's
/// layout read back whole through the saver after the upgrade.
#[tokio::test]
async fn checkpoints_written_before_0008_keep_their_bodies() {
    use service_graph::{CheckpointConfig, CheckpointListOptions, Checkpointer};

    let schema = support::unique_schema();
    let options = support::options(&schema);
    let before = MIGRATIONS.iter().position(|m| m.version == 8).unwrap();
    migrate::run_migrations(&options, &MIGRATIONS[..before])
        .await
        .unwrap();
    support::admin(&format!(
        r#"SET search_path = {schema};
         INSERT INTO checkpoints VALUES
             ('t', '', '1', NULL, '{{"step": -1}}', now()),
             ('t', '', '2', '1', '{{"step": 0}}', now());
         INSERT INTO checkpoint_blobs VALUES
             ('t', '', '1', '{{"v": {{"messages": []}}}}'),
             ('t', '', '2', '{{"v": {{"messages": ["hi"]}}, "n": 1.5}}');
         INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,
             channel, value)
         VALUES ('t', '', '2', 'task', 'messages', '"next"');"#
    ))
    .await
    .unwrap();

    let store = service_store_postgres::PostgresStore::connect(
        options,
        std::sync::Arc::new(service_store::SystemClock),
    )
    .await
    .unwrap();
    let saver = store.checkpointer();
    let thread = CheckpointConfig {
        thread_id: "t".into(),
        checkpoint_ns: String::new(),
        checkpoint_id: None,
    };
    let latest = saver.get_tuple(&thread).await.unwrap().unwrap();
    assert_eq!(latest.config.checkpoint_id.as_deref(), Some("2"));
    assert_eq!(
        latest.checkpoint,
        serde_json::json!({"v": {"messages": ["hi"]}, "n": 1.5})
    );
    assert_eq!(latest.pending_writes.len(), 1);
    let history = saver
        .list(&thread, CheckpointListOptions::default())
        .await
        .unwrap();
    let bodies: Vec<_> = history
        .iter()
        .map(|tuple| tuple.checkpoint.clone())
        .collect();
    assert_eq!(
        bodies,
        vec![
            serde_json::json!({"v": {"messages": ["hi"]}, "n": 1.5}),
            serde_json::json!({"v": {"messages": []}})
        ]
    );
    drop(store);
    drop_schema(&schema).await;
}
