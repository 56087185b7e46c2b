//! The per-thread execution claim: a session advisory lock on a claim-pool connection.

use deadpool_postgres::Object;
use service_engine::coordination::ThreadClaim;
use service_engine::{EngineError, EngineResult};
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// The advisory lock key of a thread (64 bits of its id).
pub(crate) fn lock_key(thread_id: Uuid) -> i64 {
    let (high, low) = thread_id.as_u64_pair();
    (high ^ low) as i64
}

/// Runs a fixed statement prepared once per connection (one round trip, not two).
pub(crate) async fn execute_cached(
    connection: &Object,
    sql: &'static str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    let statement = connection.prepare_cached(sql).await?;
    connection.execute(&statement, params).await
}

/// Takes the advisory lock `key` on `connection` if it is free.
pub(crate) async fn try_lock(connection: &Object, key: i64) -> EngineResult<bool> {
    let statement = connection
        .prepare_cached("SELECT pg_try_advisory_lock($1)")
        .await
        .map_err(EngineError::internal)?;
    let row = connection
        .query_one(&statement, &[&key])
        .await
        .map_err(EngineError::internal)?;
    row.try_get(0).map_err(EngineError::internal)
}

/// A held thread claim: the lock is released (or its connection closed) on drop.
pub(crate) struct PgThreadClaim {
    connection: Option<Object>,
    key: i64,
    /// The coordinator's tracker, so shutdown waits for the unlock.
    tasks: TaskTracker,
}

impl PgThreadClaim {
    pub(crate) fn new(connection: Object, key: i64, tasks: TaskTracker) -> Self {
        Self {
            connection: Some(connection),
            key,
            tasks,
        }
    }
}

impl ThreadClaim for PgThreadClaim {}

impl Drop for PgThreadClaim {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        let key = self.key;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let unlock = async move {
                    if execute_cached(&connection, "SELECT pg_advisory_unlock($1)", &[&key])
                        .await
                        .is_err()
                    {
                        // Closing the session releases every lock it held.
                        drop(Object::take(connection));
                    }
                };
                self.tasks.spawn_on(unlock, &handle);
            }
            Err(_) => drop(Object::take(connection)),
        }
    }
}
