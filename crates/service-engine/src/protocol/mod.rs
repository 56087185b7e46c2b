//! Protocol v2, thread-centric: the commands that start and resume runs on a thread
//! (`run.start`, `input.respond`, `agent.getTree`) and a thread's events, translated
//! from its stream topic. The HTTP adapter carries them (JSON, SSE, WebSocket).

mod filter;
mod translate;

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use service_store::text::{nul_path, nul_refused};
use service_types::{
    IfNotExists, InputRespondParams, MultitaskStrategy, ProtocolCommand, ProtocolErrorCode,
    ProtocolEvent, Run, RunCreate, RunStartParams, RunStatus, StreamMode, StreamModes,
    ThreadStatus,
};
use uuid::Uuid;

pub use filter::EventFilter;

use crate::auth::Caller;
use crate::bus::{Delivery, Frame, Replay, Topic};
use crate::run_options::RunOptions;
use crate::{Engine, EngineError, ErrorKind, RunTarget};
use translate::{RunFacts, RunMark, Translator};

/// The modes a protocol run streams: what the translator turns into events.
const RUN_MODES: [StreamMode; 7] = [
    StreamMode::Values,
    StreamMode::Updates,
    StreamMode::MessagesTuple,
    StreamMode::Custom,
    StreamMode::Tasks,
    StreamMode::Tools,
    StreamMode::Checkpoints,
];

/// How long `input.respond` waits for the paused run to settle (its interrupts are
/// announced on the stream before they are recorded on the thread).
const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// A command that failed: the code and message of its error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolFailure {
    /// The error code.
    pub code: ProtocolErrorCode,
    /// Client-facing text.
    pub message: String,
}

impl ProtocolFailure {
    /// A failure with this code and message.
    pub fn new(code: ProtocolErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<EngineError> for ProtocolFailure {
    fn from(error: EngineError) -> Self {
        let code = match error.kind {
            ErrorKind::BadRequest | ErrorKind::Unprocessable => ProtocolErrorCode::InvalidArgument,
            ErrorKind::Forbidden | ErrorKind::Unauthenticated => {
                ProtocolErrorCode::PermissionDenied
            }
            _ => ProtocolErrorCode::UnknownError,
        };
        if code == ProtocolErrorCode::UnknownError && error.kind == ErrorKind::Internal {
            tracing::error!(error = %error.chain(), "protocol command failed");
        }
        Self::new(code, error.message.clone())
    }
}

/// A command's `params` as the method's parameter type: a NUL in any string, or
/// params of the wrong shape, is an `invalid_argument` failure naming the field.
pub fn command_params<T: DeserializeOwned>(
    command: &ProtocolCommand,
) -> Result<T, ProtocolFailure> {
    if let Some(path) = nul_path(&command.params) {
        let field = if path.is_empty() {
            "params".into()
        } else {
            format!("params.{path}")
        };
        return Err(ProtocolFailure::new(
            ProtocolErrorCode::InvalidArgument,
            nul_refused(&field),
        ));
    }
    serde_json::from_value(command.params.clone()).map_err(|error| {
        ProtocolFailure::new(
            ProtocolErrorCode::InvalidArgument,
            format!("Invalid {} params: {error}", command.method),
        )
    })
}

/// The connection fell behind the stream bus and must end; the client reconnects
/// with `since`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lagged;

/// A thread's events for one connection: every buffered frame of the thread
/// translated, then live ones. Never ends while the thread lives.
pub type ThreadEvents = BoxStream<'static, Result<ProtocolEvent, Lagged>>;

impl Engine {
    /// The thread's protocol events, numbered from 1 for this connection.
    pub(crate) async fn thread_events(&self, thread_id: Uuid) -> crate::EngineResult<ThreadEvents> {
        let Some(subscription) = self.join_thread_stream(thread_id, Replay::All).await? else {
            return Ok(futures::stream::empty().boxed());
        };
        let state = (
            Some(subscription),
            Translator::default(),
            VecDeque::<ProtocolEvent>::new(),
            self.clone(),
        );
        let events = futures::stream::unfold(
            state,
            move |(mut subscription, mut translator, mut pending, engine)| async move {
                loop {
                    if let Some(event) = pending.pop_front() {
                        return Some((Ok(event), (subscription, translator, pending, engine)));
                    }
                    match subscription.as_mut()?.next().await? {
                        Delivery::Frame(frame) => {
                            let facts = engine.run_facts(thread_id, &frame).await;
                            pending.extend(translator.accept(&frame, &facts));
                        }
                        Delivery::Lagged | Delivery::Unavailable => {
                            return Some((Err(Lagged), (None, translator, pending, engine)));
                        }
                    }
                }
            },
        );
        Ok(events.boxed())
    }

    /// What the translator needs about the run a `metadata` frame marks.
    async fn run_facts(&self, thread_id: Uuid, frame: &Frame) -> RunFacts {
        let Some(mark) = RunMark::of(frame) else {
            return RunFacts::default();
        };
        let run_id = match mark {
            RunMark::Created(run_id) | RunMark::Done(run_id) => run_id,
        };
        let Ok(run) = self.get_run(Some(thread_id), run_id).await else {
            return RunFacts::default();
        };
        match mark {
            RunMark::Created(_) => RunFacts {
                graph_name: RunOptions::decode(&run)
                    .ok()
                    .and_then(|options| options.graph_id().map(str::to_owned)),
                status: None,
            },
            RunMark::Done(_) => RunFacts {
                graph_name: None,
                status: Some(run.status),
            },
        }
    }

    /// `run.start`: a run on the thread (made for it when it does not exist) that
    /// streams what the protocol translates, queued behind the thread's other runs
    /// unless the params ask for another multitask strategy.
    pub(crate) async fn start_thread_run(
        &self,
        thread_id: Uuid,
        params: RunStartParams,
        caller: &Caller,
    ) -> Result<Run, ProtocolFailure> {
        let mut config = params.config;
        // The fork point travels in the config; the run body names it on its own.
        let checkpoint_id = match config
            .as_mut()
            .and_then(|config| config.configurable.as_mut())
            .and_then(|configurable| configurable.remove("checkpoint_id"))
        {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) if !id.trim().is_empty() => Some(id),
            Some(_) => {
                return Err(ProtocolFailure::new(
                    ProtocolErrorCode::InvalidArgument,
                    "config.configurable.checkpoint_id must be a non-empty string.",
                ));
            }
        };
        let body = RunCreate {
            assistant_id: params.assistant_id,
            input: params.input,
            config,
            metadata: params.metadata,
            checkpoint_id,
            multitask_strategy: Some(params.multitask_strategy.unwrap_or_default()),
            ..protocol_run()
        };
        self.create_protocol_run(thread_id, body, caller).await
    }

    /// `input.respond`: resumes the thread's paused run with the answers, in a new run
    /// of the assistant that ran last (as the run row says, not the thread's
    /// client-writable metadata; and only when the caller may still read it).
    pub(crate) async fn respond_on_thread(
        &self,
        thread_id: Uuid,
        params: InputRespondParams,
        caller: &Caller,
    ) -> Result<Run, ProtocolFailure> {
        let Some(answers) = params.answers() else {
            return Err(ProtocolFailure::new(
                ProtocolErrorCode::InvalidArgument,
                "input.respond requires an interrupt_id and a response, or responses.",
            ));
        };
        let pending = self.settled_interrupts(thread_id).await?;
        if let Some(unknown) = answers
            .iter()
            .find(|answer| !pending.contains(&answer.interrupt_id))
        {
            return Err(ProtocolFailure::new(
                ProtocolErrorCode::NoSuchInterrupt,
                format!(
                    "Unknown or already-consumed interrupt: {}",
                    unknown.interrupt_id
                ),
            ));
        }
        let latest = self.list_runs(thread_id, Some(1), None, None).await?;
        let Some(assistant_id) = latest.first().map(|run| run.assistant_id.to_string()) else {
            return Err(ProtocolFailure::new(
                ProtocolErrorCode::NoSuchRun,
                "No interrupted run is bound to this thread.",
            ));
        };
        // One answer resumes its interrupt as a plain value (which also reaches an
        // interrupt raised in a subgraph); several go by interrupt id.
        let resume = match answers.as_slice() {
            [one] => one.response.clone(),
            many => Value::Object(
                many.iter()
                    .map(|answer| (answer.interrupt_id.clone(), answer.response.clone()))
                    .collect::<Map<String, Value>>(),
            ),
        };
        let mut command = json!({ "resume": resume });
        if let Some(update) = params.update {
            command["update"] = update;
        }
        if let Some(goto) = params.goto {
            command["goto"] = goto;
        }
        let body = RunCreate {
            assistant_id,
            command: Some(command),
            config: params.config,
            metadata: params.metadata,
            multitask_strategy: Some(MultitaskStrategy::Enqueue),
            ..protocol_run()
        };
        self.create_protocol_run(thread_id, body, caller).await
    }

    /// The ids of the thread's pending interrupts, once a run that paused has
    /// recorded them: a client answers as soon as the stream announces an interrupt,
    /// which is before the paused run settles.
    async fn settled_interrupts(
        &self,
        thread_id: Uuid,
    ) -> Result<HashSet<String>, ProtocolFailure> {
        let thread = self.get_thread(thread_id).await?;
        if thread.status == ThreadStatus::Busy {
            let active = self
                .list_runs(thread_id, Some(1), None, Some(RunStatus::Running))
                .await?;
            if let Some(run) = active.first() {
                let _ = tokio::time::timeout(SETTLE_WAIT, self.run_result(run.run_id)).await;
            }
        }
        let thread = self.get_thread(thread_id).await?;
        Ok(thread
            .interrupts
            .values()
            .flatten()
            .map(|interrupt| interrupt.id.clone())
            .collect())
    }

    /// Creates a protocol run with the thread's topic open first, so the thread's
    /// event streams can replay every frame of the run.
    async fn create_protocol_run(
        &self,
        thread_id: Uuid,
        body: RunCreate,
        caller: &Caller,
    ) -> Result<Run, ProtocolFailure> {
        let topic = Topic::Thread(thread_id);
        let was_open = self.inner.bus.is_open(topic).await;
        self.inner.bus.open(topic).await;
        let created = self
            .create_run(caller, RunTarget::Thread(thread_id), body)
            .await;
        if created.is_err() && !was_open && self.get_thread(thread_id).await.is_err() {
            self.inner.bus.discard(topic).await;
        }
        Ok(created?)
    }

    /// `agent.getTree`: the run's graph and the subgraphs it is paused in.
    pub(crate) async fn agent_tree(
        &self,
        thread_id: Uuid,
        run_id: Option<Uuid>,
    ) -> Result<Value, ProtocolFailure> {
        let no_run =
            || ProtocolFailure::new(ProtocolErrorCode::NoSuchRun, "No run on this thread.");
        let run = match run_id {
            Some(run_id) => self
                .get_run(Some(thread_id), run_id)
                .await
                .map_err(|_| no_run())?,
            None => self
                .list_runs(thread_id, Some(1), None, None)
                .await?
                .into_iter()
                .next()
                .ok_or_else(no_run)?,
        };
        let graph_name = RunOptions::decode(&run)
            .ok()
            .and_then(|options| options.graph_id().map(str::to_owned))
            .unwrap_or_else(|| run.assistant_id.to_string());
        let state = self.thread_state(thread_id, None, false).await?;
        let status = match run.status {
            RunStatus::Pending | RunStatus::Running => "running",
            RunStatus::Success if !state.interrupts.is_empty() => "interrupted",
            RunStatus::Success => "completed",
            RunStatus::Cancelled => "interrupted",
            RunStatus::Error | RunStatus::Timeout => "failed",
        };
        let children: Vec<Value> = state
            .tasks
            .iter()
            .filter_map(|task| {
                let namespace = &task.checkpoint.as_ref()?.checkpoint_ns;
                let status = if task.interrupts.is_empty() {
                    "running"
                } else {
                    "interrupted"
                };
                Some(json!({"namespace": [namespace], "status": status, "graph_name": task.name}))
            })
            .collect();
        let mut tree = json!({"namespace": [], "status": status, "graph_name": graph_name});
        if !children.is_empty() {
            tree["children"] = Value::Array(children);
        }
        Ok(json!({ "tree": tree }))
    }
}

/// The run body every protocol run starts from: the translated modes with
/// subgraphs, on a thread made when missing and kept.
fn protocol_run() -> RunCreate {
    RunCreate {
        stream_mode: Some(StreamModes::Many(RUN_MODES.to_vec())),
        stream_subgraphs: Some(true),
        if_not_exists: Some(IfNotExists::Create),
        ..RunCreate::default()
    }
}
