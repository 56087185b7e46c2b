//! Threads as a caller sees them.

use serde_json::Value;
use service_types::{
    Checkpoint, HistoryQuery, Metadata, PruneStrategy, Thread, ThreadCreate, ThreadPatch,
    ThreadSearch, ThreadState, ThreadStateUpdate,
};
use uuid::Uuid;

use super::View;
use crate::bus::{Replay, Subscription};
use crate::threads::thread_not_found;
use crate::{EngineResult, ThreadSearchPage};

/// Threads, their state and history, and thread streams, within the caller's scope.
#[derive(Clone, Copy, Debug)]
pub struct Threads<'a>(View<'a>);

impl<'a> Threads<'a> {
    pub(super) fn new(view: View<'a>) -> Self {
        Self(view)
    }

    /// Creates a thread stamped with the caller's scope (`supersteps` applied through
    /// its graph); an existing thread of another owner is a conflict.
    pub async fn create(self, body: ThreadCreate) -> EngineResult<Thread> {
        self.0
            .engine
            .create_thread(body, self.0.caller.scope())
            .await
    }

    /// Reads a thread.
    pub async fn get(self, thread_id: Uuid) -> EngineResult<Thread> {
        let thread = self.0.engine.get_thread(thread_id).await?;
        if self.0.caller.scope().admits(&thread.metadata) {
            Ok(thread)
        } else {
            Err(thread_not_found(thread_id))
        }
    }

    /// Merges metadata (keeping the scope's stamp) and changes the ttl.
    pub async fn update(self, thread_id: Uuid, mut body: ThreadPatch) -> EngineResult<Thread> {
        self.0.thread(thread_id).await?;
        if body.metadata.is_some() {
            self.0.caller.scope().stamp_option(&mut body.metadata);
        }
        self.0.engine.patch_thread(thread_id, body).await
    }

    /// Deletes a thread with its runs, checkpoints and thread crons.
    pub async fn delete(self, thread_id: Uuid) -> EngineResult<()> {
        self.0.thread(thread_id).await?;
        self.0.engine.delete_thread(thread_id).await
    }

    /// One page of the caller's threads.
    pub async fn search(self, body: ThreadSearch) -> EngineResult<ThreadSearchPage> {
        let enforced = self.0.caller.scope().enforced();
        self.0.engine.search_threads(body, enforced).await
    }

    /// Counts the caller's threads.
    pub async fn count(self, body: ThreadSearch) -> EngineResult<u64> {
        let enforced = self.0.caller.scope().enforced();
        self.0.engine.count_threads(body, enforced).await
    }

    /// Copies a thread with its checkpoints (the copy keeps its owner's stamp).
    pub async fn copy(self, thread_id: Uuid) -> EngineResult<Thread> {
        self.0.thread(thread_id).await?;
        self.0.engine.copy_thread(thread_id).await
    }

    /// Prunes threads, every one of them checked first.
    pub async fn prune(self, ids: Vec<Uuid>, strategy: PruneStrategy) -> EngineResult<u64> {
        for thread_id in &ids {
            self.0.thread(*thread_id).await?;
        }
        self.0.engine.prune_threads(ids, strategy).await
    }

    /// The thread's state, at a checkpoint when given.
    pub async fn state(
        self,
        thread_id: Uuid,
        checkpoint: Option<Checkpoint>,
        subgraphs: bool,
    ) -> EngineResult<ThreadState> {
        self.0.thread(thread_id).await?;
        self.0
            .engine
            .thread_state(thread_id, checkpoint, subgraphs)
            .await
    }

    /// Writes the thread's state through its graph.
    pub async fn update_state(
        self,
        thread_id: Uuid,
        body: ThreadStateUpdate,
    ) -> EngineResult<Value> {
        self.0.thread(thread_id).await?;
        self.0.engine.update_thread_state(thread_id, body).await
    }

    /// Merges metadata into the thread's latest checkpoint.
    pub async fn patch_state(self, thread_id: Uuid, metadata: Metadata) -> EngineResult<()> {
        self.0.thread(thread_id).await?;
        self.0.engine.patch_thread_state(thread_id, metadata).await
    }

    /// The thread's checkpoints, newest first.
    pub async fn history(
        self,
        thread_id: Uuid,
        query: HistoryQuery,
    ) -> EngineResult<Vec<ThreadState>> {
        self.0.thread(thread_id).await?;
        self.0.engine.thread_history(thread_id, query).await
    }

    /// The thread's stream from `replay`.
    pub async fn join_stream(
        self,
        thread_id: Uuid,
        replay: Replay,
    ) -> EngineResult<Option<Subscription>> {
        self.0.thread(thread_id).await?;
        self.0.engine.join_thread_stream(thread_id, replay).await
    }
}
