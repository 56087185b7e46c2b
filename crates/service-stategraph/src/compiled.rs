use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use service_graph::checkpoint::CheckpointListOptions;
use service_graph::{
    AgentGraph, CheckpointConfig, Checkpointer, ChunkStream, FinalState, GraphError,
    HistoryOptions, InMemorySaver, RunContext, RunInput, RunnableConfig, StateOptions,
    StateSnapshot, StateUpdate, StreamOptions,
};
use service_types::{GraphSchema, StreamMode};
use tokio::sync::mpsc;

use crate::driven::DrivenRun;
use crate::emit::Emitter;
use crate::graph::GraphDef;
use crate::pregel::Run;
use crate::schema::{graph_json, graph_schema};
use crate::stored::Loaded;
use crate::subgraph::{fill_subgraph_tasks, graph_at, subgraphs_of};

/// A validated state graph bound to a checkpointer; implements [`AgentGraph`].
#[derive(Clone)]
pub struct CompiledGraph {
    pub(crate) def: Arc<GraphDef>,
    pub(crate) saver: Arc<dyn Checkpointer>,
}

impl fmt::Debug for CompiledGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledGraph")
            .field("name", &self.def.name)
            .finish()
    }
}

impl CompiledGraph {
    pub(crate) fn new(def: Arc<GraphDef>, saver: Arc<dyn Checkpointer>) -> Self {
        Self { def, saver }
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// Input, output and state JSON schemas (without `graph_id`).
    pub fn schema(&self) -> GraphSchema {
        graph_schema(&self.def)
    }

    /// The checkpoint coordinates a config addresses; a thread id is required.
    pub(crate) fn thread(config: &RunnableConfig) -> Result<CheckpointConfig, GraphError> {
        config.checkpoint_config().ok_or_else(|| {
            GraphError::InvalidInput("A thread_id is required in configurable".into())
        })
    }

    /// The checkpoint `config` names (latest when it names none); a named checkpoint
    /// that does not exist is [`GraphError::NotFound`].
    pub(crate) async fn load(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<Loaded>, GraphError> {
        let found = self
            .saver
            .get_tuple(config)
            .await?
            .map(Loaded::new)
            .transpose()?;
        match (&config.checkpoint_id, found) {
            (Some(id), None) => Err(GraphError::NotFound(format!("Checkpoint {id} not found"))),
            (_, found) => Ok(found),
        }
    }

    /// Gives the subgraph tasks of `snapshot` (a checkpoint at `thread`) their child's
    /// coordinates and, with `nested`, its state; in a namespace this graph does not
    /// know (a checkpoint of another graph's subgraph), nothing.
    async fn fill_subgraph_tasks(
        &self,
        thread: &CheckpointConfig,
        snapshot: &mut StateSnapshot,
        nested: bool,
    ) -> Result<(), GraphError> {
        let Some(def) = graph_at(&self.def, &thread.checkpoint_ns) else {
            return Ok(());
        };
        fill_subgraph_tasks(
            &def,
            &self.saver,
            &thread.thread_id,
            &thread.checkpoint_ns,
            snapshot,
            nested,
        )
        .await
    }

    fn start(&self, input: RunInput, options: StreamOptions, ctx: RunContext) -> ChunkStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let emit = Emitter::new(tx, &self.def.name, &options);
        // Without a thread the run still needs checkpoints; keep them private to it
        // (and its final state, which no thread's `get_state` would return; nor would
        // it return a state kept under a checkpoint namespace). So are a thread's that
        // is deleted after the run: nobody reads them.
        let (saver, thread, final_state) = match options.config.checkpoint_config() {
            Some(thread) if options.thread_is_discarded => {
                let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
                (saver, thread, ctx.final_state)
            }
            Some(thread) => {
                let final_state = if thread.checkpoint_ns.is_empty() {
                    ctx.final_state
                } else {
                    FinalState::default()
                };
                (Arc::clone(&self.saver), thread, final_state)
            }
            None => {
                let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
                (
                    saver,
                    CheckpointConfig::new(uuid::Uuid::new_v4().to_string(), None),
                    FinalState::default(),
                )
            }
        };
        // Dropping the stream stops the run too, not just its output.
        let cancel = ctx.cancel.child_token();
        let guard = cancel.clone().drop_guard();
        // Checkpoints kept from a discarded thread: whatever the ending, the engine can
        // learn where they ended only from the run.
        let private_end = options.thread_is_discarded.then(|| {
            (
                Self::new(Arc::clone(&self.def), Arc::clone(&saver)),
                thread.clone(),
                final_state.clone(),
            )
        });
        let run = Run {
            def: Arc::clone(&self.def),
            saver,
            thread,
            options,
            store: ctx.store,
            cancel,
            emit: emit.clone(),
            final_state,
        };
        let run = async move {
            if let Err(error) = run.execute(input).await {
                // A run that ended well handed its state over already.
                if let Some((graph, thread, final_state)) = private_end
                    && let Ok(Some(loaded)) = graph.load(&thread).await
                {
                    let mut snapshot = loaded.snapshot();
                    if graph
                        .fill_subgraph_tasks(&thread, &mut snapshot, false)
                        .await
                        .is_ok()
                    {
                        final_state.set(snapshot);
                    }
                }
                emit.fail(error);
            }
        };
        Box::pin(DrivenRun::new(run, rx, guard))
    }
}

#[async_trait]
impl AgentGraph for CompiledGraph {
    async fn stream(
        &self,
        input: RunInput,
        options: StreamOptions,
        ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        Ok(self.start(input, options, ctx))
    }

    async fn get_state(
        &self,
        config: &RunnableConfig,
        options: StateOptions,
    ) -> Result<StateSnapshot, GraphError> {
        let thread = Self::thread(config)?;
        let Some(loaded) = self.load(&thread).await? else {
            return Ok(StateSnapshot::empty());
        };
        let mut snapshot = loaded.snapshot();
        self.fill_subgraph_tasks(&thread, &mut snapshot, options.subgraphs)
            .await?;
        Ok(snapshot)
    }

    async fn get_state_history(
        &self,
        config: &RunnableConfig,
        options: HistoryOptions,
    ) -> Result<Vec<StateSnapshot>, GraphError> {
        let thread = Self::thread(config)?;
        let listed = self
            .saver
            .list(
                &thread,
                CheckpointListOptions {
                    filter: options.filter,
                    before: options.before,
                    limit: options.limit,
                },
            )
            .await?;
        let mut history = Vec::with_capacity(listed.len());
        for tuple in listed {
            let mut snapshot = Loaded::new(tuple)?.snapshot();
            self.fill_subgraph_tasks(&thread, &mut snapshot, false)
                .await?;
            history.push(snapshot);
        }
        Ok(history)
    }

    async fn update_state(
        &self,
        config: &RunnableConfig,
        values: Value,
        as_node: Option<String>,
    ) -> Result<CheckpointConfig, GraphError> {
        let update = StateUpdate {
            values: Some(values),
            command: None,
            as_node,
        };
        self.bulk_update_state(config, vec![vec![update]]).await
    }

    async fn bulk_update_state(
        &self,
        config: &RunnableConfig,
        supersteps: Vec<Vec<StateUpdate>>,
    ) -> Result<CheckpointConfig, GraphError> {
        let thread = Self::thread(config)?;
        if supersteps.is_empty() || supersteps.iter().any(Vec::is_empty) {
            return Err(GraphError::InvalidInput(
                "Supersteps must each hold at least one update".into(),
            ));
        }
        // A subgraph's checkpoints are updated through the subgraph's own nodes and
        // reducers.
        let def = graph_at(&self.def, &thread.checkpoint_ns).ok_or_else(|| {
            GraphError::NotFound(format!(
                "No subgraph at checkpoint namespace {}",
                thread.checkpoint_ns
            ))
        })?;
        let graph = Self::new(def, Arc::clone(&self.saver));
        let mut base = graph.load(&thread).await?;
        for updates in supersteps {
            base = Some(graph.write_updates(&thread, base, updates).await?);
        }
        base.map(|loaded| loaded.tuple.config)
            .ok_or_else(|| GraphError::InvalidInput("No update was applied".into()))
    }

    async fn stream_events(
        &self,
        input: RunInput,
        mut options: StreamOptions,
        ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        if !options.stream_mode.contains(&StreamMode::Events) {
            options.stream_mode.push(StreamMode::Events);
        }
        Ok(self.start(input, options, ctx))
    }

    async fn invoke(
        &self,
        input: RunInput,
        mut options: StreamOptions,
        ctx: RunContext,
    ) -> Result<Value, GraphError> {
        options.stream_mode = vec![StreamMode::Values];
        let mut chunks = self.start(input, options.clone(), ctx);
        // Only the last values frame is read back (frames come as JSON text).
        let mut last = None;
        while let Some(chunk) = chunks.next().await {
            last = Some(chunk?);
        }
        match last {
            Some(chunk) => Ok(chunk.into_parts().2),
            // A thread-less run that wrote no values frame has no state to report.
            None if options.config.thread_id().is_none() => Ok(Value::Object(Default::default())),
            None => self
                .get_state(&options.config, StateOptions::default())
                .await
                .map(|snapshot| snapshot.values),
        }
    }

    async fn get_graph(&self, xray: u32) -> Result<Value, GraphError> {
        Ok(graph_json(&self.def, xray))
    }

    async fn get_subgraphs(
        &self,
        namespace: Option<String>,
        recurse: bool,
    ) -> Result<Vec<(String, GraphSchema)>, GraphError> {
        Ok(subgraphs_of(&self.def, namespace.as_deref(), recurse)
            .into_iter()
            .map(|(name, def)| (name, graph_schema(&def)))
            .collect())
    }

    fn keeps_discarded_checkpoints(&self) -> bool {
        true
    }
}
