//! A runs repository that watches how the engine claims and settles runs.

use crate::support::*;

/// The runs of a store, counting how runs are claimed; with `threads_made_elsewhere`,
/// as shared with another instance that, just before this one inserts a thread made
/// for its run, creates that thread itself, too late for the insert to read it back.
#[derive(Default)]
pub(crate) struct ObservedRuns {
    /// The store the runs are in: shared with another instance when set before
    /// [`engine_on_runs`], else a new one.
    pub(crate) store: Option<service_store::Store>,
    pub(crate) threads_made_elsewhere: bool,
    /// The instance's queue searches find nothing: it runs only the runs it queued
    /// itself, so a test decides which instance runs what.
    pub(crate) searches_find_nothing: bool,
    /// Holds the creation of a run created claimed until the test releases it.
    pub(crate) hold_claimed_creation: Option<Arc<Hold>>,
    pub(crate) claimed_by_id: AtomicUsize,
    pub(crate) claimed_in_settle: AtomicUsize,
    /// Runs in the order they were settled (and mirrored).
    pub(crate) settled: std::sync::Mutex<Vec<Uuid>>,
}

/// A point a store call stops at: the test learns it got there, and lets it go on.
#[derive(Debug)]
pub(crate) struct Hold {
    reached: tokio::sync::Semaphore,
    released: tokio::sync::Semaphore,
}

impl Default for Hold {
    fn default() -> Self {
        Self {
            reached: tokio::sync::Semaphore::new(0),
            released: tokio::sync::Semaphore::new(0),
        }
    }
}

impl Hold {
    /// Waits until a call reached the hold (at most 10 s: a call that never comes
    /// fails the test, it does not hang it).
    pub(crate) async fn reached(&self) {
        tokio::time::timeout(Duration::from_secs(10), self.reached.acquire())
            .await
            .expect("a call reached the hold within 10 s")
            .expect("open")
            .forget();
    }

    /// Lets the call at the hold go on.
    pub(crate) fn release(&self) {
        self.released.add_permits(1);
    }

    async fn stop_here(&self) {
        self.reached.add_permits(1);
        self.released.acquire().await.expect("open").forget();
    }
}

impl ObservedRuns {
    fn of(&self) -> &service_store::Store {
        self.store.as_ref().expect("a store")
    }
}

#[async_trait::async_trait]
impl service_store::RunsRepo for ObservedRuns {
    async fn create(
        &self,
        new: service_store::NewRun,
        thread_metadata: service_types::Metadata,
    ) -> service_store::StoreResult<Run> {
        self.of().runs().create(new, thread_metadata).await
    }
    async fn create_with_thread(
        &self,
        thread: service_store::NewThread,
        run: service_store::NewRun,
    ) -> service_store::StoreResult<service_store::ThreadRunCreated> {
        if !self.threads_made_elsewhere {
            if run.claimed
                && let Some(hold) = &self.hold_claimed_creation
            {
                hold.stop_here().await;
            }
            return self.of().runs().create_with_thread(thread, run).await;
        }
        let elsewhere = service_store::NewThread {
            metadata: json!({"made": "elsewhere"}).as_object().cloned().unwrap(),
            status: ThreadStatus::Idle,
            ..thread.clone()
        };
        self.of()
            .threads()
            .create(elsewhere, service_types::IfExists::Raise)
            .await?;
        match self.of().runs().create_with_thread(thread, run).await? {
            service_store::ThreadRunCreated::ThreadExists(_) => {
                Ok(service_store::ThreadRunCreated::ThreadExists(None))
            }
            created => Ok(created),
        }
    }
    async fn thread_and_active(
        &self,
        thread_id: Uuid,
    ) -> service_store::StoreResult<Option<service_store::ThreadAndActive>> {
        self.of().runs().thread_and_active(thread_id).await
    }
    async fn get(&self, run_id: Uuid) -> service_store::StoreResult<Option<Run>> {
        self.of().runs().get(run_id).await
    }
    async fn list(
        &self,
        thread_id: Uuid,
        query: &service_store::RunListQuery,
    ) -> service_store::StoreResult<Vec<Run>> {
        self.of().runs().list(thread_id, query).await
    }
    async fn latest(&self, thread_id: Uuid) -> service_store::StoreResult<Option<Run>> {
        self.of().runs().latest(thread_id).await
    }
    async fn active(
        &self,
        query: &service_store::ActiveRunsQuery,
    ) -> service_store::StoreResult<Vec<Run>> {
        self.of().runs().active(query).await
    }
    async fn claim_next(
        &self,
        now: Timestamp,
    ) -> service_store::StoreResult<Option<service_store::Claimed>> {
        if self.searches_find_nothing {
            return Ok(None);
        }
        self.of().runs().claim_next(now).await
    }
    async fn claim(
        &self,
        run_id: Uuid,
        now: Timestamp,
    ) -> service_store::StoreResult<Option<service_store::ClaimedRun>> {
        self.claimed_by_id.fetch_add(1, SeqCst);
        self.of().runs().claim(run_id, now).await
    }
    async fn next_available_at(
        &self,
        now: Timestamp,
    ) -> service_store::StoreResult<Option<Timestamp>> {
        self.of().runs().next_available_at(now).await
    }
    async fn request_cancel(
        &self,
        run_id: Uuid,
        reason: &str,
    ) -> service_store::StoreResult<service_store::CancelOutcome> {
        self.of().runs().request_cancel(run_id, reason).await
    }
    async fn cancel_requested(&self, run_id: Uuid) -> service_store::StoreResult<bool> {
        self.of().runs().cancel_requested(run_id).await
    }
    async fn settle(
        &self,
        run_id: Uuid,
        settlement: service_store::Settlement,
    ) -> service_store::StoreResult<service_store::Settled> {
        self.of().runs().settle(run_id, settlement).await
    }
    async fn settle_and_mirror(
        &self,
        run_id: Uuid,
        settlement: service_store::Settlement,
        mirror: service_store::ThreadMirror,
        next: Option<service_store::ClaimNext>,
    ) -> service_store::StoreResult<service_store::SettledAndMirrored> {
        let outcome = self
            .of()
            .runs()
            .settle_and_mirror(run_id, settlement, mirror, next)
            .await?;
        if outcome.next.is_some() {
            self.claimed_in_settle.fetch_add(1, SeqCst);
        }
        self.settled.lock().unwrap().push(run_id);
        Ok(outcome)
    }
    async fn delete(&self, run_id: Uuid) -> service_store::StoreResult<()> {
        self.of().runs().delete(run_id).await
    }
}

/// A started engine on the in-memory store whose runs go through `runs` (its store is
/// made here unless set), and on `checkpointer`; returns the engine and `runs`.
pub(crate) async fn engine_on_runs(
    mut runs: ObservedRuns,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    checkpointer: Arc<dyn Checkpointer>,
) -> (Engine, Arc<ObservedRuns>) {
    let shared = runs
        .store
        .get_or_insert_with(|| memory_store(MemoryOptions::new(clock.clone())))
        .clone();
    let runs = Arc::new(runs);
    let store = service_store::Store::new(service_store::StoreParts {
        runs: runs.clone(),
        ..shared.parts()
    });
    let engine = Engine::new(EngineParts {
        webhooks: None,
        store,
        graphs: Box::new(service_example_graphs::registry),
        checkpointer,
        bus: MemoryBus::new(config.bus),
        clock,
        config,
    })
    .unwrap();
    engine.system().ensure_system_assistants().await.unwrap();
    engine.start();
    (engine, runs)
}

/// [`engine_on_runs`] with one worker, so runs queue behind each other.
pub(crate) async fn one_worker_on_runs(runs: ObservedRuns) -> (Engine, Arc<ObservedRuns>) {
    one_worker_with(runs, Arc::new(InMemorySaver::new())).await
}

/// [`one_worker_on_runs`] on `checkpointer`.
pub(crate) async fn one_worker_with(
    runs: ObservedRuns,
    checkpointer: Arc<dyn Checkpointer>,
) -> (Engine, Arc<ObservedRuns>) {
    let config = EngineConfig {
        run_concurrency: 1,
        ..EngineConfig::default()
    };
    engine_on_runs(runs, test_clock(), config, checkpointer).await
}

/// A manual clock at a fixed instant.
pub(crate) fn test_clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )))
}
