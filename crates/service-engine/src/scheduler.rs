//! The run queue as this instance sees it: which runs it queued, which workers wait
//! for work, which runs were created claimed for them, and the notifications that
//! wake workers, the delayed-run timer and the announcer. No store access: the store's
//! claim decides who runs what; this decides who looks, and when.
//!
//! Invariants, each kept by one method below and pinned by the tests:
//! - a worker is promised to a run being created claimed only while more workers are
//!   idle than are promised already (`promised + handed_over < idle`);
//! - every promise ends exactly once: withdrawn, or kept by handing its run over
//!   (a [`Promise`] is a value that each of those consumes);
//! - a run handed over goes before any run this instance queued (a worker takes the
//!   queued runs only while nothing waits handed over), so a run created claimed for
//!   a worker that took other work meanwhile waits for one run at most;
//! - a wake-up is never lost: a worker registers for the next one before it looks
//!   for work, and whoever adds work notifies after adding it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use service_store::ClaimedRun;
use service_types::Run;
use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use uuid::Uuid;

use crate::active::ActiveRun;

/// Locks spreading run creation over threads; creations on one thread serialize.
const THREAD_GATES: usize = 64;

/// A run a worker takes next: registered (so a cancel reaches it), and claimed already
/// when its creator or its predecessor's settle could claim it.
#[derive(Debug)]
pub(crate) struct NextRun {
    pub(crate) run_id: Uuid,
    pub(crate) handles: ActiveRun,
    pub(crate) claimed: Option<Run>,
    /// No checkpoint can be on its thread ([`crate::RunOptions::thread_is_new`]): the
    /// thread was made with the run and, once the run is claimed, the claim found no
    /// checkpoint there. A state edit is refused from the thread's creation on, while
    /// the run is pending or running (`ThreadsRepo::hold_state`).
    pub(crate) thread_is_new: bool,
}

impl NextRun {
    /// The run `claim` took, keeping `thread_is_new` only when the claim found no
    /// checkpoint on the thread: a run created on the thread after this one may have
    /// run first on another instance, and written checkpoints there.
    pub(crate) fn note_claim(&mut self, claim: ClaimedRun) -> Run {
        self.thread_is_new &= claim.thread_has_no_checkpoint;
        claim.run
    }
}

/// A run this instance queued, due now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueuedHere {
    pub(crate) run_id: Uuid,
    /// Its thread was made with it.
    pub(crate) made_thread: bool,
}

/// An idle worker promised to a run being created claimed. Ended by
/// [`Scheduler::hand_over`] or [`Scheduler::withdraw`].
#[must_use = "a promise is handed over or withdrawn, or the worker stays promised"]
#[derive(Debug)]
pub(crate) struct Promise(());

#[derive(Debug, Default)]
struct Workers {
    /// Workers waiting for work.
    idle: usize,
    /// Promises whose run is still being created.
    promised: usize,
    /// Runs created claimed, oldest first, for promised workers.
    handed_over: VecDeque<NextRun>,
}

/// The queue state of one instance.
#[derive(Debug)]
pub(crate) struct Scheduler {
    /// Wakes one idle worker per notification.
    wake: Notify,
    /// Runs this instance queued and may start at once, oldest first: a worker claims
    /// them by id, without searching the queue.
    queued_here: Mutex<VecDeque<QueuedHere>>,
    workers: Mutex<Workers>,
    /// Set when the queue may hold a claimable run that `queued_here` does not name
    /// (another instance's, a delayed one now due, one that waited for its thread).
    search_queue: AtomicBool,
    /// Tells the delayed-run timer that the earliest due time may have changed.
    delays_changed: Notify,
    /// Asks the announcer to tell other instances about queued work.
    announce: Notify,
    /// Serializes run creation per thread, so the multitask check and the insert of
    /// two concurrent requests cannot interleave.
    thread_gates: Vec<tokio::sync::Mutex<()>>,
}

impl Default for Scheduler {
    fn default() -> Self {
        Self {
            wake: Notify::new(),
            queued_here: Mutex::new(VecDeque::new()),
            workers: Mutex::new(Workers::default()),
            // What was queued before this instance started is found by a search.
            search_queue: AtomicBool::new(true),
            delays_changed: Notify::new(),
            announce: Notify::new(),
            thread_gates: (0..THREAD_GATES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }
}

/// Counts a worker as idle while it lives.
#[derive(Debug)]
pub(crate) struct Idle<'a>(&'a Scheduler);

impl Drop for Idle<'_> {
    fn drop(&mut self) {
        self.0.workers().idle -= 1;
    }
}

impl Scheduler {
    fn workers(&self) -> MutexGuard<'_, Workers> {
        // Counts and a queue, each change complete under the lock.
        self.workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn queued(&self) -> MutexGuard<'_, VecDeque<QueuedHere>> {
        // Holds only ids and flags; a panic elsewhere cannot corrupt it.
        self.queued_here
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A worker's next wake-up. Pinned and `enable`d before the worker looks for
    /// work, so work added while it looks still wakes it.
    pub(crate) fn wake_up(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// Wakes one idle worker (or the next to look for work).
    pub(crate) fn wake_one(&self) {
        self.wake.notify_one();
    }

    /// A run this instance queued, due now: a worker claims it by id.
    pub(crate) fn queue_here(&self, run: QueuedHere) {
        self.queued().push_back(run);
        self.wake.notify_one();
    }

    /// The oldest run this instance queued; `None` while a run created claimed waits
    /// for a worker (it goes first). Wakes another worker while more wait, since
    /// wake-ups coalesce.
    pub(crate) fn pop_queued_here(&self) -> Option<QueuedHere> {
        if !self.workers().handed_over.is_empty() {
            return None;
        }
        let mut queued = self.queued();
        let next = queued.pop_front()?;
        if !queued.is_empty() {
            self.wake.notify_one();
        }
        Some(next)
    }

    /// Marks the queue as worth a search and wakes a worker to do it.
    pub(crate) fn queue_changed(&self) {
        self.search_queue.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Whether the queue is worth a search; a worker that gets `true` searches it.
    pub(crate) fn take_search(&self) -> bool {
        self.search_queue.swap(false, Ordering::SeqCst)
    }

    /// Keeps the queue worth a search (a search found a run and more may be due, or
    /// failed) without waking anyone.
    pub(crate) fn search_again(&self) {
        self.search_queue.store(true, Ordering::SeqCst);
    }

    /// Counts the caller as an idle worker until the returned guard drops.
    pub(crate) fn idle(&self) -> Idle<'_> {
        self.workers().idle += 1;
        Idle(self)
    }

    /// How many workers wait for work.
    pub(crate) fn idle_workers(&self) -> usize {
        self.workers().idle
    }

    /// Promises an idle worker to a run about to be created claimed; `None` when every
    /// idle worker is promised already, or none is idle.
    pub(crate) fn promise_idle_worker(&self) -> Option<Promise> {
        let mut workers = self.workers();
        if workers.idle > workers.promised + workers.handed_over.len() {
            workers.promised += 1;
            Some(Promise(()))
        } else {
            None
        }
    }

    /// Ends a promise whose run was not created claimed.
    pub(crate) fn withdraw(&self, promise: Promise) {
        let Promise(()) = promise;
        self.workers().promised -= 1;
    }

    /// Keeps a promise: hands the run created claimed to the next worker to look.
    pub(crate) fn hand_over(&self, promise: Promise, next: NextRun) {
        let Promise(()) = promise;
        let mut workers = self.workers();
        workers.promised -= 1;
        workers.handed_over.push_back(next);
        drop(workers);
        self.wake.notify_one();
    }

    /// The oldest run handed over, for the worker that takes it.
    pub(crate) fn take_handed_over(&self) -> Option<NextRun> {
        self.workers().handed_over.pop_front()
    }

    /// Tells the delayed-run timer to look again.
    pub(crate) fn delays_changed(&self) {
        self.delays_changed.notify_one();
    }

    /// The timer's next look; `enable`d before it reads the next due time.
    pub(crate) fn delays_change(&self) -> Notified<'_> {
        self.delays_changed.notified()
    }

    /// Asks the announcer to tell other instances about queued work.
    pub(crate) fn request_announcement(&self) {
        self.announce.notify_one();
    }

    /// Resolves when an announcement was requested.
    pub(crate) async fn announcement_requested(&self) {
        self.announce.notified().await;
    }

    /// The lock serializing run creation on `thread_id`.
    pub(crate) fn thread_gate(&self, thread_id: Uuid) -> &tokio::sync::Mutex<()> {
        let index = (thread_id.as_u128() % THREAD_GATES as u128) as usize;
        &self.thread_gates[index]
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn queued(made_thread: bool) -> QueuedHere {
        QueuedHere {
            run_id: Uuid::now_v7(),
            made_thread,
        }
    }

    fn next(run_id: Uuid) -> NextRun {
        NextRun {
            run_id,
            handles: ActiveRun::default(),
            claimed: None,
            thread_is_new: false,
        }
    }

    #[test]
    fn a_worker_is_promised_only_while_more_are_idle_than_promised() {
        let scheduler = Scheduler::default();
        assert!(scheduler.promise_idle_worker().is_none(), "nobody is idle");
        let _first = scheduler.idle();
        let _second = scheduler.idle();
        let one = scheduler
            .promise_idle_worker()
            .expect("two idle, none promised");
        let two = scheduler
            .promise_idle_worker()
            .expect("two idle, one promised");
        assert!(scheduler.promise_idle_worker().is_none(), "both promised");
        scheduler.withdraw(one);
        let three = scheduler
            .promise_idle_worker()
            .expect("a withdrawn promise frees its worker");
        scheduler.hand_over(two, next(Uuid::now_v7()));
        assert!(
            scheduler.promise_idle_worker().is_none(),
            "a run handed over still holds its worker until taken"
        );
        assert!(scheduler.take_handed_over().is_some());
        scheduler.withdraw(three);
        assert!(scheduler.promise_idle_worker().is_some());
    }

    #[test]
    fn an_idle_worker_that_leaves_is_no_longer_promised() {
        let scheduler = Scheduler::default();
        let idle = scheduler.idle();
        assert_eq!(scheduler.idle_workers(), 1);
        drop(idle);
        assert_eq!(scheduler.idle_workers(), 0);
        assert!(scheduler.promise_idle_worker().is_none());
    }

    #[test]
    fn a_run_handed_over_goes_before_runs_queued_here() {
        let scheduler = Scheduler::default();
        let (queued, handed) = (queued(false), Uuid::now_v7());
        scheduler.queue_here(queued);
        let _idle = scheduler.idle();
        let promise = scheduler.promise_idle_worker().unwrap();
        scheduler.hand_over(promise, next(handed));
        assert_eq!(
            scheduler.pop_queued_here(),
            None,
            "the handed-over run waits"
        );
        assert_eq!(scheduler.take_handed_over().unwrap().run_id, handed);
        assert_eq!(scheduler.pop_queued_here(), Some(queued));
        assert_eq!(scheduler.pop_queued_here(), None);
    }

    #[test]
    fn runs_queued_here_are_taken_oldest_first() {
        let scheduler = Scheduler::default();
        let runs = [queued(true), queued(false), queued(true)];
        for run in runs {
            scheduler.queue_here(run);
        }
        let taken: Vec<QueuedHere> = std::iter::from_fn(|| scheduler.pop_queued_here()).collect();
        assert_eq!(taken, runs, "each with whether it made its thread");
    }

    #[test]
    fn a_search_is_taken_by_one_worker() {
        let scheduler = Scheduler::default();
        assert!(scheduler.take_search(), "a new instance searches once");
        assert!(!scheduler.take_search());
        scheduler.queue_changed();
        assert!(scheduler.take_search());
        assert!(!scheduler.take_search());
        scheduler.search_again();
        assert!(scheduler.take_search());
    }

    #[tokio::test]
    async fn work_added_while_a_worker_looks_still_wakes_it() {
        let scheduler = Scheduler::default();
        let woken = scheduler.wake_up();
        tokio::pin!(woken);
        woken.as_mut().enable();
        // Added after the worker registered but before it waits.
        scheduler.queue_here(queued(false));
        tokio::time::timeout(Duration::from_secs(5), woken)
            .await
            .expect("the wake-up registered before the work was added fires");
    }

    #[tokio::test]
    async fn a_run_handed_over_wakes_a_worker() {
        let scheduler = Scheduler::default();
        let _idle = scheduler.idle();
        let promise = scheduler.promise_idle_worker().unwrap();
        let woken = scheduler.wake_up();
        tokio::pin!(woken);
        woken.as_mut().enable();
        scheduler.hand_over(promise, next(Uuid::now_v7()));
        tokio::time::timeout(Duration::from_secs(5), woken)
            .await
            .expect("handing over wakes the promised worker");
    }

    #[test]
    fn creations_on_one_thread_share_a_gate() {
        let scheduler = Scheduler::default();
        let thread = Uuid::now_v7();
        let gate = scheduler.thread_gate(thread);
        let _held = gate.try_lock().unwrap();
        assert!(scheduler.thread_gate(thread).try_lock().is_err());
    }
}
