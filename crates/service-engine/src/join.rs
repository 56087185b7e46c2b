//! Joining a run or a thread from outside: a run's wait/join result, a run's stream
//! (replayed after `Last-Event-ID`), a thread's stream. The HTTP adapter calls these
//! and never the bus or the store.

use futures::StreamExt;
use serde_json::{Value, json};
use service_types::Run;
use uuid::Uuid;

use crate::bus::{Delivery, Replay, Subscription, Topic};
use crate::frames::OUTCOME_EVENT;
use crate::outcome::result_body;
use crate::run_options::RunOptions;
use crate::{Engine, EngineResult};

/// How often a wait whose bus could not be read checks the store for the run's end.
const SETTLED_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// The error a join of an unknown run answers with, as the reference server words it:
/// the `__error__` of a join body, or the data of a stream's one `error` frame.
pub fn run_not_found() -> Value {
    json!({"error": "HTTPException", "name": "HTTPException", "message": "404: Run not found"})
}

/// A run to join.
#[derive(Debug)]
pub enum RunToJoin {
    /// The run's row.
    Run(Box<Run>),
    /// A stateless run whose row went with its thread; its result is still on the bus.
    Forgotten,
    /// No such run (or not on that thread).
    Unknown,
}

/// A run's stream, joined.
pub struct RunStream {
    /// The run, while its row exists (a stateless run's goes with its thread).
    pub run: Option<Run>,
    /// The frames: replayed, then live; `None` when the bus has nothing of the run.
    pub subscription: Option<Subscription>,
    /// Frames carry their ids (the run was created resumable).
    pub resumable: bool,
}

impl std::fmt::Debug for RunStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream")
            .field("run", &self.run)
            .field("subscribed", &self.subscription.is_some())
            .field("resumable", &self.resumable)
            .finish()
    }
}

impl Engine {
    /// Finds a run to join: `thread_id` narrows it to one thread. A run on another
    /// thread is unknown, decided before the bus is asked; a run whose row is gone is
    /// joined from the bus only when no live thread is named (a stateless run's
    /// thread goes with it), since a live thread's runs all have rows.
    pub(crate) async fn run_to_join(&self, thread_id: Option<Uuid>, run_id: Uuid) -> RunToJoin {
        match self.store().runs().get(run_id).await {
            Ok(Some(run)) if thread_id.is_none_or(|thread| run.thread_id == thread) => {
                RunToJoin::Run(Box::new(run))
            }
            Ok(Some(_)) | Err(_) => RunToJoin::Unknown,
            Ok(None) => {
                if let Some(thread_id) = thread_id
                    && !matches!(self.store().threads().get(thread_id).await, Ok(None))
                {
                    return RunToJoin::Unknown;
                }
                if self.inner.bus.is_open(Topic::Run(run_id)).await {
                    RunToJoin::Forgotten
                } else {
                    RunToJoin::Unknown
                }
            }
        }
    }

    /// Joins a run's stream from `replay`; `None` for an unknown run (as
    /// [`run_to_join`](Self::run_to_join) finds it). An active run's topic is opened
    /// if it is not yet, so a join that comes before the run's first frame still sees
    /// every frame.
    pub(crate) async fn join_run_stream(
        &self,
        thread_id: Option<Uuid>,
        run_id: Uuid,
        replay: Replay,
    ) -> Option<RunStream> {
        let topic = Topic::Run(run_id);
        let bus = &self.inner.bus;
        let run = match self.run_to_join(thread_id, run_id).await {
            RunToJoin::Run(run) => Some(*run),
            RunToJoin::Forgotten => None,
            RunToJoin::Unknown => return None,
        };
        let active = run.as_ref().is_some_and(|run| !run.status.is_terminal());
        let mut subscription = bus.subscribe(topic, replay).await;
        if subscription.is_none() && active {
            bus.open(topic).await;
            subscription = bus
                .subscribe(topic, replay)
                .await
                .or_else(|| Some(crate::bus::unavailable()));
        }
        let subscription =
            subscription.map(|subscription| self.ending_with_run(run_id, subscription));
        // A run whose options do not decode fails when it executes; its frames are
        // then sent without ids, as for any run not created resumable.
        let resumable = run
            .as_ref()
            .and_then(|run| RunOptions::decode(run).ok())
            .is_some_and(|options| options.resumable);
        Some(RunStream {
            run,
            subscription,
            resumable,
        })
    }

    /// Joins a thread's stream from `replay`: the frames of every run on the thread,
    /// run-done markers and state updates.
    pub(crate) async fn join_thread_stream(
        &self,
        thread_id: Uuid,
        replay: Replay,
    ) -> EngineResult<Option<Subscription>> {
        self.get_thread(thread_id).await?;
        let topic = Topic::Thread(thread_id);
        self.inner.bus.open(topic).await;
        Ok(self.inner.bus.subscribe(topic, replay).await)
    }

    /// Waits until the run ends and returns its wait/join body: the final values (with
    /// `__interrupt__` when it paused), `{"__error__": RunError}` when it failed, or the
    /// thread's current values when it was cancelled.
    pub(crate) async fn run_result(&self, run_id: Uuid) -> Value {
        self.run_result_from(run_id, None).await
    }

    /// [`run_result`](Self::run_result), reading `subscription` (taken at the run's
    /// creation, see [`create_run_watched`](Self::create_run_watched)) first.
    pub(crate) async fn run_result_from(
        &self,
        run_id: Uuid,
        subscription: Option<Subscription>,
    ) -> Value {
        let topic = Topic::Run(run_id);
        let mut last_seen = None;
        let mut taken = subscription;
        'subscribe: loop {
            let replay = last_seen.map_or(Replay::All, Replay::After);
            let subscription = match taken.take() {
                Some(subscription) => Some(subscription),
                None => self
                    .inner
                    .bus
                    .subscribe(topic, replay)
                    .await
                    .map(|subscription| self.ending_with_run(run_id, subscription)),
            };
            let Some(mut subscription) = subscription else {
                break;
            };
            let mut outcome = None;
            while let Some(delivery) = subscription.next().await {
                match delivery {
                    Delivery::Frame(frame) => {
                        last_seen = Some(frame.id);
                        if frame.event == OUTCOME_EVENT {
                            outcome = serde_json::from_slice(&frame.data).ok();
                        }
                    }
                    Delivery::Lagged | Delivery::Unavailable => continue 'subscribe,
                }
            }
            if let Some(outcome) = outcome {
                return outcome;
            }
            break;
        }
        self.settled_in_store(run_id).await;
        self.stored_result(run_id).await
    }

    /// Returns once the store has the run terminal (or gone). The bus may have ended
    /// without the run's outcome because it could not be read (a durable bus whose
    /// backend is down) while the run goes on: its answer is then read from the store,
    /// once it has settled there.
    async fn settled_in_store(&self, run_id: Uuid) {
        loop {
            match self.store().runs().get(run_id).await {
                Ok(Some(run)) if !run.status.is_terminal() => {}
                Ok(_) => return,
                Err(error) => tracing::warn!(%run_id, %error, "reading a waited run failed"),
            }
            tokio::time::sleep(SETTLED_POLL).await;
        }
    }

    /// `subscription` to a run's topic, ended once the run has settled on another
    /// instance: this instance's bus gets none of that run's frames, so without this a
    /// wait or stream here would never end. Settled means terminal at two checks a
    /// coordinator check interval apart, so a run settling here has published its last
    /// frames first. One process never checks.
    pub(crate) fn ending_with_run(&self, run_id: Uuid, subscription: Subscription) -> Subscription {
        let Some(period) = self.inner.coordinator.tuning().map(|t| t.check_interval) else {
            return subscription;
        };
        // The first check one period in, not at once: nearly every wait and stream
        // joins a run that is still active, and an immediate check would cost each of
        // them a store read. A run that had already settled elsewhere ends a period
        // later than it would have.
        let mut checks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let state = (subscription, self.clone(), checks, 0_u8);
        futures::stream::unfold(state, move |(mut subscription, engine, mut checks, mut settled)| async move {
            loop {
                tokio::select! {
                    delivery = subscription.next() => {
                        return delivery.map(|delivery| (delivery, (subscription, engine, checks, settled)));
                    }
                    _ = checks.tick() => {
                        let terminal = match engine.store().runs().get(run_id).await {
                            Ok(Some(run)) => run.status.is_terminal(),
                            Ok(None) => true,
                            Err(_) => false,
                        };
                        settled = if terminal { settled + 1 } else { 0 };
                        if settled >= 2 {
                            return None;
                        }
                    }
                }
            }
        })
        .boxed()
    }

    /// The wait body rebuilt from the store, when the bus no longer has the run.
    async fn stored_result(&self, run_id: Uuid) -> Value {
        let Ok(Some(run)) = self.store().runs().get(run_id).await else {
            return json!({ "__error__": run_not_found() });
        };
        if let Some(error) = run.error {
            return json!({ "__error__": self.inner.frames.client_error(&error) });
        }
        match self.store().threads().get(run.thread_id).await {
            Ok(Some(thread)) => result_body(thread.values, &thread.interrupts),
            _ => json!({}),
        }
    }
}
