//! An in-memory saver whose calls a test watches: every call goes to the saver, and
//! the ones a test asks about are shown to its [`SaverWatch`] (one forwarding
//! `Checkpointer` for all such tests, not one per test).

use async_trait::async_trait;
use service_graph::{CheckpointConfig, CheckpointListOptions, CheckpointTuple, GraphError};
use service_types::{Metadata, PruneStrategy};

use crate::support::*;

/// What a test is shown of the saver's calls.
#[async_trait]
pub(crate) trait SaverWatch: Send + Sync + 'static {
    /// A read of `thread_id`'s latest checkpoint, and whether it found one.
    fn latest_read(&self, _thread_id: &str, _found: bool) {}

    /// A run's checkpoints are about to be deleted.
    async fn deleting_run(&self, _thread_id: &str, _run_id: &str) {}
}

/// An in-memory saver watched by `watch`.
#[derive(Default)]
pub(crate) struct Watched<W> {
    pub(crate) saver: Arc<InMemorySaver>,
    pub(crate) watch: W,
}

#[async_trait]
impl<W: SaverWatch> Checkpointer for Watched<W> {
    async fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, GraphError> {
        let tuple = self.saver.get_tuple(config).await?;
        if config.checkpoint_id.is_none() {
            self.watch.latest_read(&config.thread_id, tuple.is_some());
        }
        Ok(tuple)
    }
    async fn list(
        &self,
        config: &CheckpointConfig,
        options: CheckpointListOptions,
    ) -> Result<Vec<CheckpointTuple>, GraphError> {
        self.saver.list(config, options).await
    }
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        self.saver.put(config, checkpoint, metadata).await
    }
    async fn put_named(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        self.saver
            .put_named(config, checkpoint_id, checkpoint, metadata)
            .await
    }
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
    ) -> Result<(), GraphError> {
        self.saver.put_writes(config, task_id, writes).await
    }
    async fn merge_metadata(
        &self,
        config: &CheckpointConfig,
        metadata: Metadata,
    ) -> Result<(), GraphError> {
        self.saver.merge_metadata(config, metadata).await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<(), GraphError> {
        self.saver.delete_thread(thread_id).await
    }
    async fn copy_thread(&self, from: &str, to: &str) -> Result<(), GraphError> {
        self.saver.copy_thread(from, to).await
    }
    async fn prune(&self, thread_id: &str, strategy: PruneStrategy) -> Result<(), GraphError> {
        self.saver.prune(thread_id, strategy).await
    }
    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<(), GraphError> {
        self.watch.deleting_run(thread_id, run_id).await;
        self.saver.delete_run(thread_id, run_id).await
    }
}
