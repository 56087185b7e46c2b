//! Runs as a caller sees them.

use serde_json::Value;
use service_types::{BulkCancel, CancelAction, Run, RunCreate, RunStatus};
use uuid::Uuid;

use super::View;
use crate::bus::{Replay, Subscription};
use crate::cancel_cause::CancelCause;
use crate::{EngineResult, RunStream, RunTarget, RunToJoin};

/// Runs, within the caller's scope: a run on a thread is reached through that thread,
/// a stateless run through its own stamp.
#[derive(Clone, Copy, Debug)]
pub struct Runs<'a>(View<'a>);

impl<'a> Runs<'a> {
    pub(super) fn new(view: View<'a>) -> Self {
        Self(view)
    }

    /// The run's thread (named in the path) or, for a stateless run, the run itself
    /// must be within the caller's scope.
    async fn check(self, thread_id: Option<Uuid>, run_id: Uuid) -> EngineResult<()> {
        match thread_id {
            Some(thread_id) => self.0.thread(thread_id).await,
            None => {
                self.0
                    .engine
                    .run_within(run_id, self.0.caller.scope())
                    .await
            }
        }
    }

    /// Creates a run of an assistant the caller may read, on a thread within its
    /// scope (or a new one, stamped).
    pub async fn create(self, target: RunTarget, body: RunCreate) -> EngineResult<Run> {
        self.0.engine.create_run(self.0.caller, target, body).await
    }

    /// [`create`](Self::create), subscribed to the run's frames from before it can be
    /// claimed (for a stream or a wait).
    pub async fn create_watched(
        self,
        target: RunTarget,
        body: RunCreate,
    ) -> EngineResult<(Run, Watched)> {
        let (run, subscription) = self
            .0
            .engine
            .create_run_watched(self.0.caller, target, body)
            .await?;
        let watched = Watched {
            run_id: run.run_id,
            subscription,
        };
        Ok((run, watched))
    }

    /// Waits until a run [`create_watched`](Self::create_watched) made ends, and
    /// returns its wait body. Nothing to check: only its creator holds the watch.
    pub async fn wait(self, watched: Watched) -> Value {
        self.0
            .engine
            .run_result_from(watched.run_id, Some(watched.subscription))
            .await
    }

    /// Reads a run of a thread.
    pub async fn get(self, thread_id: Uuid, run_id: Uuid) -> EngineResult<Run> {
        self.check(Some(thread_id), run_id).await?;
        self.0.engine.get_run(Some(thread_id), run_id).await
    }

    /// A thread's runs, newest first.
    pub async fn list(
        self,
        thread_id: Uuid,
        limit: Option<i64>,
        offset: Option<i64>,
        status: Option<RunStatus>,
    ) -> EngineResult<Vec<Run>> {
        self.0.thread(thread_id).await?;
        self.0
            .engine
            .list_runs(thread_id, limit, offset, status)
            .await
    }

    /// Deletes a run of a thread (cancelling it first when it is running).
    pub async fn delete(self, thread_id: Uuid, run_id: Uuid) -> EngineResult<()> {
        self.check(Some(thread_id), run_id).await?;
        self.0.engine.delete_run(thread_id, run_id).await
    }

    /// Cancels a run of a thread, as `POST /threads/{thread_id}/runs/{run_id}/cancel`
    /// asks (its `cancel_reason` names that route).
    pub async fn cancel(
        self,
        thread_id: Uuid,
        run_id: Uuid,
        action: CancelAction,
    ) -> EngineResult<Run> {
        self.check(Some(thread_id), run_id).await?;
        let cause = CancelCause::Requested(action);
        self.0
            .engine
            .cancel_run(thread_id, run_id, action, cause)
            .await
    }

    /// Interrupts a run of a thread whose client went away (`on_disconnect: cancel`).
    pub async fn cancel_on_disconnect(self, thread_id: Uuid, run_id: Uuid) -> EngineResult<Run> {
        self.check(Some(thread_id), run_id).await?;
        let (action, cause) = (CancelAction::Interrupt, CancelCause::Disconnected);
        self.0
            .engine
            .cancel_run(thread_id, run_id, action, cause)
            .await
    }

    /// Cancels the caller's runs a bulk-cancel body selects.
    pub async fn cancel_many(self, body: BulkCancel, action: CancelAction) -> EngineResult<usize> {
        let scope = self.0.caller.scope();
        self.0.engine.cancel_runs(body, action, scope).await
    }

    /// A run to join, on the thread named or stateless. A run that is not on the named
    /// thread is unknown.
    pub async fn join(self, thread_id: Option<Uuid>, run_id: Uuid) -> EngineResult<RunToJoin> {
        self.check(thread_id, run_id).await?;
        Ok(self.0.engine.run_to_join(thread_id, run_id).await)
    }

    /// A run's stream from `replay`; `None` for a run unknown there.
    pub async fn join_stream(
        self,
        thread_id: Option<Uuid>,
        run_id: Uuid,
        replay: Replay,
    ) -> EngineResult<Option<RunStream>> {
        self.check(thread_id, run_id).await?;
        Ok(self
            .0
            .engine
            .join_run_stream(thread_id, run_id, replay)
            .await)
    }

    /// Waits until the run ends and returns its wait/join body. The run must be within
    /// the caller's scope (its own stamp says so, also for a run whose thread is gone);
    /// a run joined as [`RunToJoin::Forgotten`] is answered from what its topic still
    /// holds.
    pub async fn result(self, run_id: Uuid) -> EngineResult<Value> {
        self.check(None, run_id).await?;
        Ok(self.0.engine.run_result_from(run_id, None).await)
    }
}

/// A run created for a stream or a wait, subscribed to its frames from before it could
/// be claimed, so none is missed.
pub struct Watched {
    run_id: Uuid,
    subscription: Subscription,
}

impl Watched {
    /// The run's frames, for a stream.
    pub fn into_frames(self) -> Subscription {
        self.subscription
    }
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}
