//! Protocol v2's thread commands and event streams as a caller sees them.

use serde_json::Value;
use service_types::{InputRespondParams, Run, RunStartParams};
use uuid::Uuid;

use super::View;
use crate::EngineResult;
use crate::protocol::{ProtocolFailure, ThreadEvents};

/// Protocol v2 on threads within the caller's scope. A command that starts a run
/// creates it as the run routes do (the assistant must be readable by the caller).
#[derive(Clone, Copy, Debug)]
pub struct Protocol<'a>(View<'a>);

impl<'a> Protocol<'a> {
    pub(super) fn new(view: View<'a>) -> Self {
        Self(view)
    }

    /// The thread's protocol events, numbered from 1 for this connection.
    pub async fn events(self, thread_id: Uuid) -> EngineResult<ThreadEvents> {
        self.0.thread(thread_id).await?;
        self.0.engine.thread_events(thread_id).await
    }

    /// `run.start` on the thread (made for it, stamped, when it does not exist).
    pub async fn start_run(
        self,
        thread_id: Uuid,
        params: RunStartParams,
    ) -> Result<Run, ProtocolFailure> {
        self.0
            .engine
            .start_thread_run(thread_id, params, self.0.caller)
            .await
    }

    /// `input.respond`: resumes the thread's paused run.
    pub async fn respond(
        self,
        thread_id: Uuid,
        params: InputRespondParams,
    ) -> Result<Run, ProtocolFailure> {
        self.0.thread(thread_id).await?;
        self.0
            .engine
            .respond_on_thread(thread_id, params, self.0.caller)
            .await
    }

    /// `agent.getTree`: the run's graph and the subgraphs it is paused in.
    pub async fn agent_tree(
        self,
        thread_id: Uuid,
        run_id: Option<Uuid>,
    ) -> Result<Value, ProtocolFailure> {
        self.0.thread(thread_id).await?;
        self.0.engine.agent_tree(thread_id, run_id).await
    }
}
