//! Run creation (validation, thread handling, multitask strategies), cancellation,
//! listing, and the wait/join result body.

use serde_json::{Value, json};
use service_store::{
    ActiveRunsQuery, CancelOutcome, ErrorKind as StoreErrorKind, NewRun, NewThread, RunListQuery,
    ThreadAndActive, ThreadRunCreated,
};
use service_types::{
    Assistant, BulkCancel, BulkCancelStatus, CancelAction, IfNotExists, Metadata,
    MultitaskStrategy, Run, RunCreate, RunStatus, Thread, ThreadStatus,
};
use uuid::Uuid;

use crate::active::ActiveRun;
use crate::auth::{Caller, Scope};
use crate::bus::{Replay, Subscription, Topic};
use crate::cancel_cause::CancelCause;
use crate::limits::{check_run_numbers, clamped_limit, offset};
use crate::run_options::{RunIds, RunOptions};
use crate::scheduler::{NextRun, Promise, QueuedHere};
use crate::{Engine, EngineError, EngineResult};

/// Where a run executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunTarget {
    /// On an existing (or, with `if_not_exists: create`, new) thread.
    Thread(Uuid),
    /// On a temporary thread the service makes and, by default, deletes afterwards.
    Stateless,
}

/// Metadata keys the server owns; clients cannot set them on a run.
const RESERVED_METADATA: [&str; 4] = ["thread_id", "assistant_id", "run_id", "cron_id"];

fn no_runs_to_cancel() -> EngineError {
    EngineError::not_found("No runs found to cancel.")
}

impl Engine {
    /// Creates a run for `caller`: validates the body, checks the caller may read the
    /// run's assistant, prepares the thread (one outside the caller's scope is not
    /// found; one made for the run is stamped, as is the run), applies the multitask
    /// strategy, inserts the pending row and wakes a worker.
    pub(crate) async fn create_run(
        &self,
        caller: &Caller,
        target: RunTarget,
        body: RunCreate,
    ) -> EngineResult<Run> {
        Ok(self.create(caller, target, body, false).await?.0)
    }

    /// Like [`create_run`](Self::create_run), also subscribed to the run's frames from
    /// before the run can be claimed: a caller that streams or waits cannot miss a run
    /// that ends, and drops out of the bus's retention, before it subscribes. Such a
    /// run on a thread made for it, or on one nothing runs on, may be created claimed,
    /// for an idle worker, so the returned run's status is not the pending one clients
    /// are shown on creation.
    pub(crate) async fn create_run_watched(
        &self,
        caller: &Caller,
        target: RunTarget,
        body: RunCreate,
    ) -> EngineResult<(Run, Subscription)> {
        let (run, subscription) = self.create(caller, target, body, true).await?;
        Ok((run, subscription.unwrap_or_else(crate::bus::unavailable)))
    }

    async fn create(
        &self,
        caller: &Caller,
        target: RunTarget,
        body: RunCreate,
        watch: bool,
    ) -> EngineResult<(Run, Option<Subscription>)> {
        service_graph::trace_context::span(
            "run.create",
            service_graph::trace_context::SpanKind::Internal,
        )
        .instrument(self.create_traced(caller, target, body, watch))
        .await
    }

    async fn create_traced(
        &self,
        caller: &Caller,
        target: RunTarget,
        mut body: RunCreate,
        watch: bool,
    ) -> EngineResult<(Run, Option<Subscription>)> {
        validate_run_body(&body, target)?;
        let scope = caller.scope();
        scope.stamp_option(&mut body.metadata);
        if let Some(webhook) = &body.webhook {
            self.check_webhook(webhook)?;
        }
        let assistant = self.runnable_assistant(caller, &body.assistant_id).await?;
        if let Queued::Run(run, subscription) =
            self.queue(target, &body, &assistant, watch, scope).await?
        {
            return Ok((run, subscription));
        }
        // Built from a remembered assistant that changed since (on another instance):
        // once more from the stored one.
        self.forget_assistant(assistant.assistant_id);
        let assistant = self.runnable_assistant(caller, &body.assistant_id).await?;
        match self.queue(target, &body, &assistant, watch, scope).await? {
            Queued::Run(run, subscription) => Ok((run, subscription)),
            _ => Err(EngineError::conflict(
                "The assistant changed while the run was being created; try again.",
            )),
        }
    }

    /// Queues the run on its target, as built from `assistant`.
    async fn queue(
        &self,
        target: RunTarget,
        body: &RunCreate,
        assistant: &Assistant,
        watch: bool,
        scope: &Scope,
    ) -> EngineResult<Queued> {
        match target {
            RunTarget::Stateless => {
                let thread = Self::thread_for_run(Uuid::now_v7(), assistant, None, scope);
                let thread = RunThread::New(thread);
                match self
                    .insert_run(thread, Uuid::now_v7(), assistant, body, true, watch)
                    .await?
                {
                    Queued::ThreadExists(_) => Err(EngineError::conflict(
                        "A thread with the new stateless run's thread id exists",
                    )),
                    queued => Ok(queued),
                }
            }
            RunTarget::Thread(thread_id) => {
                let _gate = self.inner.scheduler.thread_gate(thread_id).lock().await;
                let not_found = || EngineError::not_found("Thread or assistant not found.");
                if body.if_not_exists != Some(IfNotExists::Create) {
                    // The thread and what runs on it, for its strategy, in one read.
                    let ThreadAndActive { thread, active } = self
                        .store()
                        .runs()
                        .thread_and_active(thread_id)
                        .await?
                        .filter(|read| scope.admits(&read.thread.metadata))
                        .ok_or_else(not_found)?;
                    return self
                        .insert_on_existing(thread, Some(active), assistant, body, watch)
                        .await;
                }
                // Made with its run in one step, unless it exists; then the same step
                // returned it, and the run is queued on it as on any existing thread.
                let ttl = self
                    .config()
                    .thread_default_ttl_minutes
                    .map(service_types::TtlSetting::Minutes);
                let new = RunThread::New(Self::thread_for_run(thread_id, assistant, ttl, scope));
                let queued = self
                    .insert_run(new, Uuid::now_v7(), assistant, body, false, watch)
                    .await?;
                let existing = match queued {
                    Queued::ThreadExists(Some(thread)) => thread,
                    // Made concurrently by another instance, too late to be read.
                    Queued::ThreadExists(None) => self
                        .store()
                        .threads()
                        .get(thread_id)
                        .await?
                        .ok_or_else(not_found)?,
                    queued => return Ok(queued),
                };
                if !scope.admits(&existing.metadata) {
                    return Err(not_found());
                }
                self.insert_on_existing(existing, None, assistant, body, watch)
                    .await
            }
        }
    }

    /// A thread made for a run: busy, naming its run's graph and assistant, stamped
    /// with its caller's scope, ready for the run.
    fn thread_for_run(
        thread_id: Uuid,
        assistant: &Assistant,
        ttl: Option<service_types::TtlSetting>,
        scope: &Scope,
    ) -> NewThread {
        let mut metadata = latest_run_metadata(assistant);
        scope.stamp(&mut metadata);
        NewThread {
            thread_id,
            metadata,
            status: ThreadStatus::Busy,
            ttl,
        }
    }

    /// Queues a run on a thread that existed, after its multitask strategy; `active`
    /// is the thread's active runs when they were read with it.
    async fn insert_on_existing(
        &self,
        thread: Thread,
        active: Option<Vec<Run>>,
        assistant: &Assistant,
        body: &RunCreate,
        watch: bool,
    ) -> EngineResult<Queued> {
        let strategy = body.multitask_strategy.unwrap_or_default();
        // Minted first: the runs it displaces record it in their cancel reason.
        let run_id = Uuid::now_v7();
        let active = match active {
            Some(active) => active,
            None => {
                let query = ActiveRunsQuery {
                    thread_id: Some(thread.thread_id),
                    ..ActiveRunsQuery::default()
                };
                self.store().runs().active(&query).await?
            }
        };
        let free = active.is_empty();
        self.apply_multitask_strategy(strategy, run_id, active)
            .await?;
        let thread = RunThread::Existing { thread, free };
        self.insert_run(thread, run_id, assistant, body, false, watch)
            .await
    }

    /// Makes way for the new run `by` among a thread's `active` runs, as its strategy
    /// says.
    async fn apply_multitask_strategy(
        &self,
        strategy: MultitaskStrategy,
        by: Uuid,
        active: Vec<Run>,
    ) -> EngineResult<()> {
        if active.is_empty() {
            return Ok(());
        }
        match strategy {
            MultitaskStrategy::Reject => Err(EngineError::conflict(
                "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
            )),
            MultitaskStrategy::Enqueue => Ok(()),
            MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback => {
                let action = if strategy == MultitaskStrategy::Rollback {
                    CancelAction::Rollback
                } else {
                    CancelAction::Interrupt
                };
                let cause = CancelCause::Superseded { by, strategy };
                for run in active {
                    self.cancel_known_run(run, action, cause).await?;
                }
                Ok(())
            }
        }
    }

    async fn insert_run(
        &self,
        thread: RunThread,
        run_id: Uuid,
        assistant: &Assistant,
        body: &RunCreate,
        stateless: bool,
        watch: bool,
    ) -> EngineResult<Queued> {
        let (thread_id, thread_metadata) = match &thread {
            RunThread::Existing { thread, .. } => (thread.thread_id, &thread.metadata),
            RunThread::New(new) => (new.thread_id, &new.metadata),
        };
        let mut metadata = assistant.metadata.clone();
        metadata.extend(thread_metadata.clone());
        if let Some(request) = body.metadata.clone() {
            metadata.extend(
                request
                    .into_iter()
                    .filter(|(key, _)| !RESERVED_METADATA.contains(&key.as_str())),
            );
        }
        let options = RunOptions::new(
            body,
            RunIds {
                run_id,
                thread_id,
                assistant,
                stateless,
            },
        );
        let after = body.after_seconds.unwrap_or(0.0).max(0.0);
        let available_at = self.now().plus_millis((after * 1000.0) as i64);

        // A watched run (its answer shows no status) due now, on a thread made for it
        // or one nothing ran on as read, is created claimed when an idle worker can
        // take it: no claim follows, and no other instance needs telling.
        let thread_free = match &thread {
            RunThread::New(_) => true,
            RunThread::Existing { free, .. } => *free,
        };
        let promise = (watch && thread_free && available_at <= self.now())
            .then(|| self.promise_idle_worker())
            .flatten();
        // Registered before its row exists, so a cancel reaches it from the start.
        let claimed = promise.map(|promise| (promise, self.inner.active.register(run_id)));

        let topic = Topic::Run(run_id);
        self.inner.bus.open(topic).await;
        let subscription = if watch {
            let subscription = self.inner.bus.subscribe(topic, Replay::All).await;
            subscription.map(|subscription| self.ending_with_run(run_id, subscription))
        } else {
            None
        };
        let new = NewRun {
            run_id,
            thread_id,
            assistant_id: assistant.assistant_id,
            metadata,
            multitask_strategy: Some(body.multitask_strategy.unwrap_or_default()),
            kwargs: options.to_kwargs(),
            available_at,
            assistant_as_read: Some(service_store::AssistantStamp::of(assistant)),
            claimed: claimed.is_some(),
            traceparent: service_graph::trace_context::current(),
        };
        let thread_is_new = matches!(thread, RunThread::New(_));
        let run = match thread {
            // The thread names the graph and assistant of its latest run, and is busy as
            // its row becomes claimable, in the same step (a thread made for this run
            // is created so, with the run).
            RunThread::Existing { .. } => {
                let latest = latest_run_metadata(assistant);
                self.store().runs().create(new, latest).await
            }
            RunThread::New(thread) => {
                match self.store().runs().create_with_thread(thread, new).await {
                    Ok(ThreadRunCreated::Created(run)) => Ok(run),
                    Ok(ThreadRunCreated::ThreadExists(existing)) => {
                        self.withdraw_claim(run_id, claimed);
                        self.inner.bus.discard(topic).await;
                        return Ok(Queued::ThreadExists(existing));
                    }
                    Err(error) => Err(error),
                }
            }
        };
        let run = match run {
            Ok(run) => run,
            Err(error) => {
                self.withdraw_claim(run_id, claimed);
                self.inner.bus.discard(topic).await;
                if error.kind == StoreErrorKind::Stale {
                    return Ok(Queued::AssistantChanged);
                }
                return Err(error.into());
            }
        };
        // On an existing thread the store queues a run asked to be claimed when
        // another run came first (or a state edit holds the thread).
        let claimed = match claimed {
            Some(claimed) if run.status != RunStatus::Running => {
                self.withdraw_claim(run_id, Some(claimed));
                None
            }
            claimed => claimed,
        };
        self.inner.metrics.run_created();
        // Every run stream starts with this frame; published now, a stream learns its
        // run at once, also while the run waits for a worker or its thread.
        let metadata = json!({"run_id": run_id, "attempt": 1});
        if let Err(error) = self
            .inner
            .frames
            .publish_run_frame(&run, "metadata", &metadata)
            .await
        {
            tracing::error!(%run_id, %error, "publishing the run's metadata frame failed");
        }
        if let Some((promise, handles)) = claimed {
            let next = NextRun {
                run_id,
                handles,
                claimed: Some(run.clone()),
                thread_is_new,
            };
            self.inner.scheduler.hand_over(promise, next);
        } else if available_at > self.now() {
            self.inner.scheduler.delays_changed();
            self.announce();
        } else {
            self.inner.scheduler.queue_here(QueuedHere {
                run_id,
                made_thread: thread_is_new,
            });
            self.announce();
        }
        Ok(Queued::Run(run, subscription))
    }

    /// Undoes the claim a run was to be created with, when it was not created.
    fn withdraw_claim(&self, run_id: Uuid, claimed: Option<(Promise, ActiveRun)>) {
        if let Some((promise, _)) = claimed {
            self.inner.active.remove(run_id);
            self.inner.scheduler.withdraw(promise);
        }
    }

    /// Reads a run of a thread.
    pub(crate) async fn get_run(&self, thread_id: Option<Uuid>, run_id: Uuid) -> EngineResult<Run> {
        let run = self.store().runs().get(run_id).await?;
        run.filter(|run| thread_id.is_none_or(|thread| run.thread_id == thread))
            .ok_or_else(|| EngineError::not_found("Not Found"))
    }

    /// A thread's runs, newest first.
    pub(crate) async fn list_runs(
        &self,
        thread_id: Uuid,
        limit: Option<i64>,
        offset_rows: Option<i64>,
        status: Option<RunStatus>,
    ) -> EngineResult<Vec<Run>> {
        self.get_thread(thread_id).await?;
        let query = RunListQuery {
            status,
            limit: Some(clamped_limit(limit, 100)?),
            offset: offset(offset_rows)?,
        };
        Ok(self.store().runs().list(thread_id, &query).await?)
    }

    /// Deletes a run; a running one is cancelled first.
    pub(crate) async fn delete_run(&self, thread_id: Uuid, run_id: Uuid) -> EngineResult<()> {
        let run = self
            .store()
            .runs()
            .get(run_id)
            .await?
            .filter(|run| run.thread_id == thread_id)
            .ok_or_else(|| EngineError::not_found("Run not found"))?;
        if !run.status.is_terminal() {
            self.cancel_known_run(run, CancelAction::Interrupt, CancelCause::RunDeleted)
                .await?;
        }
        self.store().runs().delete(run_id).await?;
        self.inner.bus.discard(Topic::Run(run_id)).await;
        Ok(())
    }

    /// Cancels one run of a thread.
    pub(crate) async fn cancel_run(
        &self,
        thread_id: Uuid,
        run_id: Uuid,
        action: CancelAction,
        cause: CancelCause,
    ) -> EngineResult<Run> {
        let run = self
            .store()
            .runs()
            .get(run_id)
            .await?
            .filter(|run| run.thread_id == thread_id && !run.status.is_terminal())
            .ok_or_else(no_runs_to_cancel)?;
        self.cancel_known_run(run, action, cause).await
    }

    /// Cancels every run a bulk-cancel body selects within `scope` (by status, or by
    /// id on one thread within it); 404 when none matched.
    pub(crate) async fn cancel_runs(
        &self,
        body: BulkCancel,
        action: CancelAction,
        scope: &Scope,
    ) -> EngineResult<usize> {
        let runs = match (body.status, body.thread_id, body.run_ids) {
            (Some(status), None, None) => {
                let status = match status {
                    BulkCancelStatus::Pending => Some(RunStatus::Pending),
                    BulkCancelStatus::Running => Some(RunStatus::Running),
                    BulkCancelStatus::All => None,
                };
                let query = ActiveRunsQuery {
                    thread_id: None,
                    status,
                    limit: Some(self.config().max_page_size),
                    enforced: scope.enforced(),
                };
                self.store().runs().active(&query).await?
            }
            (None, Some(thread_id), Some(run_ids)) => {
                self.thread_within(thread_id, scope).await?;
                let mut runs = Vec::new();
                for run_id in run_ids {
                    if let Some(run) = self.store().runs().get(run_id).await?
                        && run.thread_id == thread_id
                        && !run.status.is_terminal()
                    {
                        runs.push(run);
                    }
                }
                runs
            }
            (Some(_), _, _) => {
                return Err(EngineError::unprocessable(
                    "When providing a 'status', 'thread_id' and 'run_ids' must be omitted. Either provide 'status' alone, or 'thread_id' with 'run_ids'.",
                ));
            }
            _ => {
                return Err(EngineError::unprocessable(
                    "Provide either 'status', or 'thread_id' together with 'run_ids'.",
                ));
            }
        };
        if runs.is_empty() {
            return Err(no_runs_to_cancel());
        }
        let count = runs.len();
        for run in runs {
            self.cancel_known_run(run, action, CancelCause::RequestedInBulk(action))
                .await?;
        }
        Ok(count)
    }

    /// Cancels a run known to exist: a pending run is settled at once; a running one
    /// is stopped by its worker, which settles it.
    pub(crate) async fn cancel_known_run(
        &self,
        run: Run,
        action: CancelAction,
        cause: CancelCause,
    ) -> EngineResult<Run> {
        let reason = cause.reason();
        match self
            .store()
            .runs()
            .request_cancel(run.run_id, &reason)
            .await?
        {
            CancelOutcome::Cancelled(run) => {
                self.finish_unstarted(&run, action).await?;
                Ok(run)
            }
            CancelOutcome::Requested(run) => {
                self.stop_requested(run.run_id, action == CancelAction::Rollback)
                    .await;
                Ok(run)
            }
            CancelOutcome::AlreadyTerminal(_) => Err(no_runs_to_cancel()),
        }
    }

    /// Stops a running run whose cancel was just recorded: here through its token, or
    /// on the instance executing it through an announcement (which otherwise finds
    /// the stored flag only at its next check).
    async fn stop_requested(&self, run_id: Uuid, rollback: bool) {
        if !self.inner.active.stop(run_id, rollback) {
            self.inner.coordinator.announce_cancel(run_id).await;
        }
    }

    /// Wraps up a run cancelled before it started: no webhook, no graph call.
    async fn finish_unstarted(&self, run: &Run, action: CancelAction) -> EngineResult<()> {
        let values = self
            .store()
            .threads()
            .get(run.thread_id)
            .await?
            .and_then(|thread| thread.values)
            .unwrap_or_else(|| json!({}));
        self.inner.frames.publish_outcome(run.run_id, &values).await;
        self.inner.bus.close(Topic::Run(run.run_id)).await;
        if action == CancelAction::Rollback {
            self.store().runs().delete(run.run_id).await?;
        }
        self.release_thread(run.thread_id).await?;
        self.wake_workers();
        Ok(())
    }

    /// After a run left a thread: busy while other runs are queued, else idle unless
    /// the thread is paused on an interrupt.
    pub(crate) async fn release_thread(&self, thread_id: Uuid) -> EngineResult<()> {
        let query = ActiveRunsQuery {
            thread_id: Some(thread_id),
            ..ActiveRunsQuery::default()
        };
        if !self.store().runs().active(&query).await?.is_empty() {
            return Ok(());
        }
        let Some(thread) = self.store().threads().get(thread_id).await? else {
            return Ok(());
        };
        if thread.status == ThreadStatus::Busy {
            let status = if thread.interrupts.is_empty() {
                ThreadStatus::Idle
            } else {
                ThreadStatus::Interrupted
            };
            self.store().threads().set_status(thread_id, status).await?;
        }
        Ok(())
    }

    /// Stops every pending or running run of a thread (thread deletion, ttl expiry).
    pub(crate) async fn abort_thread_runs(&self, thread_id: Uuid) -> EngineResult<()> {
        let query = ActiveRunsQuery {
            thread_id: Some(thread_id),
            ..ActiveRunsQuery::default()
        };
        let reason = CancelCause::ThreadDeleted(thread_id).reason();
        for run in self.store().runs().active(&query).await? {
            match self
                .store()
                .runs()
                .request_cancel(run.run_id, &reason)
                .await?
            {
                CancelOutcome::Requested(run) => self.stop_requested(run.run_id, false).await,
                CancelOutcome::Cancelled(run) | CancelOutcome::AlreadyTerminal(run) => {
                    self.inner.bus.close(Topic::Run(run.run_id)).await;
                }
            }
        }
        Ok(())
    }
}

/// What queuing a run did.
enum Queued {
    /// The run was queued (with the subscription to its frames, when asked for).
    Run(Run, Option<Subscription>),
    /// The thread to be made for it exists already; nothing was queued. The thread as
    /// the store read it then, if it could.
    ThreadExists(Option<Thread>),
    /// The assistant it was built from changed since it was read; nothing was queued.
    AssistantChanged,
}

/// The thread a run is queued on.
enum RunThread {
    /// Existed before: other runs may be on it, and it still needs marking. `free`
    /// when no run was active on it as read.
    Existing { thread: Thread, free: bool },
    /// Made for this run, with it: busy, naming its graph and assistant.
    New(NewThread),
}

/// The thread metadata naming the graph and assistant of the thread's latest run.
fn latest_run_metadata(assistant: &Assistant) -> Metadata {
    let mut metadata = Metadata::new();
    metadata.insert("graph_id".into(), Value::String(assistant.graph_id.clone()));
    metadata.insert(
        "assistant_id".into(),
        Value::String(assistant.assistant_id.to_string()),
    );
    metadata
}

/// Checks a run-creation body on its own, before anything is read or queued: what
/// `configurable`, `context`, `command`, `checkpoint_id` and the numbers may be.
pub fn validate_run_body(body: &RunCreate, target: RunTarget) -> EngineResult<()> {
    let configurable = body
        .config
        .as_ref()
        .and_then(|config| config.configurable.as_ref())
        .is_some_and(|configurable| !configurable.is_empty());
    let context = body
        .context
        .as_ref()
        .is_some_and(|context| !context.is_empty());
    if configurable && context {
        return Err(EngineError::bad_request(
            "Cannot specify both configurable and context. Prefer setting context alone. Context was introduced in LangGraph 0.6.0 and is the long term planned replacement for configurable.",
        ));
    }
    if target == RunTarget::Stateless
        && body.command.as_ref().is_some_and(|command| {
            command
                .get("resume")
                .is_some_and(|resume| !resume.is_null())
        })
    {
        return Err(EngineError::bad_request(
            "You must provide a thread_id when resuming.",
        ));
    }
    if let Some(command) = &body.command
        && !command.is_null()
        && !command.is_object()
    {
        return Err(EngineError::unprocessable("command must be an object"));
    }
    if let Some(checkpoint_id) = &body.checkpoint_id
        && Uuid::parse_str(checkpoint_id).is_err()
    {
        return Err(EngineError::unprocessable("Invalid checkpoint ID"));
    }
    check_run_numbers(body)
}
