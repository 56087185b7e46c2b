//! The [`Coordinator`] of instances sharing one PostgreSQL database.
//!
//! - Wake-ups: `pg_notify(<channel>, <instance id>)` when a run is queued or a thread
//!   frees up; each instance LISTENs on a dedicated connection and ignores its own
//!   announcements (its workers were woken in process), with a slow fallback poll so
//!   a lost notification only delays work.
//! - Cancels: `pg_notify(<channel>_cancel, <run id>)` once a cancel is recorded for a
//!   run executing elsewhere; the same LISTEN connection hands the run ids to
//!   [`Coordinator::announced_cancels`]. A lost one waits for the store poll.
//! - Per-thread execution claim: a session advisory lock held on a connection of the
//!   claim pool for the rest of a run that outlives the claim delay. A crashed
//!   instance's connection dies with it, which frees the lock; the engine's recovery
//!   then settles its orphaned runs.
//!
//! The LISTEN task and the unlocks of dropped claims are tracked, and
//! [`Coordinator::shutdown`] ends them.

mod claim;
mod listen;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use futures::stream::BoxStream;
use service_engine::coordination::{CoordinationTuning, Coordinator, ThreadClaim};
use service_engine::{EngineError, EngineResult, ErrorKind};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::claim::{PgThreadClaim, execute_cached, lock_key, try_lock};

/// The longest shutdown waits for the LISTEN task and pending unlocks.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The channel instances announce work on unless told otherwise.
pub const DEFAULT_CHANNEL: &str = "service_runs";

/// Appended to the channel to name the one cancels are announced on.
const CANCEL_SUFFIX: &str = "_cancel";

/// Cancels received but not yet taken by a subscriber; one that falls further behind
/// skips some (their runs stop at the next store poll). The engine takes each at once.
const CANCEL_BACKLOG: usize = 1024;

/// What a [`PgCoordinator`] runs on, and its timings.
#[derive(Clone, Debug)]
pub struct PgCoordinatorOptions {
    /// Where the LISTEN connection goes (the store's database); it is named
    /// `service-listen` in `pg_stat_activity` unless it has an application name.
    pub listen: tokio_postgres::Config,
    /// Sends the announcements (one NOTIFY each); the store's pool will do.
    pub store_pool: Pool,
    /// Holds one connection per claimed thread for the rest of its run: size it at
    /// least the run concurrency.
    pub claim_pool: Pool,
    /// The NOTIFY channel (letters, digits and `_`, at most 56 bytes): instances on
    /// one database coordinate when they share it, so deployments that share a
    /// database in separate schemas should not. Cancels go on it with `_cancel`
    /// appended.
    pub channel: String,
    /// How often and how long the instances talk to each other.
    pub tuning: CoordinationTuning,
}

impl PgCoordinatorOptions {
    /// Options on [`DEFAULT_CHANNEL`] with the default tuning.
    pub fn new(listen: tokio_postgres::Config, store_pool: Pool, claim_pool: Pool) -> Self {
        Self {
            listen,
            store_pool,
            claim_pool,
            channel: DEFAULT_CHANNEL.to_owned(),
            tuning: CoordinationTuning::default(),
        }
    }
}

/// The [`Coordinator`] of instances sharing one PostgreSQL database.
#[derive(Debug)]
pub struct PgCoordinator {
    store_pool: Pool,
    claim_pool: Pool,
    channel: String,
    cancel_channel: String,
    tuning: CoordinationTuning,
    /// Payload of this instance's announcements.
    instance: String,
    work: Arc<Notify>,
    /// The runs whose cancels were announced, as the LISTEN task receives them.
    cancels: broadcast::Sender<Uuid>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl PgCoordinator {
    /// Starts listening for other instances' announcements on a connection of its
    /// own; fails only on a channel name PostgreSQL would not take.
    pub fn start(options: PgCoordinatorOptions) -> Result<Self, InvalidChannel> {
        validate_channel(&options.channel)?;
        let mut listen = options.listen;
        if listen.get_application_name().is_none() {
            listen.application_name("service-listen");
        }
        let coordinator = Self {
            store_pool: options.store_pool,
            claim_pool: options.claim_pool,
            cancel_channel: format!("{}{CANCEL_SUFFIX}", options.channel),
            channel: options.channel,
            tuning: options.tuning,
            instance: Uuid::new_v4().simple().to_string(),
            work: Arc::new(Notify::new()),
            cancels: broadcast::Sender::new(CANCEL_BACKLOG),
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        };
        coordinator.tasks.spawn(listen::listen(
            listen,
            listen::Channels {
                work: coordinator.channel.clone(),
                cancel: coordinator.cancel_channel.clone(),
            },
            coordinator.instance.clone(),
            listen::Receivers {
                work: coordinator.work.clone(),
                cancels: coordinator.cancels.clone(),
            },
            coordinator.stop.clone(),
        ));
        Ok(coordinator)
    }

    /// Sends `payload` on `channel`; a failure is only logged (the fallback polls
    /// find what the announcement would have told).
    async fn notify(&self, channel: &str, payload: &str, what: &str) {
        let Ok(connection) = self.store_pool.get().await else {
            return;
        };
        if let Err(error) = execute_cached(
            &connection,
            "SELECT pg_notify($1, $2)",
            &[&channel, &payload],
        )
        .await
        {
            tracing::warn!(%error, "announcing {what} to other instances failed");
        }
    }

    async fn claim_connection(&self) -> EngineResult<Object> {
        self.claim_pool.get().await.map_err(|error| {
            EngineError::new(
                ErrorKind::Unavailable,
                "no connection free in the execution claim pool",
            )
            .with_source(error)
        })
    }
}

/// A channel name PostgreSQL would not take as a plain identifier.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid coordination channel {0:?}: use at most 56 letters, digits and underscores, not starting with a digit"
)]
pub struct InvalidChannel(String);

/// A channel goes into `LISTEN` as an identifier: letters, digits, `_`, and, with
/// the cancel suffix, no longer than PostgreSQL keeps (`pg_notify` refuses longer
/// ones).
fn validate_channel(channel: &str) -> Result<(), InvalidChannel> {
    let ok = !channel.is_empty()
        && channel.len() + CANCEL_SUFFIX.len() <= 63
        && channel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !channel.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(InvalidChannel(channel.to_owned()))
    }
}

impl Drop for PgCoordinator {
    /// A coordinator dropped without shutdown still stops listening.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[async_trait]
impl Coordinator for PgCoordinator {
    fn tuning(&self) -> Option<&CoordinationTuning> {
        Some(&self.tuning)
    }

    async fn announce_work(&self) {
        self.notify(&self.channel, &self.instance, "work").await;
    }

    async fn other_work(&self) {
        tokio::select! {
            () = self.work.notified() => {}
            () = tokio::time::sleep(self.tuning.fallback_poll) => {}
        }
    }

    async fn announce_cancel(&self, run_id: Uuid) {
        let payload = run_id.to_string();
        self.notify(&self.cancel_channel, &payload, "a cancel")
            .await;
    }

    fn announced_cancels(&self) -> BoxStream<'static, Uuid> {
        service_engine::coordination::announced(self.cancels.subscribe())
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
                return Ok(Box::new(PgThreadClaim::new(
                    connection,
                    key,
                    self.tasks.clone(),
                )));
            }
            let waited = started.elapsed();
            if waited >= self.tuning.claim_wait {
                return Err(EngineError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "the execution claim of thread {thread_id} stayed held for {:?}",
                        self.tuning.claim_wait
                    ),
                ));
            }
            tokio::time::sleep(pause.min(self.tuning.claim_wait - waited)).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
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

    async fn shutdown(&self) {
        self.stop.cancel();
        self.tasks.close();
        // An unlock stuck on a dead network must not hold the process up; its lock
        // goes with the connection when the process exits.
        if tokio::time::timeout(SHUTDOWN_WAIT, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("the coordinator's tasks did not end within {SHUTDOWN_WAIT:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::validate_channel;

    #[test]
    fn a_channel_must_be_a_plain_identifier() {
        assert!(validate_channel("service_runs").is_ok());
        assert!(validate_channel(&"c".repeat(56)).is_ok());
        for bad in ["", "1runs", "runs-a", "runs\"", &"c".repeat(57)] {
            assert!(validate_channel(bad).is_err(), "{bad:?} is refused");
        }
    }
}
