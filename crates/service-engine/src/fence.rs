//! Run fencing: the saver the engine hands its graphs refuses the checkpoints of runs
//! that were stopped. A graph may outlive its run's cancel (a Python node sleeping in a
//! thread finishes long after its task was cancelled); what it stores then would
//! otherwise land after a rollback deleted the run's checkpoints, or on a thread that
//! a later run already moved on. Checkpoints and metadata merges name their run
//! (`metadata.run_id`), and a runtime names the run of its pending writes
//! ([`Checkpointer::put_writes_of_run`]; the bridges send their run's id), so the fence
//! works for every graph kind and every saver. The native runtime's plain `put_writes`
//! name no run: its tasks stop with their run, so it has no late writes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::Value;
use service_graph::{
    CheckpointConfig, CheckpointListOptions, CheckpointTuple, Checkpointer, GraphError, NamedStep,
};
use service_types::{JsonText, Metadata, PruneStrategy};
use tokio::sync::Notify;

/// How many stopped runs stay fenced: a run's late write comes within its node's
/// lifetime, long before this many later runs were stopped on one instance.
const FENCED_RUNS: usize = 10_000;

/// The runs whose writes are refused, and the writes under way per run (a fence waits
/// for those, so nothing a run began before its fence lands after it).
#[derive(Default)]
pub(crate) struct Fences {
    state: Mutex<FenceState>,
    writes_done: Notify,
}

#[derive(Default)]
struct FenceState {
    fenced: HashSet<String>,
    /// `fenced` in fencing order, to forget the oldest past [`FENCED_RUNS`].
    order: VecDeque<String>,
    writing: HashMap<String, usize>,
}

impl Fences {
    fn lock(&self) -> MutexGuard<'_, FenceState> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Refuses every later write of `run_id` and returns once the ones under way have
    /// landed, so a rollback that deletes the run's checkpoints next deletes them all.
    pub(crate) async fn fence(&self, run_id: &str) {
        {
            let mut state = self.lock();
            if state.fenced.insert(run_id.to_owned()) {
                state.order.push_back(run_id.to_owned());
                while state.order.len() > FENCED_RUNS {
                    if let Some(oldest) = state.order.pop_front() {
                        state.fenced.remove(&oldest);
                    }
                }
            }
        }
        loop {
            let done = self.writes_done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !self.lock().writing.contains_key(run_id) {
                return;
            }
            done.await;
        }
    }

    /// Counts a write of the run `metadata` names, or refuses it when the run is fenced.
    fn begin(self: &Arc<Self>, metadata: &Metadata) -> Result<Option<Writing>, GraphError> {
        self.begin_run(metadata.get("run_id").and_then(Value::as_str))
    }

    /// Counts a write of `run_id`, or refuses it when the run is fenced.
    fn begin_run(self: &Arc<Self>, run_id: Option<&str>) -> Result<Option<Writing>, GraphError> {
        let Some(run_id) = run_id else {
            return Ok(None);
        };
        let mut state = self.lock();
        if state.fenced.contains(run_id) {
            tracing::debug!(run_id, "a stopped run's write was refused");
            return Err(GraphError::Cancelled);
        }
        *state.writing.entry(run_id.to_owned()).or_default() += 1;
        Ok(Some(Writing {
            fences: Arc::clone(self),
            run_id: run_id.to_owned(),
        }))
    }
}

/// A write under way; dropping it (the write landed or failed) may release a fence.
struct Writing {
    fences: Arc<Fences>,
    run_id: String,
}

impl Drop for Writing {
    fn drop(&mut self) {
        let mut state = self.fences.lock();
        if let Some(count) = state.writing.get_mut(&self.run_id) {
            *count -= 1;
            if *count == 0 {
                state.writing.remove(&self.run_id);
                drop(state);
                self.fences.writes_done.notify_waiters();
            }
        }
    }
}

/// The engine's saver as its graphs see it: every call goes through, but a checkpoint
/// of a fenced run is refused (`Cancelled`).
pub(crate) struct FencedSaver {
    pub(crate) inner: Arc<dyn Checkpointer>,
    pub(crate) fences: Arc<Fences>,
}

#[async_trait]
impl Checkpointer for FencedSaver {
    async fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, GraphError> {
        self.inner.get_tuple(config).await
    }

    async fn list(
        &self,
        config: &CheckpointConfig,
        options: CheckpointListOptions,
    ) -> Result<Vec<CheckpointTuple>, GraphError> {
        self.inner.list(config, options).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        let _writing = self.fences.begin(&metadata)?;
        self.inner.put(config, checkpoint, metadata).await
    }

    async fn put_named(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        let _writing = self.fences.begin(&metadata)?;
        self.inner
            .put_named(config, checkpoint_id, checkpoint, metadata)
            .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
    ) -> Result<(), GraphError> {
        self.inner.put_writes(config, task_id, writes).await
    }

    async fn put_writes_of_run(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
        run_id: Option<&str>,
    ) -> Result<(), GraphError> {
        let _writing = self.fences.begin_run(run_id)?;
        self.inner.put_writes(config, task_id, writes).await
    }

    async fn put_after_writes(
        &self,
        config: &CheckpointConfig,
        task_writes: Vec<(String, Vec<(String, Value)>)>,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        let _writing = self.fences.begin(&metadata)?;
        self.inner
            .put_after_writes(config, task_writes, checkpoint, metadata)
            .await
    }

    async fn put_steps(
        &self,
        config: &CheckpointConfig,
        steps: Vec<NamedStep>,
    ) -> Result<(), GraphError> {
        let _writing = steps
            .iter()
            .map(|step| self.fences.begin(&step.metadata))
            .collect::<Result<Vec<_>, _>>()?;
        self.inner.put_steps(config, steps).await
    }

    async fn merge_metadata(
        &self,
        config: &CheckpointConfig,
        metadata: Metadata,
    ) -> Result<(), GraphError> {
        let _writing = self.fences.begin(&metadata)?;
        self.inner.merge_metadata(config, metadata).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), GraphError> {
        self.inner.delete_thread(thread_id).await
    }

    async fn copy_thread(&self, from: &str, to: &str) -> Result<(), GraphError> {
        self.inner.copy_thread(from, to).await
    }

    async fn prune(&self, thread_id: &str, strategy: PruneStrategy) -> Result<(), GraphError> {
        self.inner.prune(thread_id, strategy).await
    }

    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<(), GraphError> {
        self.inner.delete_run(thread_id, run_id).await
    }
}

#[cfg(test)]
mod tests {
    use service_graph::InMemorySaver;
    use service_graph::checkpoint::{HookedSaver, SaverHooks};
    use tokio::sync::Semaphore;

    use super::*;

    /// Holds each `put` until the test hands out a permit: a write held under way.
    struct Gate(Semaphore);

    #[async_trait]
    impl SaverHooks for Gate {
        async fn putting(&self) {
            let _permit = self.0.acquire().await.expect("open");
        }
    }

    fn of_run(run_id: &str) -> Metadata {
        let mut metadata = Metadata::new();
        metadata.insert("run_id".into(), Value::String(run_id.into()));
        metadata
    }

    #[tokio::test]
    async fn a_fence_waits_for_the_runs_write_under_way_and_refuses_the_next() {
        let held = Arc::new(HookedSaver::new(Gate(Semaphore::new(0))));
        let fences = Arc::new(Fences::default());
        let saver = Arc::new(FencedSaver {
            inner: Arc::clone(&held) as Arc<dyn Checkpointer>,
            fences: Arc::clone(&fences),
        });
        let thread = CheckpointConfig::new("t", None);
        let under_way = tokio::spawn({
            let (saver, thread) = (Arc::clone(&saver), thread.clone());
            async move {
                saver
                    .put(&thread, JsonText::new(&Value::Null), of_run("r1"))
                    .await
            }
        });
        // The write has begun (counted) before the fence is raised.
        while !fences.lock().writing.contains_key("r1") {
            tokio::task::yield_now().await;
        }
        let fence = tokio::spawn({
            let fences = Arc::clone(&fences);
            async move { fences.fence("r1").await }
        });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(
            !fence.is_finished(),
            "the fence waits for the write under way"
        );
        held.hooks.0.add_permits(10);
        fence.await.expect("fenced");
        under_way
            .await
            .expect("joined")
            .expect("the earlier write landed");
        let late = saver
            .put(&thread, JsonText::new(&Value::Null), of_run("r1"))
            .await;
        assert!(matches!(late, Err(GraphError::Cancelled)), "{late:?}");
        // Another run still writes; the fenced run's one checkpoint is all it left.
        saver
            .put(&thread, JsonText::new(&Value::Null), of_run("r2"))
            .await
            .expect("another run's write");
        let stored = held
            .list(&thread, CheckpointListOptions::default())
            .await
            .expect("listed");
        let runs: Vec<_> = stored
            .iter()
            .map(|t| t.metadata["run_id"].clone())
            .collect();
        assert_eq!(runs, [Value::from("r2"), Value::from("r1")]);
    }

    #[tokio::test]
    async fn a_fenced_runs_pending_writes_and_metadata_merges_are_refused() {
        let fences = Arc::new(Fences::default());
        let saver = FencedSaver {
            inner: Arc::new(InMemorySaver::new()),
            fences: Arc::clone(&fences),
        };
        let thread = CheckpointConfig::new("t", None);
        let stored = saver
            .put(&thread, JsonText::new(&Value::Null), of_run("r1"))
            .await
            .expect("r1's checkpoint");
        fences.fence("r1").await;
        let write = || vec![("done".to_owned(), Value::Bool(true))];

        let late = saver
            .put_writes_of_run(&stored, "task", write(), Some("r1"))
            .await;
        assert!(matches!(late, Err(GraphError::Cancelled)), "{late:?}");
        let merged = saver.merge_metadata(&stored, of_run("r1")).await;
        assert!(matches!(merged, Err(GraphError::Cancelled)), "{merged:?}");
        // Supersteps its runtime was still writing behind it.
        let step = NamedStep {
            task_writes: vec![("task".to_owned(), write())],
            checkpoint_id: service_graph::new_checkpoint_id(),
            checkpoint: JsonText::new(&Value::Null),
            metadata: of_run("r1"),
        };
        let behind = saver.put_steps(&stored, vec![step]).await;
        assert!(matches!(behind, Err(GraphError::Cancelled)), "{behind:?}");
        let latest = saver.get_tuple(&thread).await.expect("read").expect("kept");
        assert_eq!(latest.config, stored, "no step of the fenced run landed");
        let tuple = saver.get_tuple(&stored).await.expect("read").expect("kept");
        assert!(
            tuple.pending_writes.is_empty(),
            "{:?}",
            tuple.pending_writes
        );

        // A later run resuming from the stopped run's checkpoint still writes on it.
        saver
            .put_writes_of_run(&stored, "task", write(), Some("r2"))
            .await
            .expect("another run's writes");
        saver
            .put_writes_of_run(&stored, "other", write(), None)
            .await
            .expect("writes naming no run");
        let mut note = Metadata::new();
        note.insert("note".into(), Value::from("kept"));
        saver
            .merge_metadata(&stored, note)
            .await
            .expect("a merge naming no run");
        let tuple = saver.get_tuple(&stored).await.expect("read").expect("kept");
        let tasks: Vec<_> = tuple
            .pending_writes
            .iter()
            .map(|w| w.task_id.as_str())
            .collect();
        assert_eq!(tasks, ["task", "other"]);
        assert_eq!(tuple.metadata["note"], "kept");
        assert_eq!(tuple.metadata["run_id"], "r1");
    }
}
