//! The [`Checkpointer`] trait: where a runtime keeps per-thread checkpoints, and what
//! the service needs from it for thread copy, prune and rollback.
//!
//! Checkpoint bodies and metadata are JSON so a database saver can store them as
//! JSONB. A body to store arrives as text ([`JsonText`]): the runtime serialises its
//! state once, straight from its own types, and every saver keeps or sends text. Checkpoint ids increase monotonically ([`new_checkpoint_id`]), so "newest
//! first" and `before` are plain id comparisons.

#[cfg(feature = "testing")]
mod hooked;
mod id;
mod memory;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use service_types::{JsonText, Metadata, PruneStrategy, Timestamp};

use crate::{CheckpointConfig, GraphError};

#[cfg(feature = "testing")]
pub use hooked::{HookedSaver, SaverHooks};
pub use id::new_checkpoint_id;
pub use memory::InMemorySaver;

/// A write a task made against a checkpoint before the next one was written: a
/// finished task's output, an interrupt, an error, resume values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// What kind of write (runtime-defined channel name).
    pub channel: String,
    /// The written value.
    pub value: Value,
}

/// A stored checkpoint with its coordinates, parent, metadata and pending writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointTuple {
    /// This checkpoint (id always set).
    pub config: CheckpointConfig,
    /// The checkpoint it was written after, if any.
    pub parent_config: Option<CheckpointConfig>,
    /// The runtime-defined checkpoint body.
    pub checkpoint: Value,
    /// Checkpoint metadata (`source`, `step`, `writes`, run keys, ...).
    pub metadata: Metadata,
    /// When it was written.
    pub created_at: Timestamp,
    /// Writes made against it, in write order.
    pub pending_writes: Vec<PendingWrite>,
}

impl CheckpointTuple {
    /// The checkpoint id.
    pub fn id(&self) -> &str {
        self.config.checkpoint_id.as_deref().unwrap_or_default()
    }
}

/// Options of [`Checkpointer::list`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckpointListOptions {
    /// Only checkpoints whose metadata contains these key/value pairs.
    pub filter: Option<Metadata>,
    /// Only checkpoints with an id lower than this one.
    pub before: Option<String>,
    /// Most checkpoints to return.
    pub limit: Option<usize>,
}

/// A checkpoint to store: its body and metadata (the saver mints its id).
#[derive(Clone, Debug, PartialEq)]
pub struct NewCheckpoint {
    /// The checkpoint body.
    pub checkpoint: JsonText,
    /// Its metadata.
    pub metadata: Metadata,
}

/// The end of one superstep as a runtime that names its checkpoints stores it: its
/// tasks' writes on its parent and the checkpoint that follows, under an id the runtime
/// minted ([`new_checkpoint_id`], so ids sort in write order).
#[derive(Clone, Debug, PartialEq)]
pub struct NamedStep {
    /// Each task's writes, recorded against the step's parent.
    pub task_writes: Vec<(String, Vec<(String, Value)>)>,
    /// The new checkpoint's id.
    pub checkpoint_id: String,
    /// The new checkpoint's body.
    pub checkpoint: JsonText,
    /// Its metadata.
    pub metadata: Metadata,
}

/// Where per-thread checkpoints live (SPEC: getTuple, list, put, putWrites,
/// deleteThread, plus copy, prune and rollback for the service).
#[async_trait]
pub trait Checkpointer: Send + Sync {
    /// The checkpoint `config` names, or the thread's latest when it names none.
    async fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, GraphError>;

    /// Checkpoints of the thread and namespace, newest first; only the named one when
    /// `config` carries a checkpoint id.
    async fn list(
        &self,
        config: &CheckpointConfig,
        options: CheckpointListOptions,
    ) -> Result<Vec<CheckpointTuple>, GraphError>;

    /// Stores a checkpoint after the one `config` names (its parent; none for the
    /// first) and returns the new checkpoint's coordinates. The saver mints the id.
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError>;

    /// Stores a checkpoint under `checkpoint_id`, an id the runtime minted itself, after
    /// the one `config` names, as [`Checkpointer::put`] does otherwise. A runtime that
    /// names its own checkpoints (LangGraph's Python runtime, whose writes refer to
    /// them) stores them so. Its ids must sort in write order, as minted ones do. An id
    /// the thread already has is replaced (body, parent and metadata; its writes stay).
    async fn put_named(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError>;

    /// Records writes of `task_id` against the checkpoint `config` names; a write
    /// replaces an earlier write of the same task and channel.
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
    ) -> Result<(), GraphError>;

    /// Records writes as [`Checkpointer::put_writes`] does, made by the run `run_id`
    /// (when the runtime knows it): a saver that refuses a stopped run's writes (the
    /// engine's) checks it, any other stores them so.
    async fn put_writes_of_run(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
        run_id: Option<&str>,
    ) -> Result<(), GraphError> {
        let _ = run_id;
        self.put_writes(config, task_id, writes).await
    }

    /// The end of a superstep: records each task's writes against the checkpoint
    /// `config` names, as [`Checkpointer::put_writes`] does, then stores the checkpoint
    /// that follows it, as [`Checkpointer::put`] does. A saver that can do both in one
    /// step does: nothing is stored when the parent is unknown (`NotFound`).
    async fn put_after_writes(
        &self,
        config: &CheckpointConfig,
        task_writes: Vec<(String, Vec<(String, Value)>)>,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        for (task_id, writes) in task_writes {
            self.put_writes(config, &task_id, writes).await?;
        }
        self.put(config, checkpoint, metadata).await
    }

    /// Supersteps' ends in order, as [`Checkpointer::put_after_writes`] stores one: the
    /// first step's parent is the checkpoint `config` names, each later step's the step
    /// before it; each step's writes land on its parent. A runtime that writes its
    /// checkpoints behind its run (durability `async`) hands over the steps that queued
    /// up while the previous call was under way, so a saver that can store them all in
    /// one step does. Nothing is stored when the first parent is unknown and the first
    /// step has writes (`NotFound`).
    async fn put_steps(
        &self,
        config: &CheckpointConfig,
        steps: Vec<NamedStep>,
    ) -> Result<(), GraphError> {
        let mut parent = config.clone();
        for step in steps {
            for (task_id, writes) in step.task_writes {
                self.put_writes(&parent, &task_id, writes).await?;
            }
            parent = self
                .put_named(&parent, &step.checkpoint_id, step.checkpoint, step.metadata)
                .await?;
        }
        Ok(())
    }

    /// Merges `metadata` into the metadata of the checkpoint `config` names (its id
    /// must be set): its keys replace the same keys, the others stay. Unknown
    /// checkpoint: `NotFound`.
    async fn merge_metadata(
        &self,
        config: &CheckpointConfig,
        metadata: Metadata,
    ) -> Result<(), GraphError>;

    /// Deletes every checkpoint and write of the thread.
    async fn delete_thread(&self, thread_id: &str) -> Result<(), GraphError>;

    /// Copies every checkpoint and write of `from` to `to` (same ids), replacing
    /// whatever `to` had.
    async fn copy_thread(&self, from: &str, to: &str) -> Result<(), GraphError>;

    /// Prunes a thread: `Delete` removes everything, `KeepLatest` keeps only the
    /// latest checkpoint of each namespace.
    async fn prune(&self, thread_id: &str, strategy: PruneStrategy) -> Result<(), GraphError>;

    /// Rollback of a run: deletes the thread's checkpoints whose `metadata.run_id` is
    /// `run_id`.
    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<(), GraphError>;
}

/// Whether `metadata` contains every key of `filter` with an equal value; the one
/// filter rule every saver applies.
pub fn metadata_matches(metadata: &Metadata, filter: &Metadata) -> bool {
    filter
        .iter()
        .all(|(key, wanted)| metadata.get(key) == Some(wanted))
}
