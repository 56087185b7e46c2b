//! For tests (feature `testing`): the in-memory saver with a hook before or after the
//! calls a test watches or holds back. Every call goes on to the saver; one forwarding
//! `Checkpointer` serves every such test, in every crate.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use service_types::{JsonText, Metadata, PruneStrategy};

use super::{CheckpointListOptions, CheckpointTuple, Checkpointer, InMemorySaver, NamedStep};
use crate::{CheckpointConfig, GraphError};

/// What a test is shown of the saver's calls, or holds them with.
#[async_trait]
pub trait SaverHooks: Send + Sync + 'static {
    /// A read of `thread_id`'s latest checkpoint, and whether it found one.
    fn latest_read(&self, _thread_id: &str, _found: bool) {}

    /// Before a `put`.
    async fn putting(&self) {}

    /// Before a `put_steps` of `steps` supersteps; an error fails the call, which then
    /// stores nothing.
    async fn putting_steps(&self, _steps: usize) -> Result<(), GraphError> {
        Ok(())
    }

    /// Before a run's checkpoints are deleted.
    async fn deleting_run(&self, _thread_id: &str, _run_id: &str) {}
}

/// The in-memory saver behind `hooks`.
#[derive(Debug, Default)]
pub struct HookedSaver<H> {
    pub saver: Arc<InMemorySaver>,
    pub hooks: H,
}

impl<H> HookedSaver<H> {
    /// A new, empty saver behind `hooks`.
    pub fn new(hooks: H) -> Self {
        Self {
            saver: Arc::default(),
            hooks,
        }
    }
}

#[async_trait]
impl<H: SaverHooks> Checkpointer for HookedSaver<H> {
    async fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, GraphError> {
        let tuple = self.saver.get_tuple(config).await?;
        if config.checkpoint_id.is_none() {
            self.hooks.latest_read(&config.thread_id, tuple.is_some());
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
        self.hooks.putting().await;
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

    async fn put_steps(
        &self,
        config: &CheckpointConfig,
        steps: Vec<NamedStep>,
    ) -> Result<(), GraphError> {
        self.hooks.putting_steps(steps.len()).await?;
        self.saver.put_steps(config, steps).await
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
        self.hooks.deleting_run(thread_id, run_id).await;
        self.saver.delete_run(thread_id, run_id).await
    }
}
