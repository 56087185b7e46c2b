//! Workers: claim queued runs, drive the graph, publish frames, settle, mirror the
//! thread. Workers sleep on a notification, never poll: they claim the runs their own
//! instance queued by id, and search the queue only when it may hold other work
//! (another instance's run, a delayed run now due, a run that waited for its thread).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use service_graph::{
    AgentGraph, Chunk, FinalState, GraphError, NodeSelection, RunContext, RunInput, RunnableConfig,
    StateOptions, StateSnapshot, StreamOptions,
};
use service_store::{ClaimNext, Settlement, ThreadMirror};
use service_types::{
    Config, Metadata, OnCompletion, Run, RunError, RunStatus, StreamMode, ThreadStatus,
};
use tokio_util::sync::CancellationToken;

use crate::Engine;
use crate::bus::Topic;
use crate::coordination::ThreadClaim;
use crate::engine::ActiveRun;
use crate::runs::result_body;
use crate::threads::{pending_interrupts, snapshot_mirror};

/// The run options a worker reads back from the row's kwargs.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunPlan {
    input: Option<Value>,
    command: Option<Value>,
    config: Config,
    context: Metadata,
    stream_mode: Vec<StreamMode>,
    interrupt_before: Option<NodeSelection>,
    interrupt_after: Option<NodeSelection>,
    subgraphs: bool,
    checkpoint_id: Option<String>,
    checkpoint_ns: Option<String>,
    temporary: bool,
    on_completion: OnCompletion,
}

/// A run this instance queued that a worker takes next: registered, and claimed
/// already when its creator or its predecessor's settle could claim it.
pub(crate) struct NextRun {
    pub(crate) run_id: uuid::Uuid,
    pub(crate) handles: ActiveRun,
    pub(crate) claimed: Option<Run>,
}

/// The workers waiting for work, and the runs their creators claimed for them.
#[derive(Default)]
pub(crate) struct Workers {
    /// Workers waiting for work.
    idle: usize,
    /// Idle workers promised to a run being created claimed; each such run is handed
    /// over through `claimed` (or its promise withdrawn).
    reserved: usize,
    /// Runs claimed at their creation, oldest first, for the reserved workers.
    claimed: VecDeque<NextRun>,
}

/// How driving the graph ended.
enum Ending {
    Completed,
    Failed(RunError),
    Cancelled,
    TimedOut,
}

impl Engine {
    /// Starts the workers and background tasks; returns immediately.
    pub fn start(&self) {
        for _ in 0..self.config().run_concurrency.max(1) {
            self.spawn_task(|engine| async move { engine.worker_loop().await });
        }
        self.spawn_task(|engine| async move { engine.sweep_loop().await });
        self.spawn_task(|engine| async move { engine.cron_loop().await });
        self.spawn_task(|engine| async move { engine.recovery_loop().await });
        self.spawn_task(|engine| async move { engine.relay_other_work().await });
        self.spawn_task(|engine| async move { engine.time_delayed_runs().await });
        if let Some(spacing) = self.inner.coordinator.announce_spacing() {
            self.spawn_task(
                move |engine| async move { engine.announce_queued_work(spacing).await },
            );
        }
    }

    /// Spawns a task on a clone of the engine, tracked so shutdown waits for it.
    fn spawn_task<Task>(&self, task: impl FnOnce(Engine) -> Task)
    where
        Task: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.tasks.spawn(task(self.clone()));
    }

    /// Stops claiming runs, lets in-flight runs finish within the grace period, then
    /// cancels what is left and waits for the workers to settle it.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        let grace = self.config().shutdown_grace;
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            let running: Vec<CancellationToken> = self
                .active()
                .values()
                .map(|run| run.cancel.clone())
                .collect();
            tracing::warn!(
                runs = running.len(),
                "shutdown grace elapsed, cancelling runs"
            );
            for cancel in running {
                cancel.cancel();
            }
            if tokio::time::timeout(Duration::from_secs(3), self.inner.tasks.wait())
                .await
                .is_err()
            {
                tracing::error!("workers did not stop within the shutdown budget");
            }
        }
        self.inner.coordinator.shutdown().await;
    }

    /// Passes other instances' announcements (and their fallback polls) on to one
    /// idle worker, so an idle instance searches the queue once per period, not once
    /// per worker. Their runs may be delayed ones, so the timer looks again too.
    async fn relay_other_work(&self) {
        loop {
            tokio::select! {
                () = self.inner.coordinator.other_work() => {
                    self.inner.delays_changed.notify_one();
                    self.queue_changed();
                }
                () = self.inner.shutdown.cancelled() => return,
            }
        }
    }

    /// Tells other instances about queued work, one announcement at a time and at
    /// most one per the coordinator's spacing: a request made meanwhile is answered by
    /// the next, which follows the request's commit, so a burst of runs costs a few
    /// announcements, not one each. Others need them only once this instance's own
    /// workers are busy, so the spacing delays little work.
    async fn announce_queued_work(&self, spacing: Duration) {
        loop {
            tokio::select! {
                () = self.inner.announce.notified() => {
                    self.inner.coordinator.announce_work().await;
                    if !spacing.is_zero() {
                        tokio::select! {
                            () = tokio::time::sleep(spacing) => {}
                            () = self.inner.shutdown.cancelled() => {}
                        }
                    }
                }
                () = self.inner.shutdown.cancelled() => {
                    // Runs this instance queued and will not start are others' now.
                    self.inner.coordinator.announce_work().await;
                    return;
                }
            }
        }
    }

    /// Sleeps until the earliest delayed run is due, then has a worker search the
    /// queue; looks again whenever a delayed run is queued.
    async fn time_delayed_runs(&self) {
        loop {
            let changed = self.inner.delays_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = self.now();
            let wait = match self.store().runs().next_available_at(now).await {
                Ok(due) => due.map(|due| {
                    let micros = (due.unix_micros() - now.unix_micros()).max(0) as u64;
                    Duration::from_micros(micros)
                }),
                Err(error) => {
                    tracing::error!(%error, "reading the next delayed run failed");
                    Some(Duration::from_secs(1))
                }
            };
            tokio::select! {
                () = &mut changed => {}
                () = sleep_or_forever(wait) => self.queue_changed(),
                () = self.inner.shutdown.cancelled() => return,
            }
        }
    }

    async fn worker_loop(&self) {
        loop {
            let notified = self.inner.wake.notified();
            tokio::pin!(notified);
            // Registered before looking for work, so work queued in between still
            // wakes this worker.
            notified.as_mut().enable();
            // Before the shutdown check: a run claimed for this worker must run.
            let claimed_for_me = {
                let mut workers = self.workers();
                let next = workers.claimed.pop_front();
                workers.reserved -= usize::from(next.is_some());
                next
            };
            if let Some(next) = claimed_for_me {
                self.execute_queued(next).await;
                continue;
            }
            if self.inner.shutdown.is_cancelled() {
                return;
            }
            if let Some(next) = self.pop_queued_here() {
                self.execute_queued(next).await;
                continue;
            }
            if self.inner.search_queue.swap(false, Ordering::SeqCst) {
                // Read after the flag, so a run due when the flag was set is due now.
                match self.store().runs().claim_next(self.now()).await {
                    Ok(Some(claimed)) => {
                        // The queue may hold more: this worker searches again after the
                        // run, and another idle one now when more are due.
                        self.inner.search_queue.store(true, Ordering::SeqCst);
                        if claimed.more_pending {
                            self.inner.wake.notify_one();
                        }
                        let handles = self.register_active(claimed.run.run_id);
                        if let Some(next) = self.execute(claimed.run, handles, false).await {
                            self.execute_queued(next).await;
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::error!(%error, "claiming the next run failed");
                        self.inner.search_queue.store(true, Ordering::SeqCst);
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                            () = self.inner.shutdown.cancelled() => return,
                        }
                        continue;
                    }
                }
            }
            self.workers().idle += 1;
            tokio::select! {
                () = &mut notified => {}
                () = self.inner.shutdown.cancelled() => {}
            }
            self.workers().idle -= 1;
        }
    }

    fn workers(&self) -> MutexGuard<'_, Workers> {
        // Counts and a queue, each change complete under the lock.
        self.inner
            .workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Promises an idle worker to a run about to be created claimed; false when every
    /// idle worker is promised already (or none is idle, or the engine stops).
    pub(crate) fn reserve_idle_worker(&self) -> bool {
        if self.inner.shutdown.is_cancelled() {
            return false;
        }
        let mut workers = self.workers();
        if workers.idle > workers.reserved {
            workers.reserved += 1;
            true
        } else {
            false
        }
    }

    /// Withdraws a promise of [`Engine::reserve_idle_worker`] whose run was not created
    /// claimed.
    pub(crate) fn release_idle_worker(&self) {
        self.workers().reserved -= 1;
    }

    /// Hands a run created claimed to the worker promised to it.
    pub(crate) fn hand_to_reserved_worker(&self, run: Run, handles: ActiveRun) {
        self.workers().claimed.push_back(NextRun {
            run_id: run.run_id,
            handles,
            claimed: Some(run),
        });
        self.inner.wake.notify_one();
    }

    /// Registers a run's stop handles, so a cancel from now on reaches it.
    pub(crate) fn register_active(&self, run_id: uuid::Uuid) -> ActiveRun {
        let handles = ActiveRun {
            cancel: CancellationToken::new(),
            rollback: Arc::new(AtomicBool::new(false)),
        };
        self.active().insert(run_id, handles.clone());
        handles
    }

    /// The oldest run this instance queued, registered (so a cancel reaches it from
    /// before its claim); `None` when there is none, when a run created claimed waits
    /// for a worker (it goes first, or a worker going from one queued run to the next
    /// could keep it waiting for as long as runs are queued), or when the engine is
    /// shutting down.
    fn pop_queued_here(&self) -> Option<NextRun> {
        if self.inner.shutdown.is_cancelled() || !self.workers().claimed.is_empty() {
            return None;
        }
        let run_id = {
            let mut queued = self.queued_here();
            let next = queued.pop_front()?;
            // Wakes coalesce: while more wait, let another idle worker take one.
            if !queued.is_empty() {
                self.inner.wake.notify_one();
            }
            next
        };
        Some(NextRun {
            run_id,
            handles: self.register_active(run_id),
            claimed: None,
        })
    }

    /// Runs `next` and then each run claimed with its predecessor's settle, claiming
    /// by id the ones that were not.
    async fn execute_queued(&self, mut next: NextRun) {
        loop {
            let run = match next.claimed {
                Some(run) => run,
                // Read now, not before the pop: a clock read before the run was queued
                // would find it not yet due.
                None => match self.store().runs().claim(next.run_id, self.now()).await {
                    Ok(Some(run)) => run,
                    // Taken by another instance, cancelled, or waiting for its thread
                    // (which wakes the workers when it frees up). Whatever else kept
                    // it, the queue search and the delayed-run timer look again.
                    Ok(None) => {
                        self.active().remove(&next.run_id);
                        self.inner.delays_changed.notify_one();
                        self.queue_changed();
                        return;
                    }
                    Err(error) => {
                        self.active().remove(&next.run_id);
                        tracing::error!(%error, run_id = %next.run_id, "claiming a run failed");
                        self.queue_changed();
                        return;
                    }
                },
            };
            match self.execute(run, next.handles, true).await {
                Some(following) => next = following,
                None => return,
            }
        }
    }

    /// Runs a claimed run registered with `handles`; `registered_before_claim` says no
    /// cancel can have been recorded unseen between its claim and its registration.
    /// Returns the run this worker takes next, when it took one from its instance's
    /// queue as this one settled.
    async fn execute(
        &self,
        run: Run,
        handles: ActiveRun,
        registered_before_claim: bool,
    ) -> Option<NextRun> {
        let started = Instant::now();
        let ActiveRun { cancel, rollback } = handles;
        let plan: RunPlan = RunPlan::deserialize(&run.kwargs).unwrap_or_else(|error| {
            tracing::error!(run_id = %run.run_id, %error, "run options unreadable, running with defaults");
            RunPlan::default()
        });
        let graph_id = run
            .kwargs
            .pointer("/config/configurable/graph_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();

        // A cancel recorded between the run's claim and its registration, if there
        // was such a gap.
        if !registered_before_claim
            && self
                .store()
                .runs()
                .cancel_requested(run.run_id)
                .await
                .unwrap_or(false)
        {
            cancel.cancel();
        }
        let final_state = FinalState::default();
        let (ending, graph, _claim) = self
            .drive_claimed(&run, &plan, &graph_id, cancel, final_state.clone())
            .await;
        let (others_wait, next) = self
            .finish(
                &run,
                &plan,
                &graph_id,
                ending,
                graph,
                final_state,
                rollback.load(Ordering::Relaxed),
                started,
            )
            .await;
        self.active().remove(&run.run_id);
        // Only runs of this thread became claimable; this worker looks for work next
        // anyway, so others are told only when runs wait on the thread.
        if others_wait {
            self.wake_workers();
        }
        next
    }

    /// Drives the run, taking its thread's execution claim if it outlives the
    /// coordinator's claim delay. The claim is returned to be held until the run is
    /// settled and mirrored, so a crash from then on frees it; a claim that cannot be
    /// taken stops the run.
    async fn drive_claimed(
        &self,
        run: &Run,
        plan: &RunPlan,
        graph_id: &str,
        cancel: CancellationToken,
        final_state: FinalState,
    ) -> (
        Ending,
        Option<Arc<dyn AgentGraph>>,
        Option<Box<dyn ThreadClaim>>,
    ) {
        let coordinator = &self.inner.coordinator;
        let Some(delay) = coordinator.claim_delay() else {
            let (ending, graph) = self.drive(run, plan, graph_id, cancel, final_state).await;
            return (ending, graph, None);
        };
        let driving = self.drive(run, plan, graph_id, cancel.clone(), final_state);
        tokio::pin!(driving);
        tokio::select! {
            (ending, graph) = &mut driving => return (ending, graph, None),
            () = tokio::time::sleep(delay) => {}
        }
        let claiming = coordinator.claim_thread(run.thread_id);
        tokio::pin!(claiming);
        let claimed = tokio::select! {
            claimed = &mut claiming => claimed,
            (ending, graph) = &mut driving => {
                // A claim started is finished, never dropped mid-statement (its lock
                // could stay behind on a pooled connection), and held like any other.
                return (ending, graph, claiming.await.ok());
            }
        };
        match claimed {
            Ok(claim) => {
                let (ending, graph) = driving.await;
                (ending, graph, Some(claim))
            }
            Err(error) => {
                cancel.cancel();
                let (_, graph) = driving.await;
                let error = RunError::new("ExecutionClaimError", error.chain());
                (Ending::Failed(error), graph, None)
            }
        }
    }

    async fn drive(
        &self,
        run: &Run,
        plan: &RunPlan,
        graph_id: &str,
        cancel: CancellationToken,
        final_state: FinalState,
    ) -> (Ending, Option<Arc<dyn AgentGraph>>) {
        let graph = match self.inner.graphs.load(graph_id).await {
            Ok(graph) => graph,
            Err(error) => return (Ending::Failed(error.to_run_error()), None),
        };
        let options = stream_options(plan);
        let input = RunInput::from_request(plan.input.clone(), plan.command.clone());
        let mut ctx = RunContext::new(cancel.clone()).with_store(self.long_term_store());
        ctx.final_state = final_state;
        let wants_events = plan.stream_mode.contains(&StreamMode::Events);
        let started = if wants_events {
            match graph
                .stream_events(input.clone(), options.clone(), ctx.clone())
                .await
            {
                Err(GraphError::CapabilityMissing { .. }) => {
                    graph.stream(input, options, ctx).await
                }
                other => other,
            }
        } else {
            graph.stream(input, options, ctx).await
        };
        let mut chunks = match started {
            Ok(chunks) => chunks,
            Err(error) => return (self.ending_of(error, &cancel), Some(graph)),
        };
        let mut messages = MessageAccumulator::default();
        let consume = async {
            while let Some(item) = chunks.next().await {
                match item {
                    Ok(chunk) => self.publish_chunk(run, plan, &chunk, &mut messages).await,
                    Err(error) => return Err(error),
                }
            }
            Ok(())
        };
        let deadline = sleep_or_forever(self.config().run_timeout);
        let ending = tokio::select! {
            result = consume => match result {
                Ok(()) if cancel.is_cancelled() => Ending::Cancelled,
                Ok(()) => Ending::Completed,
                Err(error) => self.ending_of(error, &cancel),
            },
            () = cancel.cancelled() => Ending::Cancelled,
            () = self.cancelled_elsewhere(run.run_id) => {
                cancel.cancel();
                Ending::Cancelled
            }
            () = deadline => {
                cancel.cancel();
                Ending::TimedOut
            }
        };
        (ending, Some(graph))
    }

    fn ending_of(&self, error: GraphError, cancel: &CancellationToken) -> Ending {
        if matches!(error, GraphError::Cancelled) || cancel.is_cancelled() {
            Ending::Cancelled
        } else {
            Ending::Failed(error.to_run_error())
        }
    }

    async fn publish_chunk(
        &self,
        run: &Run,
        plan: &RunPlan,
        chunk: &Chunk,
        messages: &mut MessageAccumulator,
    ) {
        let namespace = chunk.namespace();
        if !namespace.is_empty() && !plan.subgraphs {
            return;
        }
        let mode = chunk.mode();
        let requested = |wanted: StreamMode| plan.stream_mode.contains(&wanted);
        let suffix = if namespace.is_empty() {
            String::new()
        } else {
            format!("|{}", namespace.join("|"))
        };
        if mode == "messages" {
            if requested(StreamMode::MessagesTuple) {
                self.publish_run_frame(run, &format!("messages{suffix}"), &chunk.data())
                    .await;
            }
            if requested(StreamMode::Messages) {
                for (event, data) in messages.accept(&chunk.data()) {
                    self.publish_run_frame(run, &format!("{event}{suffix}"), &data)
                        .await;
                }
            }
            return;
        }
        let Some(mode) = StreamMode::parse(mode) else {
            return;
        };
        if !requested(mode) {
            return;
        }
        let event = if mode == StreamMode::Events {
            "events".to_owned()
        } else {
            format!("{}{suffix}", mode.as_str())
        };
        match chunk.encoded_json() {
            Some(json) => {
                self.publish_run_bytes(run, &event, Bytes::from(json.to_owned()))
                    .await
            }
            None => self.publish_run_frame(run, &event, &chunk.data()).await,
        }
    }

    /// Publishes a frame on the run's topic and, when a thread stream listens, on the
    /// thread's.
    pub(crate) async fn publish_run_frame(&self, run: &Run, event: &str, data: &Value) {
        let bytes = Bytes::from(serde_json::to_vec(data).unwrap_or_default());
        self.publish_run_bytes(run, event, bytes).await;
    }

    async fn publish_run_bytes(&self, run: &Run, event: &str, bytes: Bytes) {
        self.inner
            .bus
            .publish(Topic::Run(run.run_id), event, bytes.clone())
            .await;
        self.publish_thread_bytes(run.thread_id, event, bytes).await;
    }

    /// Settles the run, mirrors it onto its thread and publishes its outcome; tells
    /// whether other runs wait on the thread, and returns the run this worker takes
    /// next: one its instance queued, claimed in the settle's own step when the store
    /// could.
    #[allow(clippy::too_many_arguments)]
    async fn finish(
        &self,
        run: &Run,
        plan: &RunPlan,
        graph_id: &str,
        ending: Ending,
        graph: Option<Arc<dyn AgentGraph>>,
        final_state: FinalState,
        rollback: bool,
        started: Instant,
    ) -> (bool, Option<NextRun>) {
        let thread_id = run.thread_id;
        let (status, error) = match &ending {
            Ending::Completed => (RunStatus::Success, None),
            Ending::Failed(error) => (RunStatus::Error, Some(error.clone())),
            Ending::Cancelled => (RunStatus::Cancelled, None),
            Ending::TimedOut => (
                RunStatus::Timeout,
                Some(RunError::new(
                    "TimeoutError",
                    format!(
                        "Run exceeded the run timeout of {} ms",
                        self.config().run_timeout.map_or(0, |t| t.as_millis())
                    ),
                )),
            ),
        };
        // A rollback was asked for with a cancel already recorded, so the run settles as
        // cancelled. Its checkpoints go first: once it is settled, the thread's next run
        // may start, and must not read them. The state below is read after they are gone.
        if rollback
            && let Err(error) = self
                .inner
                .checkpointer
                .delete_run(&thread_id.to_string(), &run.run_id.to_string())
                .await
        {
            tracing::error!(run_id = %run.run_id, %error, "rollback failed");
        }
        let snapshot = match &graph {
            Some(graph) => match final_state.take() {
                Some(snapshot) if matches!(ending, Ending::Completed) && !rollback => {
                    Some(snapshot)
                }
                _ => self.read_state(graph.as_ref(), run).await,
            },
            None => None,
        };
        let paused = matches!(ending, Ending::Completed)
            && snapshot
                .as_ref()
                .is_some_and(|snapshot| snapshot.is_paused());
        if let Some(error) = &error {
            tracing::error!(
                run_id = %run.run_id,
                thread_id = %thread_id,
                graph_id,
                error = %error.chain_summary(),
                "run failed"
            );
            let client_error = self.client_error(error);
            self.publish_run_frame(run, "error", &json!(client_error))
                .await;
        }
        let settlement = Settlement {
            status,
            error: error.clone(),
            interrupted: paused,
            webhook: None,
        };
        // A thread deleted right after the run is not worth mirroring onto.
        let discard_thread = plan.temporary && plan.on_completion == OnCompletion::Delete;
        // The next queued run is claimed in the settle's own step below; a stateless
        // run's plain settle leaves it to a claim by id.
        let mut next = None;
        // The outcome is mirrored in the settle's own step when the run settles as
        // planned; `mirrored` then says whether other runs wait on the thread.
        let (final_status, mirrored) = if discard_thread {
            match self.store().runs().settle(run.run_id, settlement).await {
                Ok(settled) => (settled.run.status, None),
                Err(error) => {
                    tracing::error!(run_id = %run.run_id, %error, "settling the run failed");
                    (status, None)
                }
            }
        } else {
            let mirror = thread_mirror(snapshot.as_ref(), status, error.as_ref());
            next = self.pop_queued_here();
            let claim_next = next.as_ref().map(|next| ClaimNext {
                run_id: next.run_id,
                now: self.now(),
            });
            match self
                .store()
                .runs()
                .settle_and_mirror(run.run_id, settlement, mirror, claim_next)
                .await
            {
                Ok(outcome) => {
                    if let Some(next) = &mut next {
                        next.claimed = outcome.next;
                    }
                    (outcome.settled.run.status, outcome.others_wait)
                }
                Err(error) => {
                    tracing::error!(run_id = %run.run_id, %error, "settling the run failed");
                    (status, None)
                }
            }
        };

        if rollback && let Err(error) = self.store().runs().delete(run.run_id).await {
            tracing::warn!(run_id = %run.run_id, %error, "deleting the rolled-back run failed");
        }

        // The state read before the settle is still current when the run settled as
        // planned; anything else (a cancel that won the race) is read again.
        let snapshot = match (final_status == status, &graph) {
            (true, _) => snapshot,
            (false, Some(graph)) => self.read_state(graph.as_ref(), run).await,
            (false, None) => None,
        };
        let others_wait = match mirrored {
            Some(others_wait) => others_wait,
            None if discard_thread => false,
            None => {
                let mirror = thread_mirror(snapshot.as_ref(), final_status, error.as_ref());
                self.mirror_after_run(thread_id, mirror).await
            }
        };
        let body = match (final_status, &error) {
            (RunStatus::Error, Some(error)) => json!({ "__error__": self.client_error(error) }),
            _ => match snapshot {
                Some(snapshot) => {
                    let interrupts = pending_interrupts(&snapshot);
                    result_body(Some(snapshot.values), &interrupts)
                }
                None => json!({}),
            },
        };
        self.publish_outcome(run.run_id, &body).await;
        self.inner.bus.close(Topic::Run(run.run_id)).await;
        self.publish_thread_event(
            thread_id,
            "metadata",
            &json!({"status": "run_done", "run_id": run.run_id}),
        )
        .await;
        tracing::info!(
            run_id = %run.run_id,
            thread_id = %thread_id,
            graph_id,
            status = final_status.as_str(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "run finished"
        );
        if discard_thread {
            if let Err(error) = self.store().threads().delete(thread_id).await {
                tracing::warn!(%thread_id, %error, "deleting the stateless run's thread failed");
            }
            if let Err(error) = self
                .inner
                .checkpointer
                .delete_thread(&thread_id.to_string())
                .await
            {
                tracing::warn!(%thread_id, %error, "deleting the stateless run's checkpoints failed");
            }
        }
        (others_wait, next)
    }

    /// The thread's state now, or `None` (logged) when it cannot be read.
    async fn read_state(&self, graph: &dyn AgentGraph, run: &Run) -> Option<StateSnapshot> {
        let config = RunnableConfig::for_thread(run.thread_id.to_string());
        match graph.get_state(&config, StateOptions::default()).await {
            Ok(snapshot) => Some(snapshot),
            Err(error) => {
                tracing::warn!(run_id = %run.run_id, %error, "reading the state after the run failed");
                None
            }
        }
    }

    /// Mirrors a run's outcome onto its thread; returns whether other runs wait on it.
    async fn mirror_after_run(&self, thread_id: uuid::Uuid, mirror: ThreadMirror) -> bool {
        match self
            .store()
            .threads()
            .mirror_after_run(thread_id, mirror)
            .await
        {
            Ok(others_wait) => others_wait,
            // Deleted while the run ran: nothing to mirror, nothing waits.
            Err(error) if error.kind == service_store::ErrorKind::NotFound => false,
            Err(error) => {
                tracing::warn!(%thread_id, %error, "mirroring the run onto its thread failed");
                // Unknown: wake workers rather than leave a run waiting.
                true
            }
        }
    }

    /// The error as clients see it: without stacks unless they are exposed.
    pub(crate) fn client_error(&self, error: &RunError) -> RunError {
        if self.exposes_stacks() {
            error.clone()
        } else {
            error.clone().without_stacks()
        }
    }

    /// Publishes an event on a thread's stream, if anyone listens to it.
    pub(crate) async fn publish_thread_event(
        &self,
        thread_id: uuid::Uuid,
        event: &str,
        data: &Value,
    ) {
        let bytes = Bytes::from(serde_json::to_vec(data).unwrap_or_default());
        self.publish_thread_bytes(thread_id, event, bytes).await;
    }

    async fn publish_thread_bytes(&self, thread_id: uuid::Uuid, event: &str, data: Bytes) {
        let topic = Topic::Thread(thread_id);
        if self.inner.bus.is_open(topic).await {
            self.inner.bus.publish(topic, event, data).await;
        }
    }
}

impl Engine {
    /// Resolves when a cancel for this run was recorded by another instance; never
    /// in-process, where cancels reach the run's token directly.
    async fn cancelled_elsewhere(&self, run_id: uuid::Uuid) {
        let Some(interval) = self.inner.coordinator.check_interval() else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(interval).await;
            if self
                .store()
                .runs()
                .cancel_requested(run_id)
                .await
                .unwrap_or(false)
            {
                return;
            }
        }
    }
}

/// What a run that ended as `status` leaves on its thread: the state (when it could
/// be read) and, after a failure, the error status and message.
fn thread_mirror(
    snapshot: Option<&StateSnapshot>,
    status: RunStatus,
    error: Option<&RunError>,
) -> ThreadMirror {
    let failed = match status {
        RunStatus::Error | RunStatus::Timeout => Some((
            ThreadStatus::Error,
            error.map(|error| error.message.clone()),
        )),
        _ => None,
    };
    match snapshot {
        Some(snapshot) => snapshot_mirror(snapshot, failed),
        None => {
            let (status, error) = failed.unwrap_or((ThreadStatus::Idle, None));
            ThreadMirror {
                status,
                values: None,
                interrupts: Default::default(),
                error,
            }
        }
    }
}

/// The graph call options of a run: its config and checkpoint coordinates, the
/// requested modes (the wait body comes from the final state, not from frames), and
/// the run keys every checkpoint records.
fn stream_options(plan: &RunPlan) -> StreamOptions {
    let mut config = RunnableConfig::from(plan.config.clone());
    if let Some(checkpoint_id) = &plan.checkpoint_id {
        config = config.with_checkpoint_id(checkpoint_id.clone());
    }
    if let Some(ns) = &plan.checkpoint_ns {
        config
            .configurable
            .insert("checkpoint_ns".into(), Value::String(ns.clone()));
    }
    let stream_mode = plan.stream_mode.clone();
    let mut metadata = Metadata::new();
    for key in ["run_id", "thread_id", "graph_id", "assistant_id"] {
        if let Some(value) = config.configurable.get(key) {
            metadata.insert(key.into(), value.clone());
        }
    }
    metadata.insert("run_attempt".into(), json!(1));
    StreamOptions {
        stream_mode,
        subgraphs: plan.subgraphs,
        interrupt_before: plan.interrupt_before.clone(),
        interrupt_after: plan.interrupt_after.clone(),
        config,
        context: plan.context.clone(),
        metadata,
    }
}

async fn sleep_or_forever(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

/// Turns `["messages", [chunk, metadata]]` chunks into the `messages` mode's events:
/// `messages/metadata` once per message id, then `messages/partial` with the message
/// accumulated so far.
#[derive(Default)]
struct MessageAccumulator {
    messages: std::collections::HashMap<String, Value>,
}

impl MessageAccumulator {
    fn accept(&mut self, data: &Value) -> Vec<(&'static str, Value)> {
        let (chunk, metadata) = match data {
            Value::Array(pair) if pair.len() == 2 => (&pair[0], &pair[1]),
            other => (other, &Value::Null),
        };
        let id = chunk
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_owned();
        let mut events = Vec::new();
        let accumulated = match self.messages.get_mut(&id) {
            Some(existing) => {
                let addition = chunk
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(Value::String(content)) = existing.get_mut("content") {
                    content.push_str(addition);
                }
                existing.clone()
            }
            None => {
                events.push((
                    "messages/metadata",
                    json!({ id.clone(): {"metadata": metadata} }),
                ));
                let mut message = chunk.clone();
                if let Some(kind) = message.get_mut("type")
                    && kind == "AIMessageChunk"
                {
                    *kind = Value::String("ai".into());
                }
                self.messages.insert(id, message.clone());
                message
            }
        };
        events.push(("messages/partial", json!([accumulated])));
        events
    }
}
