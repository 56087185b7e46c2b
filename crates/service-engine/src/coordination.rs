//! Cross-instance coordination of run execution.
//!
//! One instance needs none: the store's claim already serializes a thread's runs and
//! the engine wakes its own workers. Several instances sharing a database need three
//! more things, which this seam names: wake-ups when another instance queues a run,
//! a per-thread execution claim that dies with its holder (so a crashed instance's
//! runs can be detected), and notice of cancels requested on another instance (an
//! announcement, with the stored cancel flag polled as the fallback).
//!
//! The trait is the mechanism; how often and how long it talks to the other
//! instances is a [`CoordinationTuning`] the embedder hands to the implementation.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use uuid::Uuid;

use crate::EngineResult;

/// Held while a run executes; dropping it releases the thread's execution claim.
pub trait ThreadClaim: Send {}

impl ThreadClaim for () {}

/// The timings of a coordinator of several instances. The defaults suit production;
/// tests shorten them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoordinationTuning {
    /// The least time between two announcements of one instance; requests made
    /// meanwhile are answered by the next one (zero when announcing costs nothing).
    /// Default 10 ms.
    pub announce_spacing: Duration,
    /// How long a run executes before it takes its thread's claim. A run that ends
    /// sooner never takes one: the store already keeps a thread to one running run,
    /// and the claim only lets recovery tell a live executor from a dead one, which it
    /// asks only of runs older than 30 s (so this must stay well under that).
    /// Default 1 s.
    pub claim_delay: Duration,
    /// How often an executing run checks the store for a cancel requested elsewhere
    /// (the fallback for an announcement that was lost); orphaned runs are looked for
    /// every ten of these. Default 1 s.
    pub check_interval: Duration,
    /// The longest [`Coordinator::other_work`] waits without an announcement, so a
    /// lost notification only delays work. Default 2 s.
    pub fallback_poll: Duration,
    /// The longest [`Coordinator::claim_thread`] waits for a holder that is just
    /// finishing before it fails as unavailable. Default 30 s.
    pub claim_wait: Duration,
}

impl Default for CoordinationTuning {
    fn default() -> Self {
        Self {
            announce_spacing: Duration::from_millis(10),
            claim_delay: Duration::from_secs(1),
            check_interval: Duration::from_secs(1),
            fallback_poll: Duration::from_secs(2),
            claim_wait: Duration::from_secs(30),
        }
    }
}

/// The run ids `receiver` hears, as [`Coordinator::announced_cancels`] yields them: a
/// receiver that fell behind logs what it skipped (those cancels wait for the check
/// interval) and goes on.
pub fn announced(receiver: tokio::sync::broadcast::Receiver<Uuid>) -> BoxStream<'static, Uuid> {
    futures::stream::unfold(receiver, |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok(run_id) => return Some((run_id, receiver)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(skipped)) => {
                    tracing::warn!(skipped, "announced cancels were skipped");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .boxed()
}

/// How instances coordinate.
#[async_trait]
pub trait Coordinator: Send + Sync {
    /// The timings of this coordinator; `None` (the default) in one process, where
    /// there is no other instance to announce to, claim against or check for cancels.
    /// A coordinator of several instances must return its tuning: the suite in
    /// `service_conformance::coordinator` refuses one that does not.
    fn tuning(&self) -> Option<&CoordinationTuning> {
        None
    }

    /// Tells other instances that runs were queued or a thread freed up.
    async fn announce_work(&self);

    /// Resolves when another instance announced work (never on this instance's own
    /// announcements), or after the fallback poll so nothing waits forever on a lost
    /// notification. Never resolves in-process.
    async fn other_work(&self);

    /// Takes the execution claim of `thread_id` for the rest of a run, waiting for a
    /// holder that is just finishing (at most the tuning's `claim_wait`, then
    /// `Unavailable`). The engine runs this future to completion once it has started
    /// it, so it need not be safe to drop halfway.
    async fn claim_thread(&self, thread_id: Uuid) -> EngineResult<Box<dyn ThreadClaim>>;

    /// True when nobody holds the thread's execution claim: a run recorded as running
    /// there has lost its executor. Asking takes no claim.
    async fn thread_unclaimed(&self, thread_id: Uuid) -> EngineResult<bool>;

    /// Tells the other instances that a cancel of `run_id` was recorded in the store
    /// (only after it was: the stored flag is what counts), so the one executing the
    /// run stops it now rather than at its next check. Best effort: a lost
    /// announcement only delays the cancel to the check interval. The default
    /// announces nothing, which is all one process needs (its cancels reach the run
    /// directly); the suite refuses it from a coordinator of several instances.
    async fn announce_cancel(&self, _run_id: Uuid) {}

    /// The runs whose cancels are announced from now on, by any instance (this one's
    /// own may come back too): each announcement at most once, never merged with
    /// another, since each names a run of its own. The engine takes this once, when
    /// it starts, and stops the runs among them that execute here. The default never
    /// yields.
    fn announced_cancels(&self) -> BoxStream<'static, Uuid> {
        futures::stream::pending().boxed()
    }

    /// Ends the coordinator's background work (a listening connection, say) and
    /// waits for it; the engine calls it last in its own shutdown. Claims still held
    /// are released as they are dropped.
    async fn shutdown(&self) {}
}

/// The single-instance coordinator: nothing to announce, claims are implicit.
#[derive(Debug, Default)]
pub struct LocalCoordinator;

#[async_trait]
impl Coordinator for LocalCoordinator {
    fn tuning(&self) -> Option<&CoordinationTuning> {
        None
    }

    async fn announce_work(&self) {}

    async fn other_work(&self) {
        std::future::pending::<()>().await;
    }

    async fn claim_thread(&self, _thread_id: Uuid) -> EngineResult<Box<dyn ThreadClaim>> {
        Ok(Box::new(()))
    }

    async fn thread_unclaimed(&self, _thread_id: Uuid) -> EngineResult<bool> {
        Ok(false)
    }
}
