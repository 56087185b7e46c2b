//! Settling a run that was driven: its terminal status, its outcome mirrored onto its
//! thread, its result published to waiters, and the next run its worker takes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use service_graph::{AgentGraph, FinalState, RunnableConfig, StateOptions, StateSnapshot};
use service_store::{ClaimNext, ErrorKind, Settlement, StoreError, ThreadMirror};
use service_types::{Run, RunError, RunStatus, ThreadStatus, Timestamp};
use uuid::Uuid;

use service_graph::Checkpointer;
use service_store::{Clock, Store};

use crate::callbacks::{CallbackBody, Callbacks};
use crate::drive::{Driven, Ending};
use crate::fence::Fences;
use crate::frames::Frames;
use crate::outcome::{pending_interrupts, result_body, snapshot_mirror};
use crate::run_options::RunOptions;
use crate::scheduler::NextRun;
use crate::telemetry::{self, Failure, Observers, RunEvent, RunFinished};

/// A run whose graph was driven, ready to settle.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) run: Run,
    /// `None` when the run's stored options did not decode (it failed for that).
    pub(crate) options: Option<RunOptions>,
    pub(crate) driven: Driven,
    /// The state the run ended in, when the graph handed it over.
    pub(crate) final_state: FinalState,
    /// The run was stopped as a rollback: what it wrote goes, and so does its row.
    pub(crate) rolled_back: bool,
    pub(crate) started: Instant,
    /// When its worker took it (the webhook's `run_started_at`).
    pub(crate) started_at: Timestamp,
}

/// What settling a run leaves its worker to do.
#[derive(Debug)]
pub(crate) struct Settled {
    /// Other runs wait on the run's thread, which it freed.
    pub(crate) others_wait: bool,
    /// The run this worker takes next: one its instance queued, claimed in the
    /// settle's own step when the store could.
    pub(crate) next: Option<NextRun>,
}

/// What settles driven runs: the store (status, thread mirror, delivery row in one
/// step), the checkpointer (a rollback's checkpoints, a stateless run's thread), the
/// frame writer (error frame, outcome, run done), the webhook sender, the clock and
/// the run timeout (its error's message).
pub(crate) struct Settler {
    pub(crate) store: Store,
    pub(crate) checkpointer: Arc<dyn Checkpointer>,
    /// The fence of the saver the graphs write through: a stopped run's is raised.
    pub(crate) fences: Arc<Fences>,
    pub(crate) frames: Frames,
    pub(crate) callbacks: Callbacks,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) run_timeout: Option<Duration>,
    pub(crate) metrics: crate::metrics::EngineMetrics,
    /// Telemetry sinks and the run-activity switch.
    pub(crate) observers: Observers,
}

/// How long a settle is retried while the database is unreachable.
const SETTLE_RETRY: Duration = Duration::from_secs(60);

/// `attempt` again while the store says its failure is transient (the database
/// restarting): a settle given up would leave a finished run `running` until recovery
/// settles it as lost. The run's claim is held meanwhile, so recovery leaves it alone.
async fn until_stored<T, F, Fut>(run_id: Uuid, mut attempt: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let deadline = Instant::now() + SETTLE_RETRY;
    let mut pause = Duration::from_millis(100);
    loop {
        match attempt().await {
            Err(error)
                if error.kind == ErrorKind::Transient && Instant::now() + pause < deadline =>
            {
                tracing::warn!(run_id = %run_id, %error, "settling the run failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            outcome => return outcome,
        }
    }
}

impl Settler {
    /// Settles the run, mirrors it onto its thread and publishes its outcome. `next`
    /// is the run its worker takes next, claimed in the settle's own step when the
    /// store can (none for a stateless run, whose thread goes).
    pub(crate) async fn settle(&self, finished: Finished, mut next: Option<NextRun>) -> Settled {
        let Finished {
            run,
            options,
            driven,
            final_state,
            rolled_back,
            started,
            started_at,
        } = finished;
        let Driven {
            ending,
            graph,
            reply,
            frames,
            // Held until the run is settled and mirrored: a crash before then leaves
            // a run that recovery must see as orphaned.
            claim,
        } = driven;
        let thread_id = run.thread_id;
        let graph_id = options
            .as_ref()
            .and_then(RunOptions::graph_id)
            .unwrap_or_default();
        let (status, mut failure) = match &ending {
            Ending::Completed => (RunStatus::Success, None),
            Ending::Failed(failure) => (RunStatus::Error, Some(failure.clone())),
            Ending::Cancelled => (RunStatus::Cancelled, None),
            Ending::TimedOut => (
                RunStatus::Timeout,
                Some(Failure::of(RunError::new(
                    "TimeoutError",
                    format!(
                        "Run exceeded the run timeout of {} ms",
                        self.run_timeout.map_or(0, |t| t.as_millis())
                    ),
                ))),
            ),
        };
        // What clients get (row, frame, wait body): stacks only when exposed.
        let error = failure
            .as_ref()
            .map(|failure| self.frames.client_error(&failure.error));
        // A stopped run's graph may still be working (a Python node sleeping in a
        // thread); whatever it stores from now on is refused, and what it is storing
        // lands before the rollback below.
        if rolled_back || matches!(ending, Ending::Cancelled | Ending::TimedOut) {
            self.fences.fence(&run.run_id.to_string()).await;
        }
        // A rollback was asked for with a cancel already recorded, so the run settles as
        // cancelled. Its checkpoints go first: once it is settled, the thread's next run
        // may start, and must not read them. The state below is read after they are gone.
        if rolled_back
            && let Err(error) = self
                .checkpointer
                .delete_run(&thread_id.to_string(), &run.run_id.to_string())
                .await
        {
            tracing::error!(run_id = %run.run_id, %error, "rollback failed");
        }
        let discard_thread = options.as_ref().is_some_and(RunOptions::discards_thread);
        // A discarded thread's checkpoints may have stayed with its run (the state it
        // hands over is then the only one), whatever the ending.
        let snapshot = match &graph {
            Some(graph) => match final_state.take() {
                Some(snapshot)
                    if discard_thread || (matches!(ending, Ending::Completed) && !rolled_back) =>
                {
                    Some(snapshot)
                }
                _ => self.read_state(graph.as_ref(), &run).await,
            },
            None => None,
        };
        let paused = matches!(ending, Ending::Completed)
            && snapshot
                .as_ref()
                .is_some_and(|snapshot| snapshot.is_paused());
        if let Some(failure) = &mut failure {
            // The node comes from the graph's error or, for a runtime that does not say
            // (the Python and JS bridges), from the failed task of the state read above
            // for the thread's mirror: no read of its own.
            if failure.node.is_none()
                && (telemetry::failure_report_listened() || self.observers.has_sinks())
            {
                failure.node = snapshot.as_ref().and_then(telemetry::failed_node);
            }
            telemetry::report_failure(&run, graph_id, failure);
        }
        if let Some(error) = &error
            && let Err(frame_error) = self.frames.publish_run_frame(&run, "error", error).await
        {
            tracing::error!(run_id = %run.run_id, error = %frame_error, "publishing the run's error failed");
        }
        let webhook = options
            .as_ref()
            .and_then(|options| options.webhook.as_deref())
            .and_then(|url| {
                self.callbacks.request(CallbackBody {
                    run: &run,
                    url,
                    values: snapshot.as_ref().map(|snapshot| snapshot.values.clone()),
                    error: error.as_ref().map(|error| error.message.clone()),
                    interrupts: paused
                        .then(|| snapshot.as_ref().map(|s| json!(pending_interrupts(s))))
                        .flatten(),
                    reply,
                    started_at,
                    ended_at: self.clock.now(),
                })
            });
        let unrecorded_webhook = self.callbacks.unrecorded(webhook.as_ref());
        let settlement = Settlement {
            status,
            error: error.clone(),
            interrupted: paused,
            webhook,
        };
        // The outcome is mirrored in the settle's own step when the run settles as
        // planned; `mirrored` then says whether other runs wait on the thread.
        let mut delivery = None;
        let (final_status, mirrored) = if discard_thread {
            // A stateless run's thread is deleted next: nothing to mirror, and its
            // plain settle leaves the next queued run to a claim by id.
            let settled = until_stored(run.run_id, || {
                self.store.runs().settle(run.run_id, settlement.clone())
            })
            .await;
            match settled {
                Ok(settled) => {
                    delivery = settled.delivery;
                    (settled.run.status, None)
                }
                Err(error) => {
                    tracing::error!(run_id = %run.run_id, %error, "settling the run failed");
                    (status, None)
                }
            }
        } else {
            let mirror = thread_mirror(snapshot.as_ref(), status, error.as_ref());
            let claim_next = next.as_ref().map(|next| ClaimNext {
                run_id: next.run_id,
                now: self.clock.now(),
            });
            let settled = until_stored(run.run_id, || {
                self.store.runs().settle_and_mirror(
                    run.run_id,
                    settlement.clone(),
                    mirror.clone(),
                    claim_next,
                )
            })
            .await;
            match settled {
                Ok(outcome) => {
                    if let (Some(next), Some(claimed)) = (&mut next, outcome.next) {
                        next.claimed = Some(next.note_claim(claimed));
                    }
                    delivery = outcome.settled.delivery;
                    (outcome.settled.run.status, outcome.others_wait)
                }
                Err(error) => {
                    tracing::error!(run_id = %run.run_id, %error, "settling the run failed");
                    (status, None)
                }
            }
        };

        self.metrics.run_settled(final_status);
        if rolled_back && let Err(error) = self.store.runs().delete(run.run_id).await {
            tracing::warn!(run_id = %run.run_id, %error, "deleting the rolled-back run failed");
        }

        // The state read before the settle is still current when the run settled as
        // planned; anything else (a cancel that won the race) is read again.
        let snapshot = match (final_status == status, &graph) {
            (true, _) => snapshot,
            (false, Some(graph)) => self.read_state(graph.as_ref(), &run).await,
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
        // The thread is free: its next run may start while the receiver answers.
        drop(claim);
        self.callbacks
            .send(delivery, unrecorded_webhook, final_status, paused);
        let body = match (final_status, &error) {
            (RunStatus::Error, Some(error)) => json!({ "__error__": error }),
            _ => match snapshot {
                Some(snapshot) => {
                    let interrupts = pending_interrupts(&snapshot);
                    if paused && self.observers.logs_activity() {
                        telemetry::interrupt_prompts(&run, &json!(interrupts));
                    }
                    result_body(Some(snapshot.values), &interrupts)
                }
                None => json!({}),
            },
        };
        self.frames.publish_outcome(run.run_id, &body).await;
        self.frames.close_run(run.run_id).await;
        self.frames.publish_run_done(thread_id, run.run_id).await;
        let duration = started.elapsed();
        tracing::info!(
            run_id = %run.run_id,
            thread_id = %thread_id,
            assistant_id = %run.assistant_id,
            graph_id,
            status = final_status.as_str(),
            elapsed_ms = duration.as_millis() as u64,
            frames,
            "run finished"
        );
        if self.observers.has_sinks() {
            let (node, original, graph_error) = match failure {
                Some(failure) => (failure.node, Some(failure.error), failure.source),
                None => (None, None, None),
            };
            self.observers.emit(&RunEvent::Finished(RunFinished {
                run_id: run.run_id,
                thread_id,
                assistant_id: run.assistant_id,
                graph_id: graph_id.to_owned(),
                status: final_status,
                duration,
                frames,
                error,
                node,
                original,
                graph_error,
            }));
        }
        if discard_thread {
            let saved_checkpoints = !graph
                .as_deref()
                .is_some_and(AgentGraph::keeps_discarded_checkpoints);
            self.discard_run_thread(thread_id, saved_checkpoints).await;
        }
        Settled { others_wait, next }
    }

    /// Deletes a stateless run's thread and, when its graph `saved_checkpoints` in the
    /// saver, its checkpoints, at once: they live behind two seams (two pools on
    /// PostgreSQL), and neither delete needs the other first.
    async fn discard_run_thread(&self, thread_id: Uuid, saved_checkpoints: bool) {
        let checkpoint_thread = thread_id.to_string();
        let checkpoints = async {
            if saved_checkpoints {
                self.checkpointer.delete_thread(&checkpoint_thread).await
            } else {
                Ok(())
            }
        };
        let (thread, checkpoints) =
            tokio::join!(self.store.threads().delete(thread_id), checkpoints);
        if let Err(error) = thread {
            tracing::warn!(%thread_id, %error, "deleting the stateless run's thread failed");
        }
        if let Err(error) = checkpoints {
            tracing::warn!(%thread_id, %error, "deleting the stateless run's checkpoints failed");
        }
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
    async fn mirror_after_run(&self, thread_id: Uuid, mirror: ThreadMirror) -> bool {
        match self
            .store
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
