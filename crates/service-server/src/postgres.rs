//! Production on PostgreSQL: the driver's store and checkpoint saver, and the
//! coordinator that lets several instances share one database.
//!
//! - Wake-ups: `pg_notify('service_runs', <instance id>)` when a run is queued or a
//!   thread frees up; each instance LISTENs on a dedicated connection and ignores its
//!   own announcements (its workers were woken in process), with a slow fallback poll
//!   so a lost notification only delays work.
//! - Per-thread execution claim: a session advisory lock held on a connection of the
//!   claim pool for the rest of a run that lasts longer than a second (shorter runs
//!   settle before recovery would look at them, and skip the two statements). A
//!   crashed instance's connection dies with it, which frees the lock; the engine's
//!   recovery then settles its orphaned runs.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use futures::StreamExt;
use service_engine::coordination::{Coordinator, ThreadClaim};
use service_engine::{EngineError, EngineResult};
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};
use uuid::Uuid;

/// Channel the instances announce work on.
const CHANNEL: &str = "service_runs";
/// A lost notification delays work at most this long.
const FALLBACK_POLL: Duration = Duration::from_secs(2);
/// How often a running run checks for a cancel recorded by another instance.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Longest wait for a thread's claim held by a run that is just finishing.
const CLAIM_WAIT: Duration = Duration::from_secs(30);
/// How long a run executes before it takes its thread's claim.
const CLAIM_DELAY: Duration = Duration::from_secs(1);
/// The least time between two announcements of this instance (a NOTIFY each).
const ANNOUNCE_SPACING: Duration = Duration::from_millis(10);

/// The advisory lock key of a thread (64 bits of its id).
fn lock_key(thread_id: Uuid) -> i64 {
    let (high, low) = thread_id.as_u64_pair();
    (high ^ low) as i64
}

/// The [`Coordinator`] of instances sharing one PostgreSQL database.
#[derive(Debug)]
pub struct PgCoordinator {
    store_pool: Pool,
    claim_pool: Pool,
    work: Arc<Notify>,
    /// Payload of this instance's announcements.
    instance: String,
}

impl PgCoordinator {
    /// Starts listening for other instances' announcements on its own connection.
    pub fn start(config: tokio_postgres::Config, store_pool: Pool, claim_pool: Pool) -> Self {
        let work = Arc::new(Notify::new());
        let instance = Uuid::new_v4().simple().to_string();
        tokio::spawn(listen(config, work.clone(), instance.clone()));
        Self {
            store_pool,
            claim_pool,
            work,
            instance,
        }
    }

    async fn claim_connection(&self) -> EngineResult<Object> {
        self.claim_pool.get().await.map_err(|error| {
            EngineError::new(
                service_engine::ErrorKind::Unavailable,
                "no connection free in the execution claim pool",
            )
            .with_source(error)
        })
    }
}

/// Keeps a LISTEN connection open, reconnecting after failures.
async fn listen(config: tokio_postgres::Config, work: Arc<Notify>, instance: String) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                let listening = async {
                    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
                    Ok::<_, tokio_postgres::Error>(())
                };
                // The connection must be polled for LISTEN to complete.
                let mut listening = Box::pin(listening);
                let ready = loop {
                    tokio::select! {
                        result = &mut listening => break result.is_ok(),
                        message = messages.next() => if message.is_none() { break false },
                    }
                };
                if ready {
                    backoff = Duration::from_millis(100);
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(AsyncMessage::Notification(notification))
                                if notification.payload() != instance =>
                            {
                                work.notify_waiters();
                            }
                            Ok(_) => {}
                            Err(error) => {
                                tracing::warn!(%error, "the LISTEN connection failed");
                                break;
                            }
                        }
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "cannot open the LISTEN connection"),
        }
        // Work queued while disconnected is found by the fallback poll.
        work.notify_waiters();
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Runs a fixed statement prepared once per connection (one round trip, not two).
async fn execute_cached(
    connection: &Object,
    sql: &'static str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    let statement = connection.prepare_cached(sql).await?;
    connection.execute(&statement, params).await
}

/// Takes the advisory lock `key` on `connection` if it is free.
async fn try_lock(connection: &Object, key: i64) -> EngineResult<bool> {
    let statement = connection
        .prepare_cached("SELECT pg_try_advisory_lock($1)")
        .await
        .map_err(EngineError::internal)?;
    let row = connection
        .query_one(&statement, &[&key])
        .await
        .map_err(EngineError::internal)?;
    Ok(row.get(0))
}

/// A held thread claim: the lock is released (or its connection closed) on drop.
struct PgThreadClaim {
    connection: Option<Object>,
    key: i64,
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
                handle.spawn(async move {
                    if execute_cached(&connection, "SELECT pg_advisory_unlock($1)", &[&key])
                        .await
                        .is_err()
                    {
                        // Closing the session releases every lock it held.
                        drop(Object::take(connection));
                    }
                });
            }
            Err(_) => drop(Object::take(connection)),
        }
    }
}

#[async_trait]
impl Coordinator for PgCoordinator {
    async fn announce_work(&self) {
        let Ok(connection) = self.store_pool.get().await else {
            return;
        };
        if let Err(error) = execute_cached(
            &connection,
            "SELECT pg_notify($1, $2)",
            &[&CHANNEL, &self.instance],
        )
        .await
        {
            tracing::warn!(%error, "announcing work to other instances failed");
        }
    }

    fn announce_spacing(&self) -> Option<Duration> {
        Some(ANNOUNCE_SPACING)
    }

    async fn other_work(&self) {
        tokio::select! {
            () = self.work.notified() => {}
            () = tokio::time::sleep(FALLBACK_POLL) => {}
        }
    }

    async fn claim_thread(&self, thread_id: Uuid) -> EngineResult<Box<dyn ThreadClaim>> {
        let connection = self.claim_connection().await?;
        let key = lock_key(thread_id);
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(2);
        // Polled rather than blocking in pg_advisory_lock, so a waiting statement never
        // holds up a concurrent CREATE INDEX CONCURRENTLY of another instance's boot.
        loop {
            if try_lock(&connection, key).await? {
                return Ok(Box::new(PgThreadClaim {
                    connection: Some(connection),
                    key,
                }));
            }
            if started.elapsed() > CLAIM_WAIT {
                return Err(EngineError::new(
                    service_engine::ErrorKind::Unavailable,
                    format!(
                        "the execution claim of thread {thread_id} stayed held for {CLAIM_WAIT:?}"
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    fn claim_delay(&self) -> Option<Duration> {
        Some(CLAIM_DELAY)
    }

    async fn thread_unclaimed(&self, thread_id: Uuid) -> EngineResult<bool> {
        let connection = self.claim_connection().await?;
        let key = lock_key(thread_id);
        let free = try_lock(&connection, key).await?;
        if free {
            execute_cached(&connection, "SELECT pg_advisory_unlock($1)", &[&key])
                .await
                .map_err(EngineError::internal)?;
        }
        Ok(free)
    }

    fn check_interval(&self) -> Option<Duration> {
        Some(CHECK_INTERVAL)
    }
}
