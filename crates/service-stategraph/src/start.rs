//! Where a run starts: its input checkpoint, its command's checkpoint, the fork that
//! starts a branch from an addressed checkpoint, or the checkpoint it resumes.

use serde_json::{Value, json};
use service_graph::{CheckpointConfig, GraphError, NamedStep, RunInput, new_checkpoint_id};
use service_types::JsonText;

use crate::START;
use crate::channel::{apply_update, ensure_message_ids};
use crate::node::Command;
use crate::pregel::{Outcome, Run, Start, writes_state};
use crate::resume::{apply_resume, prior_resume};
use crate::stored::{Body, Loaded, Output, WRITE_OUTPUT, metadata, task_id};
use crate::write_behind::Checkpoints;

impl Run {
    /// Where the run starts: the checkpoint its input, command or fork is written on,
    /// or the one it resumes; the input's checkpoints go to `checkpoints`.
    pub(crate) async fn start(
        &self,
        input: RunInput,
        checkpoints: &Checkpoints,
    ) -> Result<Option<Start>, GraphError> {
        let base = match &self.thread.checkpoint_id {
            Some(id) => Some(
                self.load(&self.thread)
                    .await?
                    .ok_or_else(|| GraphError::NotFound(format!("Checkpoint {id} not found")))?,
            ),
            // A thread made with this run has nothing to read.
            None if self.options.thread_is_new => None,
            None => self.load(&self.thread).await?,
        };
        let latest = match &self.thread.checkpoint_id {
            Some(_) => {
                let latest = CheckpointConfig {
                    checkpoint_id: None,
                    ..self.thread.clone()
                };
                self.saver
                    .get_tuple(&latest)
                    .await?
                    .map(|tuple| tuple.id().to_owned())
            }
            None => base.as_ref().map(|base| base.id().to_owned()),
        };
        let base_is_latest = base
            .as_ref()
            .is_some_and(|base| Some(base.id()) == latest.as_deref());
        match input {
            RunInput::Values(values) => {
                if !values.is_object() {
                    return Err(GraphError::InvalidInput(format!(
                        "Input must be an object, got {values}"
                    )));
                }
                let current = self.put_input(base.as_ref(), values, checkpoints).await?;
                Ok(Some(Start {
                    current,
                    is_latest: true,
                    resume: Vec::new(),
                    reuse_outputs: false,
                    skip_interrupt_before: false,
                }))
            }
            RunInput::None => {
                let Some(base) = base else {
                    return Ok(None);
                };
                if self.forks(&base, base_is_latest) {
                    let fork = self.put_fork(&base).await?;
                    self.emit.values(&fork.body.channel_values);
                    return Ok(Some(Start {
                        current: fork,
                        is_latest: true,
                        resume: Vec::new(),
                        reuse_outputs: false,
                        skip_interrupt_before: true,
                    }));
                }
                self.emit.values(&base.body.channel_values);
                Ok(Some(Start {
                    resume: prior_resume(&base),
                    current: base,
                    is_latest: base_is_latest,
                    reuse_outputs: base_is_latest,
                    skip_interrupt_before: true,
                }))
            }
            RunInput::Command(command) => {
                let command = Command::from_value(&command)?;
                let mut resume = base.as_ref().map(prior_resume).unwrap_or_default();
                if let (Some(base), Some(value)) = (&base, &command.resume) {
                    apply_resume(base, value, &mut resume)?;
                }
                let (current, is_latest) = if command.update.is_some() || !command.goto.is_empty() {
                    (self.put_command(base.as_ref(), &command).await?, true)
                } else {
                    match base {
                        Some(base) => (base, base_is_latest),
                        None => return Ok(None),
                    }
                };
                let reuse_outputs =
                    base_is_latest && command.update.is_none() && command.goto.is_empty();
                // A resumed run starts by showing the state it resumes, as LangGraph's.
                self.emit.values(&current.body.channel_values);
                Ok(Some(Start {
                    current,
                    is_latest,
                    resume,
                    reuse_outputs,
                    skip_interrupt_before: true,
                }))
            }
        }
    }

    /// Whether a run without input from `base` starts a branch of its own with a fork
    /// checkpoint, as LangGraph's time travel does: when a root-graph checkpoint was
    /// addressed, unless it is the latest and already a fork or a state update.
    fn forks(&self, base: &Loaded, base_is_latest: bool) -> bool {
        let source = base.tuple.metadata.get("source").and_then(Value::as_str);
        self.thread.checkpoint_id.is_some()
            && self.thread.checkpoint_ns.is_empty()
            && (!base_is_latest || !matches!(source, Some("update" | "fork")))
    }

    /// A copy of `base` as its child, with no task writes: the replay from it runs
    /// every pending task again.
    async fn put_fork(&self, base: &Loaded) -> Result<Loaded, GraphError> {
        let mut body = Body::new(base.body.channel_values.clone(), base.body.next.clone());
        body.input = base.body.input.clone();
        let meta = metadata("fork", base.step + 1, Value::Null, &self.options.metadata);
        self.put(Some(base), body, meta).await
    }

    /// The input checkpoint, then the `__start__` superstep that applies the input
    /// and its checkpoint, handed to `checkpoints` together. An input the reducers
    /// refuse is stored alone: the loop's `__start__` superstep then fails on it and
    /// records why, as for any task.
    async fn put_input(
        &self,
        base: Option<&Loaded>,
        mut input: Value,
        checkpoints: &Checkpoints,
    ) -> Result<Loaded, GraphError> {
        ensure_message_ids(&self.def.channels, &mut input);
        let values = base
            .map(|base| base.body.channel_values.clone())
            .unwrap_or_else(|| self.def.initial_values());
        let mut input_body = Body::new(values, vec![START.to_owned()]);
        input_body.input = Some(input.clone());
        let input_step = base.map_or(-1, |base| base.step + 1);
        let input_meta = metadata(
            "input",
            input_step,
            json!({ START: input }),
            &self.options.metadata,
        );
        let output = Output {
            update: self.known_keys(input),
            goto: Vec::new(),
        };
        let started = [(
            START.to_owned(),
            String::new(),
            Outcome::Done(output.clone()),
            true,
        )];
        let Ok(next_body) = self.apply_outputs(input_body.channel_values.clone(), &started) else {
            return self.put(base, input_body, input_meta).await;
        };
        let next_meta = metadata("loop", input_step + 1, Value::Null, &self.options.metadata);
        let output_json = serde_json::to_value(&output).unwrap_or(Value::Null);
        let parent_config = base.map(|base| base.tuple.config.clone());
        let at = parent_config.clone().unwrap_or_else(|| CheckpointConfig {
            checkpoint_id: None,
            ..self.thread.clone()
        });
        let (input_id, next_id) = (new_checkpoint_id(), new_checkpoint_id());
        let start_writes = vec![(
            task_id(&input_id, START, 0),
            vec![(WRITE_OUTPUT.to_owned(), output_json)],
        )];
        let steps = vec![
            NamedStep {
                task_writes: Vec::new(),
                checkpoint_id: input_id.clone(),
                checkpoint: JsonText::new(&input_body),
                metadata: input_meta.clone(),
            },
            NamedStep {
                task_writes: start_writes,
                checkpoint_id: next_id.clone(),
                checkpoint: JsonText::new(&next_body),
                metadata: next_meta.clone(),
            },
        ];
        checkpoints.put(&at, steps).await?;
        let input_config = CheckpointConfig {
            checkpoint_id: Some(input_id),
            ..at.clone()
        };
        let next_config = CheckpointConfig {
            checkpoint_id: Some(next_id),
            ..at
        };
        self.stored(input_config.clone(), parent_config, input_body, input_meta);
        let next = self.stored(next_config, Some(input_config), next_body, next_meta);
        if writes_state(&output.update) {
            self.emit.values(&next.body.channel_values);
        }
        Ok(next)
    }

    /// A command's update applied and its goto added to the pending nodes.
    async fn put_command(
        &self,
        base: Option<&Loaded>,
        command: &Command,
    ) -> Result<Loaded, GraphError> {
        let mut values = base
            .map(|base| base.body.channel_values.clone())
            .unwrap_or_else(|| self.def.initial_values());
        let update = command.update.clone().unwrap_or(Value::Null);
        apply_update(&self.def.channels, &mut values, &update).map_err(GraphError::InvalidInput)?;
        let mut next = base.map(|base| base.body.next.clone()).unwrap_or_default();
        for target in &command.goto {
            if !self.def.has_node(target) {
                return Err(GraphError::InvalidInput(format!(
                    "Node {target} does not exist"
                )));
            }
            if !next.contains(target) {
                next.push(target.clone());
            }
        }
        let step = base.map_or(-1, |base| base.step + 1);
        let meta = metadata(
            "input",
            step,
            json!({ START: update }),
            &self.options.metadata,
        );
        self.put(base, Body::new(values, next), meta).await
    }
}
