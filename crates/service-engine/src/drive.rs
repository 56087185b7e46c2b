//! Driving a claimed run's graph: load it, stream its chunks into frames, stop it on
//! a cancel (here or on another instance) or the run timeout, and take its thread's
//! execution claim once it outlives the coordinator's claim delay.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::Value;
use service_graph::trace_context::{self, SpanKind};
use service_graph::{AgentGraph, Chunk, FinalState, GraphError, RunContext, RunInput};
use service_types::{Run, RunError, StreamMode};
use tokio_util::sync::CancellationToken;

use service_graph::{GraphResolver, LongTermStore};
use service_store::Store;

use crate::coordination::{Coordinator, ThreadClaim};
use crate::frames::{Frames, MessageAccumulator, chunk_frames};
use crate::run_options::RunOptions;
use crate::telemetry::{Activity, Failure, Observers};

/// The most frames of ready chunks published in one bus call. Larger batches raise a
/// networked bus's throughput further but hold back other runs' first frames behind
/// them (S4 through Redis at c=16, 2026-11-24: 6 gave 56–59k frames/s with a first
/// frame in 4.4–4.6 ms p50; 16 gave 74–81k in 7–8 ms; docs/performance.md §9).
const READY_FRAMES: usize = 6;

/// How driving the graph ended.
#[derive(Debug)]
pub(crate) enum Ending {
    Completed,
    Failed(Failure),
    Cancelled,
    TimedOut,
}

/// What driving a run left: how it ended, the graph (to read the state it ended in),
/// its last reply declaration, the frames it published, and the thread's execution
/// claim, held until the run is settled.
pub(crate) struct Driven {
    pub(crate) ending: Ending,
    pub(crate) graph: Option<Arc<dyn AgentGraph>>,
    /// What the graph last declared as the webhook's `reply`.
    pub(crate) reply: Option<Value>,
    pub(crate) frames: usize,
    pub(crate) claim: Option<Box<dyn ThreadClaim>>,
}

impl Driven {
    /// A run that ended before its graph could be driven.
    pub(crate) fn failed(failure: Failure) -> Self {
        Self {
            ending: Ending::Failed(failure),
            graph: None,
            reply: None,
            frames: 0,
            claim: None,
        }
    }
}

impl std::fmt::Debug for Driven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driven")
            .field("ending", &self.ending)
            .finish_non_exhaustive()
    }
}

/// What drives runs' graphs: where graphs come from, the coordinator (thread claims,
/// cancels on other instances), the store (a cancel recorded elsewhere, and the
/// long-term store graphs get), the frame writer and the run timeout.
pub(crate) struct Driver {
    pub(crate) graphs: Arc<dyn GraphResolver>,
    pub(crate) coordinator: Arc<dyn Coordinator>,
    pub(crate) store: Store,
    pub(crate) long_term: Arc<dyn LongTermStore>,
    pub(crate) frames: Frames,
    pub(crate) run_timeout: Option<Duration>,
    /// Whether run activity is logged.
    pub(crate) observers: Observers,
}

impl Driver {
    /// Drives the run, taking its thread's execution claim if it outlives the
    /// coordinator's claim delay, so a crash from then on frees the claim; a claim
    /// that cannot be taken stops the run.
    pub(crate) async fn drive_claimed(
        &self,
        run: &Run,
        options: &RunOptions,
        cancel: CancellationToken,
        final_state: FinalState,
    ) -> Driven {
        let coordinator = &self.coordinator;
        let graph_id = options.graph_id().unwrap_or_default();
        let scope = trace_context::span("graph", SpanKind::Internal);
        scope.record(|span| span.set("graph_id", graph_id.to_owned()));
        let driving = scope.instrument(self.drive(run, options, cancel.clone(), final_state));
        let Some(delay) = coordinator.tuning().map(|tuning| tuning.claim_delay) else {
            return driving.await;
        };
        tokio::pin!(driving);
        tokio::select! {
            driven = &mut driving => return driven,
            () = tokio::time::sleep(delay) => {}
        }
        let claiming = coordinator.claim_thread(run.thread_id);
        tokio::pin!(claiming);
        let claimed = tokio::select! {
            claimed = &mut claiming => claimed,
            driven = &mut driving => {
                // A claim started is finished, never dropped mid-statement (its lock
                // could stay behind on a pooled connection), and held like any other.
                return Driven { claim: claiming.await.ok(), ..driven };
            }
        };
        match claimed {
            Ok(claim) => Driven {
                claim: Some(claim),
                ..driving.await
            },
            Err(error) => {
                cancel.cancel();
                let error = RunError::new("ExecutionClaimError", error.chain());
                Driven {
                    ending: Ending::Failed(Failure::of(error)),
                    ..driving.await
                }
            }
        }
    }

    async fn drive(
        &self,
        run: &Run,
        options: &RunOptions,
        cancel: CancellationToken,
        final_state: FinalState,
    ) -> Driven {
        let graph_id = options.graph_id().unwrap_or_default();
        let graph = match self.graphs.load(graph_id).await {
            Ok(graph) => graph,
            Err(error) => return Driven::failed(Failure::of_graph(error, graph_id)),
        };
        let mut activity = self.observers.logs_activity().then(|| {
            crate::telemetry::run_started(run, graph_id);
            Activity::default()
        });
        let ended = |ending, reply, frames| Driven {
            ending,
            graph: Some(Arc::clone(&graph)),
            reply,
            frames,
            claim: None,
        };
        let stream_options = options.stream_options();
        let input = RunInput::from_request(options.input.clone(), options.command.clone());
        let mut ctx = RunContext::new(cancel.clone()).with_store(Arc::clone(&self.long_term));
        ctx.final_state = final_state;
        let started = if options.stream_mode.contains(&StreamMode::Events) {
            match graph
                .stream_events(input.clone(), stream_options.clone(), ctx.clone())
                .await
            {
                Err(GraphError::CapabilityMissing { .. }) => {
                    graph.stream(input, stream_options, ctx).await
                }
                other => other,
            }
        } else {
            graph.stream(input, stream_options, ctx).await
        };
        let mut chunks = match started {
            Ok(chunks) => chunks,
            Err(error) => return ended(ending_of(error, &cancel, graph_id), None, 0),
        };
        let mut messages = MessageAccumulator::default();
        let mut reply = None;
        let captures_reply = options.stream_mode.contains(&StreamMode::Custom);
        // The frames of the chunks the graph has ready at once go to the bus in one
        // call, made when it has no more ready (or enough piled up).
        let mut ready = Vec::new();
        let mut published = 0;
        let consume = async {
            let outcome = loop {
                let next = match chunks.next().now_or_never() {
                    Some(next) if ready.len() < READY_FRAMES => next,
                    polled => {
                        published += ready.len();
                        self.frames
                            .publish_frames(run, std::mem::take(&mut ready))
                            .await;
                        match polled {
                            Some(next) => next,
                            None => chunks.next().await,
                        }
                    }
                };
                let Some(item) = next else {
                    break Ok(());
                };
                let chunk = match item {
                    Ok(chunk) => chunk,
                    Err(error) => break Err(ending_of(error, &cancel, graph_id)),
                };
                if let Some(activity) = &mut activity {
                    activity.observe(run, &chunk);
                }
                if captures_reply && let Some(declared) = reply_declaration(&chunk) {
                    reply = Some(declared);
                }
                if let Err(error) = chunk_frames(options, &chunk, &mut messages, &mut ready) {
                    break Err(Ending::Failed(Failure::of(error.to_run_error())));
                }
            };
            published += ready.len();
            self.frames
                .publish_frames(run, std::mem::take(&mut ready))
                .await;
            outcome
        };
        let deadline = sleep_or_forever(self.run_timeout);
        let ending = tokio::select! {
            result = consume => match result {
                Ok(()) if cancel.is_cancelled() => Ending::Cancelled,
                Ok(()) => Ending::Completed,
                Err(ending) => ending,
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
        // Frames the graph had made before a cancel or timeout cut the loop short.
        published += ready.len();
        self.frames.publish_frames(run, ready).await;
        ended(ending, reply, published)
    }

    /// Resolves when the store holds a cancel for this run recorded by another
    /// instance: the fallback for an announcement of it that was lost (one that
    /// arrives reaches the run's token at once). Never in-process, where cancels
    /// reach the run's token directly.
    async fn cancelled_elsewhere(&self, run_id: uuid::Uuid) {
        let Some(interval) = self.coordinator.tuning().map(|t| t.check_interval) else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(interval).await;
            if self
                .store
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

/// The reply a custom chunk declares: `{"reply": ...}` written to the custom stream.
fn reply_declaration(chunk: &Chunk) -> Option<Value> {
    if chunk.mode() != "custom" || !chunk.namespace().is_empty() {
        return None;
    }
    chunk.data().get("reply").cloned()
}

/// A graph error as the run's ending: a cancel, however the graph reports it, is one.
fn ending_of(error: GraphError, cancel: &CancellationToken, graph_id: &str) -> Ending {
    if matches!(error, GraphError::Cancelled) || cancel.is_cancelled() {
        Ending::Cancelled
    } else {
        Ending::Failed(Failure::of_graph(error, graph_id))
    }
}

/// Sleeps for `duration`, or forever when there is none.
pub(crate) async fn sleep_or_forever(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}
