//! SPEC's checkpointer setting through the binary: `"checkpointer": "default"` puts a
//! `dev` server's checkpoints in PostgreSQL while its store stays in memory.

mod support;

use serde_json::json;
use support::{ConfigFile, Database, request, spawn};

#[tokio::test(flavor = "multi_thread")]
async fn dev_with_the_default_checkpointer_keeps_checkpoints_in_postgres() {
    let database = Database::create("checkpointer").await;
    let config = ConfigFile::write("checkpointer-default", &json!({"checkpointer": "default"}));
    let url = database.url();
    let server = spawn(
        &[
            "dev",
            "--port",
            "0",
            "--no-console",
            "--config",
            &config.path(),
        ],
        &[("DATABASE_URL", url.as_str())],
    );
    let thread = request(&server, "POST", "/threads", Some(json!({})));
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    request(
        &server,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        Some(json!({"assistant_id": "echo", "input": {}})),
    );
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let count = |sql: &'static str| {
        let client = &client;
        let thread_id = thread_id.clone();
        async move {
            let row = client.query_one(sql, &[&thread_id]).await.unwrap();
            row.get::<_, i64>(0)
        }
    };
    let checkpoints = count("SELECT count(*) FROM checkpoints WHERE thread_id::text = $1").await;
    assert!(checkpoints > 0, "the run's checkpoints are in PostgreSQL");
    let threads = count("SELECT count(*) FROM threads WHERE thread_id::text = $1").await;
    assert_eq!(threads, 0, "the store stays in memory");
    drop(server);
    drop(client);
    database.drop().await;
}
