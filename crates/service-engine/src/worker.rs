//! Workers: take the next run, claim it, drive it, settle it. Workers sleep on a
//! notification, never poll: they take the runs created claimed for them first, then
//! claim the runs their own instance queued by id, and search the queue only when it
//! may hold other work (another instance's run, a delayed run now due, a run that
//! waited for its thread).

use std::time::{Duration, Instant};

use serde_json::Value;
use service_graph::FinalState;
use service_graph::trace_context::{self, SpanKind};
use service_types::Run;

use crate::Engine;
use crate::active::ActiveRun;
use crate::drive::Driven;
use crate::run_options::{RunOptions, RunOptionsError};
use crate::scheduler::{NextRun, Promise, QueuedHere};
use crate::settle::{Finished, Settled};

impl Engine {
    pub(crate) async fn worker_loop(&self) {
        let scheduler = &self.inner.scheduler;
        loop {
            let woken = scheduler.wake_up();
            tokio::pin!(woken);
            // Registered before looking for work, so work queued in between still
            // wakes this worker.
            woken.as_mut().enable();
            // Before the shutdown check: a run claimed for this worker must run.
            if let Some(next) = scheduler.take_handed_over() {
                self.execute_queued(next).await;
                continue;
            }
            if self.inner.shutdown.is_cancelled() {
                return;
            }
            if let Some(next) = self.next_queued_here() {
                self.execute_queued(next).await;
                continue;
            }
            if scheduler.take_search() {
                // Read after the flag, so a run due when the flag was set is due now.
                match self.store().runs().claim_next(self.now()).await {
                    Ok(Some(claimed)) => {
                        // The queue may hold more: this worker searches again after the
                        // run, and another idle one now when more are due.
                        scheduler.search_again();
                        if claimed.more_pending {
                            scheduler.wake_one();
                        }
                        let handles = self.inner.active.register(claimed.run.run_id);
                        if let Some(next) = self.execute(claimed.run, handles, false, false).await {
                            self.execute_queued(next).await;
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::error!(%error, "claiming the next run failed");
                        scheduler.search_again();
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                            () = self.inner.shutdown.cancelled() => return,
                        }
                        continue;
                    }
                }
            }
            let _idle = scheduler.idle();
            tokio::select! {
                () = &mut woken => {}
                () = self.inner.shutdown.cancelled() => {}
            }
        }
    }

    /// Promises an idle worker to a run about to be created claimed; `None` when every
    /// idle worker is promised already, none is idle, or the engine stops.
    pub(crate) fn promise_idle_worker(&self) -> Option<Promise> {
        if self.inner.shutdown.is_cancelled() {
            return None;
        }
        self.inner.scheduler.promise_idle_worker()
    }

    /// The oldest run this instance queued, registered (so a cancel reaches it from
    /// before its claim); `None` when there is none, when a run created claimed waits
    /// for a worker, or when the engine is shutting down.
    pub(crate) fn next_queued_here(&self) -> Option<NextRun> {
        if self.inner.shutdown.is_cancelled() {
            return None;
        }
        let QueuedHere {
            run_id,
            made_thread,
        } = self.inner.scheduler.pop_queued_here()?;
        Some(NextRun {
            run_id,
            handles: self.inner.active.register(run_id),
            claimed: None,
            thread_is_new: made_thread,
        })
    }

    /// Runs `next` and then each run claimed with its predecessor's settle, claiming
    /// by id the ones that were not.
    async fn execute_queued(&self, mut next: NextRun) {
        loop {
            let run = match next.claimed.take() {
                Some(run) => run,
                // Read now, not before the pop: a clock read before the run was queued
                // would find it not yet due.
                None => match self.store().runs().claim(next.run_id, self.now()).await {
                    Ok(Some(claimed)) => next.note_claim(claimed),
                    // Taken by another instance, cancelled, or waiting for its thread
                    // (which wakes the workers when it frees up). Whatever else kept
                    // it, the queue search and the delayed-run timer look again.
                    Ok(None) => {
                        self.inner.active.remove(next.run_id);
                        self.inner.scheduler.delays_changed();
                        self.inner.scheduler.queue_changed();
                        return;
                    }
                    Err(error) => {
                        self.inner.active.remove(next.run_id);
                        tracing::error!(%error, run_id = %next.run_id, "claiming a run failed");
                        self.inner.scheduler.queue_changed();
                        return;
                    }
                },
            };
            match self
                .execute(run, next.handles, true, next.thread_is_new)
                .await
            {
                Some(following) => next = following,
                None => return,
            }
        }
    }

    /// Runs a claimed run registered with `handles`; `registered_before_claim` says no
    /// cancel can have been recorded unseen between its claim and its registration,
    /// `thread_is_new` that no checkpoint can be on its thread ([`NextRun`]). Returns
    /// the run this worker takes next, when it took one from its instance's queue as
    /// this one settled.
    async fn execute(
        &self,
        run: Run,
        handles: ActiveRun,
        registered_before_claim: bool,
        thread_is_new: bool,
    ) -> Option<NextRun> {
        // Decoded before the run's span is made, which is parented on the
        // `traceparent` in them.
        let options = RunOptions::decode(&run);
        run_scope(&run, options.as_ref().ok())
            .instrument(self.execute_traced(
                run,
                options,
                handles,
                registered_before_claim,
                thread_is_new,
            ))
            .await
    }

    async fn execute_traced(
        &self,
        run: Run,
        options: Result<RunOptions, RunOptionsError>,
        handles: ActiveRun,
        registered_before_claim: bool,
        thread_is_new: bool,
    ) -> Option<NextRun> {
        let started = Instant::now();
        let started_at = self.now();
        let _executing = self.inner.metrics.run_started();
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
            handles.cancel.cancel();
        }
        let final_state = FinalState::default();
        let (options, driven) = match options {
            Ok(mut options) => {
                options.thread_is_new = thread_is_new;
                let cancel = handles.cancel.clone();
                let driving =
                    self.inner
                        .driver
                        .drive_claimed(&run, &options, cancel, final_state.clone());
                let driven = driving.await;
                (Some(options), driven)
            }
            Err(error) => (
                None,
                Driven::failed(crate::telemetry::Failure::of(error.to_run_error())),
            ),
        };
        let run_id = run.run_id;
        // A stateless run's thread goes: it hands over no run of that thread.
        let keeps_thread = !options.as_ref().is_some_and(RunOptions::discards_thread);
        let next = if keeps_thread {
            self.next_queued_here()
        } else {
            None
        };
        let finished = Finished {
            run,
            options,
            driven,
            final_state,
            rolled_back: handles.rolled_back(),
            started,
            started_at,
        };
        let settling = self.inner.settler.settle(finished, next);
        let Settled { others_wait, next } = trace_context::span("run.settle", SpanKind::Internal)
            .instrument(settling)
            .await;
        self.inner.active.remove(run_id);
        // Only runs of this thread became claimable; this worker looks for work next
        // anyway, so others are told only when runs wait on the thread.
        if others_wait {
            self.wake_workers();
        }
        next
    }
}

/// The scope of a run's execution, a child of the request that created it (its
/// `traceparent` is stored with the run, which may execute on another instance). A run
/// stored before `Run::traceparent` existed keeps it in its options: decoded, or its
/// stored ones when they cannot be decoded.
fn run_scope(run: &Run, options: Option<&RunOptions>) -> trace_context::Scope {
    let parent = run.traceparent.as_deref().or_else(|| match options {
        Some(options) => options.traceparent.as_deref(),
        None => run.kwargs.get("traceparent").and_then(Value::as_str),
    });
    let scope = trace_context::child_of(parent, "run", SpanKind::Internal);
    scope.record(|span| {
        span.set("run_id", run.run_id);
        span.set("thread_id", run.thread_id);
        span.set("assistant_id", run.assistant_id);
        let graph_id = options.and_then(RunOptions::graph_id).unwrap_or_default();
        span.set("graph_id", graph_id.to_owned());
    });
    scope
}
