//! Cross-instance coordination of run execution.
//!
//! One instance needs none: the store's claim already serializes a thread's runs and
//! the engine wakes its own workers. Several instances sharing a database need three
//! more things, which this seam names: wake-ups when another instance queues a run,
//! a per-thread execution claim that dies with its holder (so a crashed instance's
//! runs can be detected), and notice of cancels requested on another instance.

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use crate::EngineResult;

/// Held while a run executes; dropping it releases the thread's execution claim.
pub trait ThreadClaim: Send {}

impl ThreadClaim for () {}

/// How instances coordinate.
#[async_trait]
pub trait Coordinator: Send + Sync {
    /// Tells other instances that runs were queued or a thread freed up.
    async fn announce_work(&self);

    /// The least time between two announcements (requests made meanwhile are answered
    /// by the next one; zero when announcing costs nothing); `None` when there is no
    /// other instance to tell (one process), so nothing is announced at all.
    fn announce_spacing(&self) -> Option<Duration>;

    /// Resolves when another instance announced work, or after a slow fallback period
    /// so nothing waits forever on a lost notification. Never resolves in-process.
    async fn other_work(&self);

    /// Takes the execution claim of `thread_id` for the rest of a run, waiting for a
    /// holder that is just finishing. The engine runs this future to completion once
    /// it has started it, so it need not be safe to drop halfway.
    async fn claim_thread(&self, thread_id: Uuid) -> EngineResult<Box<dyn ThreadClaim>>;

    /// How long a run executes before it takes its thread's claim; `None` when runs
    /// need no claim (one process). A run that ends sooner never takes one: the store
    /// already keeps a thread to one running run, and the claim only lets recovery
    /// tell a live executor from a dead one, which it asks only of runs older than
    /// 30 s (so this must stay well under that).
    fn claim_delay(&self) -> Option<Duration>;

    /// True when nobody holds the thread's execution claim: a run recorded as running
    /// there has lost its executor.
    async fn thread_unclaimed(&self, thread_id: Uuid) -> EngineResult<bool>;

    /// How often an executing run checks for a cancel requested elsewhere, and how
    /// often orphaned runs are looked for; `None` in-process.
    fn check_interval(&self) -> Option<Duration>;
}

/// The single-instance coordinator: nothing to announce, claims are implicit.
#[derive(Debug, Default)]
pub struct LocalCoordinator;

#[async_trait]
impl Coordinator for LocalCoordinator {
    async fn announce_work(&self) {}

    fn announce_spacing(&self) -> Option<Duration> {
        None
    }

    async fn other_work(&self) {
        std::future::pending::<()>().await;
    }

    async fn claim_thread(&self, _thread_id: Uuid) -> EngineResult<Box<dyn ThreadClaim>> {
        Ok(Box::new(()))
    }

    fn claim_delay(&self) -> Option<Duration> {
        None
    }

    async fn thread_unclaimed(&self, _thread_id: Uuid) -> EngineResult<bool> {
        Ok(false)
    }

    fn check_interval(&self) -> Option<Duration> {
        None
    }
}
