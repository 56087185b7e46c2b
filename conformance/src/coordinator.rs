//! The shared coordinator suite: every `service_engine::coordination::Coordinator`
//! (the in-process one, the PostgreSQL one, a user's own) is held to the rules of the
//! trait's docs. An implementation runs them from one test file with
//! [`coordinator_tests!`](crate::coordinator_tests), given a [`Cluster`] that starts
//! instances sharing whatever they coordinate through.
//!
//! Rules come in three groups: `every` coordinator, coordinators of
//! `several_instances`, and coordinators of `one_process`. The group that does not
//! apply to an implementation is reported as ignored, with the reason.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use service_engine::ErrorKind;
use service_engine::coordination::{CoordinationTuning, Coordinator};
use tokio::time::{Instant, timeout};
use uuid::Uuid;

/// The longest a rule waits for something that must happen.
pub const PATIENCE: Duration = Duration::from_secs(10);
/// How long something that must not happen is watched for: a negative can only be
/// checked over a window, and on one machine a wrong wake-up arrives within it.
pub const QUIET: Duration = Duration::from_millis(200);

/// Kills an instance as a crash would.
pub type Crash = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// One running instance of the coordinator under test.
pub struct Instance {
    /// The coordinator.
    pub coordinator: Arc<dyn Coordinator>,
    /// Ends the instance's hold on what it shares with other instances (its database
    /// sessions, say) without running its destructors; `None` for one process.
    pub crash: Option<Crash>,
}

impl Instance {
    /// An instance that cannot crash apart from its callers (one process).
    pub fn new(coordinator: Arc<dyn Coordinator>) -> Self {
        Self {
            coordinator,
            crash: None,
        }
    }

    /// An instance whose crash is simulated by `crash`.
    pub fn with_crash<F, Fut>(coordinator: Arc<dyn Coordinator>, crash: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            coordinator,
            crash: Some(Box::new(move || Box::pin(crash()))),
        }
    }
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("crash", &self.crash.is_some())
            .finish_non_exhaustive()
    }
}

/// Starts instances that coordinate with each other (for a database: the same
/// database and channel, kept apart from other tests).
#[async_trait]
pub trait Cluster: Send + Sync + 'static {
    /// Starts one more instance tuned by `tuning` (one process has none to take).
    async fn start(&self, tuning: CoordinationTuning) -> Instance;
}

/// Runs one rule on a fresh multi-threaded runtime.
pub fn run(rule: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(rule);
}

/// Timings that keep each rule to milliseconds; the fallback poll is long, so a
/// wake-up can only come from an announcement.
pub fn quick() -> CoordinationTuning {
    CoordinationTuning {
        announce_spacing: Duration::ZERO,
        claim_delay: Duration::from_millis(10),
        check_interval: Duration::from_millis(10),
        fallback_poll: Duration::from_secs(60),
        claim_wait: PATIENCE,
    }
}

/// Polls `check` until it holds, for at most [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + PATIENCE;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two instances with `tuning`, of a coordinator of several instances.
async fn two(cluster: &dyn Cluster, tuning: CoordinationTuning) -> (Instance, Instance) {
    let first = cluster.start(tuning).await;
    assert!(
        first.coordinator.tuning().is_some(),
        "a coordinator of one process (no tuning) runs the suite with \
         `coordinator_tests!(cluster, single_process)`"
    );
    (first, cluster.start(tuning).await)
}

/// One instance of a coordinator of one process.
async fn alone(cluster: &dyn Cluster) -> Arc<dyn Coordinator> {
    let instance = cluster.start(quick()).await;
    assert!(
        instance.coordinator.tuning().is_none(),
        "a coordinator of several instances (with a tuning) runs the suite with \
         `coordinator_tests!(cluster)`"
    );
    instance.coordinator
}

/// Whether one announcement of `from` wakes a waiter of `to` within [`QUIET`].
async fn wakes(from: &dyn Coordinator, to: &dyn Coordinator) -> bool {
    let mut waiting = to.other_work();
    assert!(
        futures::poll!(&mut waiting).is_pending(),
        "nothing announced"
    );
    from.announce_work().await;
    timeout(QUIET, waiting).await.is_ok()
}

/// Announces cancels of new runs on `from` until one comes out of `cancels` within
/// [`QUIET`] (the receiving instance may not listen yet), for at most [`PATIENCE`].
async fn cancels_reach(from: &dyn Coordinator, cancels: &mut BoxStream<'static, Uuid>) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let run = Uuid::new_v4();
        from.announce_cancel(run).await;
        // Earlier probes may arrive late: skipped.
        let arrived = cancels.any(|announced| std::future::ready(announced == run));
        if timeout(QUIET, arrived).await.unwrap_or(false) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "an announced cancel did not reach the other instance within {PATIENCE:?}"
        );
    }
}

/// Whether `thread` is free, as `instance` sees it.
async fn unclaimed(instance: &dyn Coordinator, thread: Uuid) -> bool {
    instance.thread_unclaimed(thread).await.expect("ask")
}

// every coordinator

/// `tuning()` is what the instance was started with, or `None` in one process.
pub async fn tuning_is_reported_as_started(cluster: &dyn Cluster) {
    let tuning = CoordinationTuning {
        announce_spacing: Duration::from_millis(3),
        claim_delay: Duration::from_millis(5),
        check_interval: Duration::from_millis(7),
        fallback_poll: Duration::from_secs(11),
        claim_wait: Duration::from_secs(13),
    };
    let instance = cluster.start(tuning).await.coordinator;
    if let Some(own) = instance.tuning() {
        assert_eq!(own, &tuning);
    }
}

/// Shutdown ends the background work promptly, also when called again.
pub async fn shutdown_returns_promptly(cluster: &dyn Cluster) {
    let instance = cluster.start(quick()).await.coordinator;
    timeout(PATIENCE, instance.shutdown())
        .await
        .expect("shutdown within the patience");
    timeout(PATIENCE, instance.shutdown())
        .await
        .expect("a second shutdown returns too");
}

// several instances

/// An announcement wakes another instance's waiter (once that instance listens).
pub async fn announce_reaches_another_instance(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let (a, b) = (a.coordinator, b.coordinator);
    eventually("an announcement of A wakes B", || wakes(&*a, &*b)).await;
}

/// An instance's own announcement does not wake it: its workers were woken in
/// process.
pub async fn an_instance_is_not_woken_by_its_own_announcement(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let (a, b) = (a.coordinator, b.coordinator);
    // Both listen, so a self-wake could not go unseen.
    eventually("an announcement of B wakes A", || wakes(&*b, &*a)).await;
    eventually("an announcement of A wakes B", || wakes(&*a, &*b)).await;
    let mut a_waiting = a.other_work();
    let mut b_waiting = b.other_work();
    assert!(futures::poll!(&mut a_waiting).is_pending());
    assert!(futures::poll!(&mut b_waiting).is_pending());
    a.announce_work().await;
    timeout(PATIENCE, b_waiting).await.expect("B is woken");
    assert!(
        timeout(QUIET, a_waiting).await.is_err(),
        "A was woken by its own announcement"
    );
}

/// Without announcements, a waiter is let go after the fallback poll, so a lost
/// notification only delays work.
pub async fn other_work_resolves_after_the_fallback_poll(cluster: &dyn Cluster) {
    let tuning = CoordinationTuning {
        fallback_poll: Duration::from_millis(50),
        ..quick()
    };
    let (a, _b) = two(cluster, tuning).await;
    let started = Instant::now();
    timeout(PATIENCE, a.coordinator.other_work())
        .await
        .expect("the fallback poll lets the waiter go");
    assert!(started.elapsed() >= tuning.fallback_poll, "not before it");
}

/// A cancel announced by one instance reaches another's subscription to announced
/// cancels (once that instance listens), so the run stops there without waiting for
/// the check interval.
pub async fn an_announced_cancel_reaches_another_instance(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let mut cancels = b.coordinator.announced_cancels();
    cancels_reach(&*a.coordinator, &mut cancels).await;
}

/// Every announced cancel arrives once, none merged with another: each names a run
/// of its own to stop. A subscription made later gets the later announcements too.
pub async fn every_announced_cancel_arrives_once(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let mut cancels = b.coordinator.announced_cancels();
    cancels_reach(&*a.coordinator, &mut cancels).await;
    let mut later = b.coordinator.announced_cancels();
    let mut runs: Vec<Uuid> = (0..50).map(|_| Uuid::new_v4()).collect();
    for run in &runs {
        a.coordinator.announce_cancel(*run).await;
    }
    runs.sort();
    for subscription in [&mut cancels, &mut later] {
        // Late probes of `cancels_reach` may come first; they are skipped.
        let mut received: Vec<Uuid> = timeout(
            PATIENCE,
            subscription
                .filter(|run| std::future::ready(runs.binary_search(run).is_ok()))
                .take(runs.len())
                .collect(),
        )
        .await
        .expect("every announced cancel arrives");
        received.sort();
        assert_eq!(received, runs);
    }
}

/// While one instance holds a thread's claim, another's claim of it waits; it is
/// taken once the first is dropped.
pub async fn a_claim_excludes_a_second_claimant(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let thread = Uuid::new_v4();
    let held = a.coordinator.claim_thread(thread).await.expect("claim");
    let mut second = b.coordinator.claim_thread(thread);
    assert!(
        timeout(QUIET, &mut second).await.is_err(),
        "a second claimant waits while the first holds the claim"
    );
    assert!(!unclaimed(&*b.coordinator, thread).await);
    drop(held);
    let _taken = timeout(PATIENCE, second)
        .await
        .expect("taken once the first claim is dropped")
        .expect("claim");
    assert!(!unclaimed(&*a.coordinator, thread).await);
}

/// A claimant gives up as unavailable after the tuning's claim wait.
pub async fn a_claim_wait_gives_up_after_the_tuned_wait(cluster: &dyn Cluster) {
    let tuning = CoordinationTuning {
        claim_wait: Duration::from_millis(100),
        ..quick()
    };
    let (a, b) = two(cluster, tuning).await;
    let thread = Uuid::new_v4();
    let _held = a.coordinator.claim_thread(thread).await.expect("claim");
    let started = Instant::now();
    let Err(error) = timeout(PATIENCE, b.coordinator.claim_thread(thread))
        .await
        .expect("gives up within the patience")
    else {
        panic!("a held claim was taken twice");
    };
    assert_eq!(error.kind, ErrorKind::Unavailable, "{error}");
    assert!(
        started.elapsed() >= tuning.claim_wait,
        "not before the wait"
    );
}

/// Claims of different threads do not wait for each other.
pub async fn claims_of_different_threads_are_independent(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
    let _first = a.coordinator.claim_thread(first).await.expect("claim");
    let _second = timeout(QUIET, b.coordinator.claim_thread(second))
        .await
        .expect("another thread's claim does not wait")
        .expect("claim");
    assert!(!unclaimed(&*a.coordinator, second).await);
    assert!(!unclaimed(&*b.coordinator, first).await);
}

/// A thread nobody claimed is unclaimed, and asking takes no claim.
pub async fn asking_whether_a_thread_is_unclaimed_takes_no_claim(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let thread = Uuid::new_v4();
    assert!(unclaimed(&*b.coordinator, thread).await);
    assert!(unclaimed(&*b.coordinator, thread).await, "asked twice");
    let _held = timeout(QUIET, a.coordinator.claim_thread(thread))
        .await
        .expect("claimed at once after the question")
        .expect("claim");
    assert!(!unclaimed(&*b.coordinator, thread).await);
}

/// A dropped claim is released: another instance sees the thread unclaimed and
/// takes it.
pub async fn a_dropped_claim_is_released(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let thread = Uuid::new_v4();
    drop(a.coordinator.claim_thread(thread).await.expect("claim"));
    eventually("the dropped claim is released", || {
        unclaimed(&*b.coordinator, thread)
    })
    .await;
    let _taken = timeout(PATIENCE, b.coordinator.claim_thread(thread))
        .await
        .expect("taken")
        .expect("claim");
}

/// A crashed instance's claims are released although they were never dropped, so
/// recovery can tell its runs lost their executor.
pub async fn a_crashed_instances_claim_is_released(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let thread = Uuid::new_v4();
    let _held = a.coordinator.claim_thread(thread).await.expect("claim");
    assert!(!unclaimed(&*b.coordinator, thread).await);
    let crash = a
        .crash
        .expect("an instance of several can crash (Instance::with_crash)");
    crash().await;
    eventually("the crashed instance's claim is released", || {
        unclaimed(&*b.coordinator, thread)
    })
    .await;
    let _taken = timeout(PATIENCE, b.coordinator.claim_thread(thread))
        .await
        .expect("taken")
        .expect("claim");
}

/// A claim held through shutdown is still released when it is dropped (shutdown
/// comes after the engine's runs ended, but a claim may outlive it).
pub async fn a_claim_dropped_after_shutdown_is_released(cluster: &dyn Cluster) {
    let (a, b) = two(cluster, quick()).await;
    let thread = Uuid::new_v4();
    let held = a.coordinator.claim_thread(thread).await.expect("claim");
    timeout(PATIENCE, a.coordinator.shutdown())
        .await
        .expect("shutdown");
    assert!(!unclaimed(&*b.coordinator, thread).await, "still held");
    drop(held);
    eventually("the claim is released", || {
        unclaimed(&*b.coordinator, thread)
    })
    .await;
}

// one process

/// In one process nothing is announced to anyone, and nothing wakes a waiter.
pub async fn one_process_is_never_woken(cluster: &dyn Cluster) {
    let instance = alone(cluster).await;
    let mut waiting = instance.other_work();
    assert!(futures::poll!(&mut waiting).is_pending());
    instance.announce_work().await;
    assert!(timeout(QUIET, waiting).await.is_err(), "woken in process");
}

/// In one process a cancel reaches its run directly: announcing one tells nobody.
pub async fn one_process_announces_no_cancels(cluster: &dyn Cluster) {
    let instance = alone(cluster).await;
    let mut cancels = instance.announced_cancels();
    let run = Uuid::new_v4();
    instance.announce_cancel(run).await;
    assert!(
        timeout(QUIET, cancels.next()).await.is_err(),
        "an announced cancel came back in process"
    );
}

/// In one process the store alone serializes a thread's runs: claims are implicit
/// and never wait, and no run is ever orphaned.
pub async fn one_process_claims_never_wait_and_nothing_is_orphaned(cluster: &dyn Cluster) {
    let instance = alone(cluster).await;
    let thread = Uuid::new_v4();
    assert!(!unclaimed(&*instance, thread).await);
    let _first = instance.claim_thread(thread).await.expect("claim");
    let _second = timeout(QUIET, instance.claim_thread(thread))
        .await
        .expect("an implicit claim never waits")
        .expect("claim");
    assert!(!unclaimed(&*instance, thread).await);
}

/// Expands to one `#[test]` per coordinator rule, in module `coordinator`, each with
/// a fresh cluster from `$cluster` (an expression implementing [`Cluster`]). Add
/// `single_process` for a coordinator of one process: the rules of several instances
/// are then reported as ignored, and the rules of one process run instead.
#[macro_export]
macro_rules! coordinator_tests {
    ($cluster:expr) => {
        $crate::__coordinator_suite!(($cluster) run skip);
    };
    ($cluster:expr, single_process) => {
        $crate::__coordinator_suite!(($cluster) skip run);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __coordinator_suite {
    (($cluster:expr) $several:ident $one:ident) => {
        mod coordinator {
            #[allow(unused_imports)]
            use super::*;

            $crate::__coordinator_group!(($cluster) run "" [
                tuning_is_reported_as_started,
                shutdown_returns_promptly,
            ]);
            $crate::__coordinator_group!(
                ($cluster) $several "a coordinator of one process: there is no other instance" [
                announce_reaches_another_instance,
                an_instance_is_not_woken_by_its_own_announcement,
                other_work_resolves_after_the_fallback_poll,
                an_announced_cancel_reaches_another_instance,
                every_announced_cancel_arrives_once,
                a_claim_excludes_a_second_claimant,
                a_claim_wait_gives_up_after_the_tuned_wait,
                claims_of_different_threads_are_independent,
                asking_whether_a_thread_is_unclaimed_takes_no_claim,
                a_dropped_claim_is_released,
                a_crashed_instances_claim_is_released,
                a_claim_dropped_after_shutdown_is_released,
            ]);
            $crate::__coordinator_group!(
                ($cluster) $one "a coordinator of several instances: these rules are for one process" [
                one_process_is_never_woken,
                one_process_announces_no_cancels,
                one_process_claims_never_wait_and_nothing_is_orphaned,
            ]);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __coordinator_group {
    (($cluster:expr) $mode:ident $reason:literal [$($rule:ident),* $(,)?]) => {
        $(
            $crate::__skippable!($mode, $reason,
                #[test]
                fn $rule() {
                    $crate::coordinator::run(async {
                        let cluster = $cluster;
                        $crate::coordinator::$rule(&cluster).await;
                    });
                }
            );
        )*
    };
}
