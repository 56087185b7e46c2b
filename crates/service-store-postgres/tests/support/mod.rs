//! Test support: every test gets its own schema on the real PostgreSQL
//! (`TEST_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`; a store
//! with a semantic index uses `PGVECTOR_TEST_URL`, a server with pgvector, when set,
//! else the same one), created
//! by the migrator, emptied when the last handle to the store goes away and reused by
//! a later test of the same process; schemas of finished processes are dropped by
//! the next run. A test fails (never skips) when the server is unreachable.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use service_store::{Clock, IndexSpec};
use service_store_postgres::{PgOptions, PostgresStore};
use tokio_postgres::NoTls;

/// The server every test talks to.
pub fn database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The server of stores with a semantic index: it must have pgvector.
pub fn pgvector_url() -> String {
    std::env::var("PGVECTOR_TEST_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(database_url)
}

static COUNTER: AtomicU64 = AtomicU64::new(0);
static CLEANED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
static PGVECTOR: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();

/// A unique schema name for this process: `svc_test_<pid>_<n>`.
pub fn unique_schema() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("svc_test_{}_{n}", std::process::id())
}

/// Options for a fresh schema with a small pool (tests run in parallel on 2 cores).
pub fn options(schema: &str) -> PgOptions {
    options_on(&database_url(), schema)
}

/// [`options`] on the server at `url`.
pub fn options_on(url: &str, schema: &str) -> PgOptions {
    PgOptions {
        pool_max: 4,
        connection_timeout: Some(Duration::from_secs(10)),
        schema: Some(schema.to_owned()),
        ..PgOptions::new(url)
    }
}

/// Schemas emptied by a finished test, ready for the next one on the same server
/// (migrating a fresh schema costs far more than emptying one, and the model tests
/// build 256 stores): (server url, schema).
static FREE: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Tables in delete order (children before parents).
const TABLES: &[&str] = &[
    "checkpoint_writes",
    "checkpoints",
    "webhook_deliveries",
    "runs",
    "crons",
    "threads",
    "assistant_versions",
    "assistants",
    "store_items",
    "idempotency_keys",
];

/// Empties its schema when the last handle to the store goes away and hands it to
/// the next test; schemas left at process exit are dropped by the next run's sweep.
#[derive(Debug)]
pub struct SchemaGuard {
    pub url: String,
    pub schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let schema = self.schema.clone();
        let url = self.url.clone();
        // Drop may run inside a runtime; do the async cleanup on a thread of its own.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            runtime.block_on(empty_schema(&url, &schema))
        });
        if let Ok(true) = cleanup.join() {
            FREE.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((self.url.clone(), self.schema.clone()));
        }
    }
}

async fn empty_schema(url: &str, schema: &str) -> bool {
    let mut sql = format!("SET lock_timeout = '3s'; SET search_path = {schema};");
    for table in TABLES {
        sql.push_str(&format!("DELETE FROM {table};"));
    }
    match admin_on(url, &sql).await {
        Ok(()) => true,
        Err(error) => {
            eprintln!("could not empty test schema {schema}: {error}");
            false
        }
    }
}

/// One admin statement batch on a fresh connection.
pub async fn admin(sql: &str) -> Result<(), tokio_postgres::Error> {
    admin_on(&database_url(), sql).await
}

/// [`admin`] on the server at `url`.
pub async fn admin_on(url: &str, sql: &str) -> Result<(), tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    let task = tokio::spawn(connection);
    let result = client.batch_execute(sql).await;
    drop(client);
    let _ = task.await;
    result
}

/// Drops schemas left by earlier test processes that no longer run.
pub async fn sweep_stale_schemas(url: &str) {
    let Ok((client, connection)) = tokio_postgres::connect(url, NoTls).await else {
        return;
    };
    let task = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'svc\\_test\\_%'",
            &[],
        )
        .await
        .unwrap_or_default();
    for row in rows {
        let name: String = row.get(0);
        let pid = name
            .split('_')
            .nth(2)
            .and_then(|pid| pid.parse::<u32>().ok());
        let alive = pid.is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                .await;
        }
    }
    drop(client);
    let _ = task.await;
}

/// A migrated, empty store in a schema of its own (fresh, or emptied after an earlier
/// test); connecting also checks the ledger, so a recycled schema is not migrated
/// again.
pub async fn fresh_store(clock: Arc<dyn Clock>, max_page_size: usize) -> PostgresStore {
    fresh_store_with(clock, max_page_size, None).await
}

/// [`fresh_store`] with a semantic index, on the pgvector server when there is one.
pub async fn fresh_store_with(
    clock: Arc<dyn Clock>,
    max_page_size: usize,
    index: Option<IndexSpec>,
) -> PostgresStore {
    let url = match index {
        Some(_) => pgvector_url(),
        None => database_url(),
    };
    CLEANED
        .get_or_init(|| async {
            sweep_stale_schemas(&database_url()).await;
            if pgvector_url() != database_url() {
                sweep_stale_schemas(&pgvector_url()).await;
            }
        })
        .await;
    if index.is_some() {
        // Once, before parallel tests race to create it from their own schemas.
        PGVECTOR
            .get_or_init(|| async {
                if let Err(error) =
                    admin_on(&url, "CREATE EXTENSION IF NOT EXISTS vector SCHEMA public").await
                {
                    panic!(
                        "PostgreSQL at {url} must have pgvector (set PGVECTOR_TEST_URL): {error}"
                    );
                }
            })
            .await;
    }
    let recycled = {
        let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
        let at = free.iter().position(|(server, _)| *server == url);
        at.map(|at| free.swap_remove(at).1)
    };
    let schema = recycled.unwrap_or_else(unique_schema);
    let guard: Arc<dyn std::any::Any + Send + Sync> = Arc::new(SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    });
    let options = PgOptions {
        max_page_size,
        index,
        ..options_on(&url, &schema)
    };
    PostgresStore::connect_with_guard(options, clock, Some(guard))
        .await
        .unwrap_or_else(|error| panic!("cannot open a store on PostgreSQL at {url}: {error}"))
}
