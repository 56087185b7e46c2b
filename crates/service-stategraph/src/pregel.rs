//! The run loop: one superstep at a time, each running the pending nodes
//! concurrently, applying their writes through the reducers and writing one
//! checkpoint.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use futures::FutureExt;
use futures::future::{BoxFuture, join_all};
use serde_json::{Map, Value};
use service_graph::checkpoint::CheckpointTuple;
use service_graph::{
    CheckpointConfig, Checkpointer, FinalState, GraphError, LongTermStore, NamedStep, RunInput,
    StreamOptions, new_checkpoint_id,
};
use service_types::{JsonText, RunError, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::channel::apply_update;
use crate::context::{StreamWriter, TaskScope};
use crate::emit::Emitter;
use crate::graph::{GraphDef, Node};
use crate::node::NodeErrorKind;
use crate::stored::{
    Body, Loaded, Output, RaisedInterrupt, WRITE_ERROR, WRITE_INTERRUPT, WRITE_OUTPUT,
    WRITE_RESUME, metadata,
};
use crate::write_behind::{Checkpoints, write_behind};
use crate::{DEFAULT_RECURSION_LIMIT, NodeContext, START};

/// Everything one run needs.
pub(crate) struct Run {
    pub(crate) def: Arc<GraphDef>,
    pub(crate) saver: Arc<dyn Checkpointer>,
    pub(crate) thread: CheckpointConfig,
    pub(crate) options: StreamOptions,
    pub(crate) store: Option<Arc<dyn LongTermStore>>,
    pub(crate) cancel: CancellationToken,
    pub(crate) emit: Emitter,
    /// Where the state the run ended in is handed over to the engine.
    pub(crate) final_state: FinalState,
}

/// Longest stretch of supersteps between turns given to other tasks. Nodes that never
/// wait would otherwise hold a runtime thread for the whole run, and every request and
/// stream frame of the server would queue behind it: with ten such runs on two cores
/// a new stream's first frame waited about `10 × TURN / 2` (docs/performance.md §3).
/// Shorter turns cost frames/s (each turn ends in a wake-up of the run's consumers).
const TURN: std::time::Duration = std::time::Duration::from_micros(200);

/// How one task of a superstep ended.
pub(crate) enum Outcome {
    Done(Output),
    Interrupted(Vec<RaisedInterrupt>),
    Failed(RunError),
}

/// Where the loop stopped.
pub(crate) struct Ended {
    /// The last checkpoint.
    pub(crate) current: Loaded,
    /// Whether `current`'s snapshot is the thread's state: false when `current` is
    /// an earlier checkpoint the run started from and did not move past, or when task
    /// writes were recorded on it after it was loaded or written (a pause on an
    /// interrupt), which its snapshot would miss.
    exact: bool,
}

/// Where the loop starts and what the first superstep may reuse.
pub(crate) struct Start {
    pub(crate) current: Loaded,
    /// Whether `current` is the thread's latest checkpoint.
    pub(crate) is_latest: bool,
    /// Resume values per task position of the first superstep.
    pub(crate) resume: Vec<BTreeMap<usize, Value>>,
    /// Whether finished tasks' outputs recorded on `current` are reused, not re-run.
    pub(crate) reuse_outputs: bool,
    /// Whether `interrupt_before` is skipped for the first superstep (a continuation).
    pub(crate) skip_interrupt_before: bool,
}

/// Whether an update writes a state key: LangGraph streams `values` only after a
/// superstep that did (an input of no state key shows no empty state).
pub(crate) fn writes_state(update: &Value) -> bool {
    match update {
        Value::Object(keys) => !keys.is_empty(),
        Value::Null => false,
        _ => true,
    }
}

fn invalid_update(node: &str, message: String) -> GraphError {
    GraphError::NodeFailed {
        node: node.to_owned(),
        error: Box::new(RunError::new("InvalidUpdateError", message)),
    }
}

impl Run {
    /// Runs the graph to its end or a pause. Errors are the run's failure.
    pub(crate) async fn execute(self, input: RunInput) -> Result<(), GraphError> {
        if let Some(ended) = self.run_to_end(input).await?
            && ended.exact
        {
            self.final_state.set(ended.current.snapshot());
        }
        Ok(())
    }

    /// Runs the graph to its end or a pause; `None` when there was nothing to run.
    pub(crate) async fn run_to_end(&self, input: RunInput) -> Result<Option<Ended>, GraphError> {
        let input_json = match &input {
            RunInput::None => Value::Null,
            RunInput::Values(values) | RunInput::Command(values) => values.clone(),
        };
        self.emit.run_started(&input_json);
        let Some(ended) = self.start_and_loop(input).await? else {
            return Ok(None);
        };
        self.emit.run_finished(&ended.current.body.channel_values);
        Ok(Some(ended))
    }

    pub(crate) async fn load(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<Loaded>, GraphError> {
        self.saver
            .get_tuple(config)
            .await?
            .map(Loaded::new)
            .transpose()
    }

    pub(crate) async fn put(
        &self,
        parent: Option<&Loaded>,
        body: Body,
        meta: service_types::Metadata,
    ) -> Result<Loaded, GraphError> {
        self.put_after_writes(parent, Vec::new(), body, meta).await
    }

    /// Records the tasks' writes on `parent` and puts the checkpoint that follows, in
    /// one saver call.
    pub(crate) async fn put_after_writes(
        &self,
        parent: Option<&Loaded>,
        task_writes: Vec<(String, Vec<(String, Value)>)>,
        body: Body,
        meta: service_types::Metadata,
    ) -> Result<Loaded, GraphError> {
        let parent_config = parent.map(|parent| parent.tuple.config.clone());
        let at = parent_config.clone().unwrap_or_else(|| CheckpointConfig {
            checkpoint_id: None,
            ..self.thread.clone()
        });
        let config = if task_writes.is_empty() {
            self.saver
                .put(&at, JsonText::new(&body), meta.clone())
                .await?
        } else {
            self.saver
                .put_after_writes(&at, task_writes, JsonText::new(&body), meta.clone())
                .await?
        };
        Ok(self.stored(config, parent_config, body, meta))
    }

    /// A checkpoint just stored, as the loop holds it; reported to `checkpoints`
    /// streams.
    pub(crate) fn stored(
        &self,
        config: CheckpointConfig,
        parent_config: Option<CheckpointConfig>,
        body: Body,
        meta: service_types::Metadata,
    ) -> Loaded {
        let step = meta.get("step").and_then(Value::as_i64).unwrap_or(-1);
        let loaded = Loaded {
            tuple: CheckpointTuple {
                config,
                parent_config,
                checkpoint: Value::Null,
                metadata: meta,
                created_at: Timestamp::new(Utc::now()),
                pending_writes: Vec::new(),
            },
            body,
            step,
        };
        self.emit.checkpoint(step, || loaded.snapshot());
        loaded
    }

    fn should_pause_before(&self, next: &[String]) -> bool {
        self.options
            .interrupt_before
            .as_ref()
            .is_some_and(|selection| {
                next.iter()
                    .any(|node| node != START && selection.contains(node))
            })
    }

    fn should_pause_after(&self, ran: &[String]) -> bool {
        self.options
            .interrupt_after
            .as_ref()
            .is_some_and(|selection| {
                ran.iter()
                    .any(|node| node != START && selection.contains(node))
            })
    }

    /// The run's start, then supersteps until no node is pending or the run pauses,
    /// their checkpoints (the start's input ones too) written behind them as the run's
    /// durability asks ([`write_behind`]); returns once all of them are stored.
    async fn start_and_loop(&self, input: RunInput) -> Result<Option<Ended>, GraphError> {
        let (checkpoints, writer) = write_behind(Arc::clone(&self.saver), self.options.durability);
        let run = async move {
            let ended = match self.start(input, &checkpoints).await {
                Ok(Some(start)) => self.supersteps(start, &checkpoints).await.map(Some),
                other => other.map(|_| None),
            };
            let stored = checkpoints.flush().await;
            // A failure of the run itself says more than a write it left behind.
            ended.and_then(|ended| stored.map(|()| ended))
        };
        let (ended, ()) = futures::join!(run, writer);
        ended
    }

    async fn supersteps(
        &self,
        start: Start,
        checkpoints: &Checkpoints,
    ) -> Result<Ended, GraphError> {
        let limit = self
            .options
            .config
            .recursion_limit
            .unwrap_or(DEFAULT_RECURSION_LIMIT);
        let Start {
            mut current,
            mut is_latest,
            mut resume,
            mut reuse_outputs,
            skip_interrupt_before,
        } = start;
        let mut node_steps = 0u32;
        let mut first = true;
        let mut turn_started = std::time::Instant::now();
        loop {
            if self.cancel.is_cancelled() {
                return Err(GraphError::Cancelled);
            }
            let next = current.body.next.clone();
            if next.is_empty() {
                break;
            }
            if !(first && skip_interrupt_before) && self.should_pause_before(&next) {
                break;
            }
            if next.iter().any(|node| node != START) {
                node_steps += 1;
                if node_steps > limit {
                    return Err(GraphError::RecursionLimit { limit });
                }
            }
            let step = current.step + 1;
            let outcomes = self
                .superstep(&current, step, &resume, reuse_outputs, checkpoints)
                .await?;
            match self
                .finish_superstep(&mut current, step, outcomes, checkpoints)
                .await?
            {
                Some(written) => {
                    current = written;
                    is_latest = true;
                }
                None => {
                    return Ok(Ended {
                        current,
                        exact: false,
                    });
                }
            }
            if self.should_pause_after(&next) && !current.body.next.is_empty() {
                break;
            }
            resume = Vec::new();
            reuse_outputs = false;
            first = false;
            if turn_started.elapsed() >= TURN {
                tokio::task::yield_now().await;
                turn_started = std::time::Instant::now();
            }
        }
        Ok(Ended {
            current,
            exact: is_latest,
        })
    }

    /// Runs every pending task of `current` concurrently (reusing recorded outputs
    /// when allowed), raced against cancellation.
    async fn superstep(
        &self,
        current: &Loaded,
        step: i64,
        resume: &[BTreeMap<usize, Value>],
        reuse_outputs: bool,
        checkpoints: &Checkpoints,
    ) -> Result<Vec<(String, String, Outcome, bool)>, GraphError> {
        let ids = current.task_ids();
        let mut runs: Vec<BoxFuture<'static, Outcome>> = Vec::new();
        let mut plan = Vec::new();
        for (position, (node, id)) in current.body.next.iter().zip(&ids).enumerate() {
            let prior = current.writes_of(id);
            if let (true, Some(output)) = (reuse_outputs, prior.output) {
                plan.push((node.clone(), id.clone(), Some(Outcome::Done(output))));
                continue;
            }
            let resume = resume.get(position).cloned().unwrap_or_default();
            if !resume.is_empty() && resume != prior.resume {
                // The writes refer to `current`, which may still be queued.
                checkpoints.flush().await?;
                let value = serde_json::to_value(&resume).unwrap_or(Value::Null);
                self.saver
                    .put_writes(
                        &current.tuple.config,
                        id,
                        vec![(WRITE_RESUME.to_owned(), value)],
                    )
                    .await?;
            }
            runs.push(self.task(current, step, node, id, resume));
            plan.push((node.clone(), id.clone(), None));
        }
        let outcomes = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(GraphError::Cancelled),
            outcomes = join_all(runs) => outcomes,
        };
        let mut outcomes = outcomes.into_iter();
        Ok(plan
            .into_iter()
            .filter_map(|(node, id, reused)| match reused {
                Some(outcome) => Some((node, id, outcome, false)),
                None => outcomes.next().map(|outcome| (node, id, outcome, true)),
            })
            .collect())
    }

    /// One task as a future: the `__start__` task applies the pending input; a node
    /// task runs the node with its own context.
    fn task(
        &self,
        current: &Loaded,
        step: i64,
        node: &str,
        id: &str,
        resume: BTreeMap<usize, Value>,
    ) -> BoxFuture<'static, Outcome> {
        if node == START {
            let input = current.body.input.clone().unwrap_or(Value::Null);
            let update = self.known_keys(input);
            return Box::pin(async move {
                Outcome::Done(Output {
                    update,
                    goto: Vec::new(),
                })
            });
        }
        let run = match self.def.node(node) {
            Some(Node::Func(run)) => Arc::clone(run),
            Some(Node::Graph(child)) => {
                self.emit
                    .task_started(step, id, node, &current.body.channel_values);
                return self.subgraph_task(current, node, id, resume, Arc::clone(child));
            }
            None => {
                let error =
                    RunError::new("InvalidUpdateError", format!("Node {node} does not exist"));
                return Box::pin(async move { Outcome::Failed(error) });
            }
        };
        let state = Value::Object(current.body.channel_values.clone());
        self.emit
            .task_started(step, id, node, &current.body.channel_values);
        let scope = Arc::new(TaskScope {
            node: node.to_owned(),
            task_id: id.to_owned(),
            step,
            resume,
            writer: StreamWriter::new(self.emit.clone()),
            store: self.store.clone(),
            config: self.options.config.clone(),
            context: self.options.context.clone(),
            cancel: self.cancel.clone(),
            next_index: AtomicUsize::new(0),
            raised: Mutex::new(Vec::new()),
        });
        let ctx = NodeContext::new(Arc::clone(&scope));
        Box::pin(async move {
            let result = AssertUnwindSafe(run(state, ctx)).catch_unwind().await;
            let raised =
                std::mem::take(&mut *scope.raised.lock().unwrap_or_else(|p| p.into_inner()));
            if !raised.is_empty() {
                return Outcome::Interrupted(raised);
            }
            match result {
                Ok(Ok(output)) => {
                    let (update, goto) = output.into_parts();
                    Outcome::Done(Output { update, goto })
                }
                Ok(Err(error)) => match error.0 {
                    NodeErrorKind::Failed(error) => Outcome::Failed(*error),
                    NodeErrorKind::Interrupted => Outcome::Failed(RunError::new(
                        "InvalidUpdateError",
                        "Interrupt signal without an interrupt",
                    )),
                },
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|text| (*text).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "node panicked".to_owned());
                    Outcome::Failed(RunError::new("Panic", message))
                }
            }
        })
    }

    /// The input with keys the state does not declare dropped, as LangGraph does.
    pub(crate) fn known_keys(&self, input: Value) -> Value {
        match input {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .filter(|(key, _)| self.def.channels.iter().any(|(name, _)| name == key))
                    .collect(),
            ),
            other => other,
        }
    }

    /// Records the outcomes, reports them, and either writes the next checkpoint
    /// (`Some`) or stops on a pause (`None`) or failure (`Err`).
    async fn finish_superstep(
        &self,
        current: &mut Loaded,
        step: i64,
        outcomes: Vec<(String, String, Outcome, bool)>,
        checkpoints: &Checkpoints,
    ) -> Result<Option<Loaded>, GraphError> {
        let mut task_writes = Vec::new();
        for (node, id, outcome, ran) in &outcomes {
            if !ran {
                continue;
            }
            let write = match outcome {
                Outcome::Done(output) => (
                    WRITE_OUTPUT,
                    serde_json::to_value(output).unwrap_or(Value::Null),
                ),
                Outcome::Interrupted(raised) => (
                    WRITE_INTERRUPT,
                    serde_json::to_value(raised).unwrap_or(Value::Null),
                ),
                // Checkpoints and task frames reach clients whatever the stack
                // setting: the stack travels in the run's error alone.
                Outcome::Failed(error) => (
                    WRITE_ERROR,
                    serde_json::to_value(error.clone().without_stacks()).unwrap_or(Value::Null),
                ),
            };
            task_writes.push((id.clone(), vec![(write.0.to_owned(), write.1)]));
            if node == START {
                continue;
            }
            match outcome {
                Outcome::Done(output) => {
                    self.emit.updates(node, &output.update);
                    self.emit
                        .task_finished(step, id, node, Some(&output.update), None, &[]);
                }
                Outcome::Interrupted(raised) => {
                    let interrupts: Vec<_> =
                        raised.iter().map(RaisedInterrupt::to_interrupt).collect();
                    self.emit
                        .task_finished(step, id, node, None, None, &interrupts);
                }
                Outcome::Failed(error) => self.emit.task_finished(
                    step,
                    id,
                    node,
                    None,
                    Some(&error.clone().without_stacks()),
                    &[],
                ),
            }
        }
        let stops = outcomes
            .iter()
            .any(|(_, _, outcome, _)| !matches!(outcome, Outcome::Done(_)));
        if stops {
            self.record_writes(current, std::mem::take(&mut task_writes), checkpoints)
                .await?;
        }
        if let Some((node, _, Outcome::Failed(error), _)) = outcomes
            .iter()
            .find(|(_, _, outcome, _)| matches!(outcome, Outcome::Failed(_)))
        {
            return Err(GraphError::NodeFailed {
                node: node.clone(),
                error: Box::new(error.clone()),
            });
        }
        let interrupts: Vec<_> = outcomes
            .iter()
            .filter_map(|(_, _, outcome, _)| match outcome {
                Outcome::Interrupted(raised) => {
                    Some(raised.iter().map(RaisedInterrupt::to_interrupt))
                }
                _ => None,
            })
            .flatten()
            .collect();
        if !interrupts.is_empty() {
            self.emit
                .interrupted(&current.body.channel_values, &interrupts);
            return Ok(None);
        }
        // The outputs are applied onto the current values in place: past this point the
        // caller only reads `current`'s config (a failure below ends the run).
        let values = std::mem::take(&mut current.body.channel_values);
        let body = match self.apply_outputs(values, &outcomes) {
            Ok(body) => body,
            Err(error) => {
                self.record_writes(current, task_writes, checkpoints)
                    .await?;
                return Err(error);
            }
        };
        let mut writes = Map::new();
        for (node, _, outcome, _) in &outcomes {
            if let (false, Outcome::Done(output)) = (node == START, outcome) {
                writes.insert(node.clone(), output.update.clone());
            }
        }
        let writes = if writes.is_empty() {
            Value::Null
        } else {
            Value::Object(writes)
        };
        let meta = metadata("loop", step, writes, &self.options.metadata);
        let wrote_state = outcomes.iter().any(|(_, _, outcome, _)| {
            matches!(outcome, Outcome::Done(output) if writes_state(&output.update))
        });
        let parent = &current.tuple.config;
        let checkpoint_id = new_checkpoint_id();
        let config = CheckpointConfig {
            checkpoint_id: Some(checkpoint_id.clone()),
            ..parent.clone()
        };
        let step = NamedStep {
            task_writes,
            checkpoint_id,
            checkpoint: JsonText::new(&body),
            metadata: meta.clone(),
        };
        checkpoints.put(parent, vec![step]).await?;
        let written = self.stored(config, Some(parent.clone()), body, meta);
        if wrote_state {
            self.emit.values(&written.body.channel_values);
        }
        Ok(Some(written))
    }

    /// Records task writes on `current` when no checkpoint follows them: they are what
    /// a resume, a retry or the state's tasks read.
    async fn record_writes(
        &self,
        current: &Loaded,
        task_writes: Vec<(String, Vec<(String, Value)>)>,
        checkpoints: &Checkpoints,
    ) -> Result<(), GraphError> {
        // The writes refer to `current`, which may still be queued.
        checkpoints.flush().await?;
        for (task_id, writes) in task_writes {
            self.saver
                .put_writes(&current.tuple.config, &task_id, writes)
                .await?;
        }
        Ok(())
    }

    /// The next checkpoint body: every output applied in task order, then the next
    /// nodes (each task's goto, or its edges evaluated on the new state).
    pub(crate) fn apply_outputs(
        &self,
        mut values: Map<String, Value>,
        outcomes: &[(String, String, Outcome, bool)],
    ) -> Result<Body, GraphError> {
        for (node, _, outcome, _) in outcomes {
            if let Outcome::Done(output) = outcome {
                apply_update(&self.def.channels, &mut values, &output.update)
                    .map_err(|message| invalid_update(node, message))?;
            }
        }
        let state = Value::Object(values);
        let mut next: Vec<String> = Vec::new();
        for (node, _, outcome, _) in outcomes {
            let Outcome::Done(output) = outcome else {
                continue;
            };
            let targets = if output.goto.is_empty() {
                self.def.successors(node, &state)
            } else {
                output.goto.clone()
            };
            for target in targets {
                if target == crate::END {
                    continue;
                }
                if !self.def.has_node(&target) {
                    return Err(invalid_update(
                        node,
                        format!("Node {target} does not exist"),
                    ));
                }
                if !next.contains(&target) {
                    next.push(target);
                }
            }
        }
        let Value::Object(values) = state else {
            unreachable!("the state was built as an object above")
        };
        Ok(Body::new(values, next))
    }
}
