//! A2A (Agent2Agent) at `/a2a/{assistant_id}`: JSON-RPC over HTTP, one agent per
//! assistant, with its agent card at `/a2a/{assistant_id}/.well-known/agent-card.json`
//! (and at `/.well-known/agent-card.json?assistant_id=…`).
//!
//! The mapping onto threads and runs: a context is a thread (a new client-chosen
//! `contextId` becomes that thread), each message starts a run, and each run is a
//! task whose id is `{contextId}:{runId}`. A task's history is the whole
//! conversation on the thread. A message into an `input-required` task resumes its
//! interrupt (the run made for it carries the task's id in its metadata, so the task
//! reads as its newest run).
//!
//! Both the A2A 1.0 method names (`SendMessage`, `SendStreamingMessage`, `GetTask`,
//! `CancelTask`), which the `a2a-sdk` 1.x picks from a 1.0 card, and the 0.3 ones
//! (`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`) are served; each is
//! answered in its own version's shapes (see [`wire`]).

mod card;
mod wire;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use service_engine::auth::{Action, Resource};
use service_engine::bus::{Delivery, Subscription};
use service_engine::{Caller, Engine, EngineError, ErrorKind, RunTarget};
use service_types::{
    Assistant, CancelAction, HistoryQuery, IfNotExists, Metadata, Run, RunCreate, RunStatus,
    StreamMode, StreamModes, Timestamp,
};
use uuid::Uuid;

use self::wire::{
    Artifact, Dialect, Incoming, Message, Part, State as TaskState, Status, Task, artifact_event,
    status_event, task_event,
};
use crate::auth::CallerOf;
use crate::extract::{BodyLimit, Path, read_body, refuse_nul_in_json};
use crate::json::Json;
use crate::routes::Table;
use crate::routes::jsonrpc::{
    self, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError, refused, rpc_error,
    rpc_result,
};
use crate::sse::{HEARTBEAT, HEARTBEAT_COMMENT, event_stream_response};

/// A2A: no task with this id (for this agent and caller).
const TASK_NOT_FOUND: i64 = -32001;
/// A2A: the task has ended, or waits for input, so there is nothing to cancel.
const TASK_NOT_CANCELABLE: i64 = -32002;
/// A2A: the operation is not possible on this task (a message into an ended one).
const UNSUPPORTED_OPERATION: i64 = -32004;

/// The run metadata key naming the task a resuming run continues.
const TASK_KEY: &str = "a2a_task_id";

/// A thread's runs read while looking for a task's newest run.
const TASK_RUNS: i64 = 100;

/// Events buffered between a stream's run and a slow reader.
const STREAM_BUFFER: usize = 64;

pub(crate) fn routes() -> Table {
    // Every method comes through one POST, guarded as what its messages do: start
    // runs. Reads and cancels go through the same caller's engine views.
    Table::new()
        .post(
            "/a2a/{assistant_id}",
            (Resource::Threads, Action::CreateRun),
            endpoint,
        )
        .get(
            "/a2a/{assistant_id}/.well-known/agent-card.json",
            (Resource::Assistants, Action::Read),
            card::assistant_card,
        )
        .get(
            "/.well-known/agent-card.json",
            (Resource::Assistants, Action::Read),
            card::root_card,
        )
}

/// An A2A method, in either version's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Send,
    Stream,
    Get,
    Cancel,
}

fn method_of(name: &str) -> Option<(Method, Dialect)> {
    Some(match name {
        "SendMessage" => (Method::Send, Dialect::V1),
        "SendStreamingMessage" => (Method::Stream, Dialect::V1),
        "GetTask" => (Method::Get, Dialect::V1),
        "CancelTask" => (Method::Cancel, Dialect::V1),
        "message/send" => (Method::Send, Dialect::V03),
        "message/stream" => (Method::Stream, Dialect::V03),
        "tasks/get" => (Method::Get, Dialect::V03),
        "tasks/cancel" => (Method::Cancel, Dialect::V03),
        _ => return None,
    })
}

/// Engine errors as A2A answers: what the client asked wrongly is -32602 (a busy
/// thread too: the client may send again).
fn engine_error(error: EngineError) -> RpcError {
    match error.kind {
        ErrorKind::Conflict => RpcError(INVALID_PARAMS, error.message.clone()),
        _ => RpcError::from(error),
    }
}

async fn endpoint(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(assistant_id): Path<String>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match read_body(&parts.headers, body, BodyLimit::of(&parts.extensions)).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let (id, name, params) = match jsonrpc::parse(&bytes) {
        Ok(jsonrpc::Incoming::Call { id, method, params }) => (id, method, params),
        Ok(jsonrpc::Incoming::NoAnswer) => return StatusCode::ACCEPTED.into_response(),
        Err(RpcError(code, message)) => return refused(StatusCode::BAD_REQUEST, code, &message),
    };
    let answer = |result: Result<Value, RpcError>| {
        let body = match result {
            Ok(result) => rpc_result(id.clone(), result),
            Err(RpcError(code, message)) => rpc_error(id.clone(), code, message),
        };
        Json(body).into_response()
    };
    let Some((method, dialect)) = method_of(&name) else {
        return answer(Err(RpcError(
            METHOD_NOT_FOUND,
            format!("Method not found: {name}"),
        )));
    };
    let params = match params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return answer(Err(RpcError::params("params must be an object"))),
    };
    if let Err(error) = refuse_nul_in_json(&bytes) {
        return answer(Err(RpcError::params(error.0.message.clone())));
    }
    let agent = match Agent::of(&engine, &caller, &assistant_id).await {
        Ok(agent) => agent,
        Err(error) => return answer(Err(error)),
    };
    match method {
        Method::Send => answer(agent.send(dialect, &params).await),
        Method::Stream => match agent.stream(dialect, &params, id.clone()).await {
            Ok(response) => response,
            Err(error) => answer(Err(error)),
        },
        Method::Get => answer(agent.get(dialect, &params).await),
        Method::Cancel => answer(agent.cancel(dialect, &params).await),
    }
}

/// One assistant as an A2A agent, for one caller.
struct Agent {
    engine: Engine,
    caller: Caller,
    assistant: Assistant,
}

/// A task's id: its context (thread) and the run that started it.
#[derive(Clone, Copy, Debug)]
struct TaskId {
    context_id: Uuid,
    run_id: Uuid,
}

impl TaskId {
    fn parse(id: &str) -> Option<Self> {
        let (context, run) = id.split_once(':')?;
        Some(Self {
            context_id: Uuid::parse_str(context).ok()?,
            run_id: Uuid::parse_str(run).ok()?,
        })
    }

    fn text(self) -> String {
        format!("{}:{}", self.context_id, self.run_id)
    }
}

/// How much history a request asked for (`historyLength`; absent is all of it).
fn history_length(length: Option<&Value>) -> Result<Option<usize>, RpcError> {
    let Some(length) = length.filter(|length| !length.is_null()) else {
        return Ok(None);
    };
    length
        .as_u64()
        .or_else(|| {
            // A protobuf int may come as a whole float.
            length
                .as_f64()
                .filter(|n| n.fract() == 0.0 && *n >= 0.0)
                .map(|n| n as u64)
        })
        .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
        .ok_or_else(|| RpcError::params("historyLength must be a non-negative integer"))
}

fn task_id_param(params: &Map<String, Value>) -> Result<&str, RpcError> {
    match params.get("id") {
        Some(Value::String(id)) => Ok(id),
        _ => Err(RpcError::params("params.id (the task id) must be a string")),
    }
}

fn task_not_found(id: &str) -> RpcError {
    RpcError(TASK_NOT_FOUND, format!("Task not found: {id}"))
}

fn now() -> String {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
        });
    serde_json::to_value(Timestamp::from_unix_micros(micros))
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl Agent {
    /// The assistant named in the path, if the caller may read it.
    async fn of(engine: &Engine, caller: &Caller, assistant_id: &str) -> Result<Self, RpcError> {
        let reader = caller
            .acting_as(Resource::Assistants, Action::Read, json!({}))
            .await
            .map_err(engine_error)?;
        let assistant = engine
            .as_caller(&reader)
            .assistants()
            .get(assistant_id)
            .await
            .map_err(|_| RpcError::params(format!("Assistant not found: {assistant_id}")))?;
        Ok(Self {
            engine: engine.clone(),
            caller: caller.clone(),
            assistant,
        })
    }

    /// The task `id` names, as its newest run, if it is this agent's and the caller's.
    async fn find(&self, id: &str) -> Result<(TaskId, Run), RpcError> {
        let task = TaskId::parse(id).ok_or_else(|| task_not_found(id))?;
        let reader = self
            .caller
            .acting_as(Resource::Threads, Action::Read, json!({}))
            .await
            .map_err(engine_error)?;
        let runs = self.engine.as_caller(&reader).runs();
        let first = runs
            .get(task.context_id, task.run_id)
            .await
            .map_err(|_| task_not_found(id))?;
        if first.assistant_id != self.assistant.assistant_id {
            return Err(task_not_found(id));
        }
        // Runs that resumed the task carry its id; the newest says where it stands.
        let recent = runs
            .list(task.context_id, Some(TASK_RUNS), None, None)
            .await
            .map_err(engine_error)?;
        let newest = recent
            .into_iter()
            .find(|run| {
                run.run_id == first.run_id
                    || run.metadata.get(TASK_KEY) == Some(&json!(task.text()))
            })
            .unwrap_or(first);
        Ok((task, newest))
    }

    /// The thread's values after `run` (its last checkpoint), or the thread's now.
    async fn values_after(&self, run: &Run) -> Result<(Value, Vec<Value>), RpcError> {
        let reader = self
            .caller
            .acting_as(Resource::Threads, Action::Read, json!({}))
            .await
            .map_err(engine_error)?;
        let threads = self.engine.as_caller(&reader).threads();
        let mut filter = Metadata::new();
        filter.insert("run_id".to_owned(), json!(run.run_id));
        let query = HistoryQuery {
            limit: Some(1),
            metadata: Some(filter),
            ..HistoryQuery::default()
        };
        let history = threads
            .history(run.thread_id, query)
            .await
            .map_err(engine_error)?;
        let state = match history.into_iter().next() {
            Some(state) => state,
            None => threads
                .state(run.thread_id, None, false)
                .await
                .map_err(engine_error)?,
        };
        let interrupts = state
            .interrupts
            .iter()
            .filter_map(|interrupt| serde_json::to_value(interrupt).ok())
            .collect();
        Ok((state.values, interrupts))
    }

    /// The task as `run` left it. `output` is the run's wait body when the caller
    /// has it; `sent` the message that started the run.
    async fn task(
        &self,
        task: TaskId,
        run: &Run,
        output: Option<Value>,
        sent: Option<&Incoming>,
    ) -> Result<Task, RpcError> {
        let task_id = task.text();
        let (values, interrupts) = match output {
            Some(output) => {
                let interrupts = output
                    .get("__interrupt__")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                (output, interrupts)
            }
            None => self.values_after(run).await?,
        };
        let state = match run.status {
            RunStatus::Pending => TaskState::Submitted,
            RunStatus::Running => TaskState::Working,
            RunStatus::Success if !interrupts.is_empty() => TaskState::InputRequired,
            RunStatus::Success if values.get("__error__").is_some() => TaskState::Failed,
            RunStatus::Success => TaskState::Completed,
            RunStatus::Error | RunStatus::Timeout => TaskState::Failed,
            RunStatus::Cancelled => TaskState::Canceled,
        };
        let mut history: Vec<Message> = match values.get("messages").and_then(Value::as_array) {
            Some(messages) => messages
                .iter()
                .filter_map(|message| wire::from_state_message(message, task.context_id))
                .collect(),
            None => Vec::new(),
        };
        if history.is_empty()
            && let Some(sent) = sent
        {
            history.push(sent.as_message(&task_id, task.context_id));
        }
        let mut artifacts = Vec::new();
        let mut message = None;
        match state {
            TaskState::Completed => artifacts.push(Artifact {
                name: "Assistant Response",
                parts: answer_parts(&values),
            }),
            TaskState::InputRequired => artifacts.push(Artifact {
                name: "Interrupt",
                parts: interrupts.into_iter().map(Part::Data).collect(),
            }),
            TaskState::Failed => {
                let why = failure(run, &values);
                message = Some(Message::agent(
                    vec![Part::Text(why)],
                    &task_id,
                    task.context_id,
                ));
            }
            TaskState::Submitted | TaskState::Working | TaskState::Canceled => {}
        }
        Ok(Task {
            id: task_id,
            context_id: task.context_id,
            status: Status {
                state,
                message,
                timestamp: now(),
            },
            artifacts,
            history,
        })
    }

    /// The run a message starts: a new task on its context, or the resumption of an
    /// `input-required` task it names.
    async fn prepare(
        &self,
        sent: &Incoming,
    ) -> Result<(Uuid, Option<TaskId>, RunCreate), RpcError> {
        let mut body = RunCreate {
            assistant_id: self.assistant.assistant_id.to_string(),
            ..RunCreate::default()
        };
        let Some(task_id) = &sent.task_id else {
            body.input = Some(sent.input());
            body.if_not_exists = Some(IfNotExists::Create);
            return Ok((sent.context_id.unwrap_or_else(Uuid::new_v4), None, body));
        };
        let (task, run) = self.find(task_id).await?;
        if sent
            .context_id
            .is_some_and(|context| context != task.context_id)
        {
            return Err(RpcError::params(
                "contextId differs from the context of the task named",
            ));
        }
        let state = self.task(task, &run, None, None).await?.status.state;
        match state {
            TaskState::InputRequired => {
                body.command = Some(json!({"resume": sent.resume_value()}));
                let mut metadata = Metadata::new();
                metadata.insert(TASK_KEY.to_owned(), json!(task.text()));
                body.metadata = Some(metadata);
                Ok((task.context_id, Some(task), body))
            }
            state if state.is_terminal() => Err(RpcError(
                UNSUPPORTED_OPERATION,
                "A terminal task cannot accept another message; send without taskId to start a new one".into(),
            )),
            _ => Err(RpcError(
                UNSUPPORTED_OPERATION,
                "The task is still working; send again when it asks for input".into(),
            )),
        }
    }

    async fn send(&self, dialect: Dialect, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let sent = Incoming::read(params)?;
        let configuration = params.get("configuration");
        let length = history_length(
            configuration.and_then(|configuration| configuration.get("historyLength")),
        )?;
        let immediately = configuration.is_some_and(|configuration| {
            configuration.get("returnImmediately") == Some(&json!(true))
                || configuration.get("blocking") == Some(&json!(false))
        });
        let (context_id, resumed, body) = self.prepare(&sent).await?;
        let runs = self.engine.as_caller(&self.caller).runs();
        let (run, watched) = runs
            .create_watched(RunTarget::Thread(context_id), body)
            .await
            .map_err(engine_error)?;
        let task = resumed.unwrap_or(TaskId {
            context_id: run.thread_id,
            run_id: run.run_id,
        });
        if immediately {
            let task = self.task(task, &run, Some(json!({})), Some(&sent)).await?;
            return Ok(task.send_result(dialect, length));
        }
        let output = self
            .engine
            .as_caller(&self.caller)
            .runs()
            .wait(watched)
            .await;
        let run = self.settled(&run).await?;
        let task = self.task(task, &run, Some(output), Some(&sent)).await?;
        Ok(task.send_result(dialect, length))
    }

    /// The run as stored now (after its wait ended: settled).
    async fn settled(&self, run: &Run) -> Result<Run, RpcError> {
        let reader = self
            .caller
            .acting_as(Resource::Threads, Action::Read, json!({}))
            .await
            .map_err(engine_error)?;
        self.engine
            .as_caller(&reader)
            .runs()
            .get(run.thread_id, run.run_id)
            .await
            .map_err(engine_error)
    }

    async fn get(&self, dialect: Dialect, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let id = task_id_param(params)?;
        let length = history_length(params.get("historyLength"))?;
        let (task, run) = self.find(id).await?;
        Ok(self
            .task(task, &run, None, None)
            .await?
            .render(dialect, length))
    }

    async fn cancel(
        &self,
        dialect: Dialect,
        params: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let id = task_id_param(params)?;
        let (task, run) = self.find(id).await?;
        let not_cancelable = || {
            RpcError(
                TASK_NOT_CANCELABLE,
                "Task is not cancelable in its current state".into(),
            )
        };
        if run.status.is_terminal() {
            return Err(not_cancelable());
        }
        // Cancelling is authorized as the cancel routes are: updating the thread.
        let updater = self
            .caller
            .acting_as(Resource::Threads, Action::Update, json!({}))
            .await
            .map_err(engine_error)?;
        let runs = self.engine.as_caller(&updater).runs();
        let cancelled = match runs
            .cancel(run.thread_id, run.run_id, CancelAction::Interrupt)
            .await
        {
            Ok(run) => run,
            // It ended meanwhile.
            Err(error) if error.kind == ErrorKind::NotFound => return Err(not_cancelable()),
            Err(error) => return Err(engine_error(error)),
        };
        let mut answer = self.task(task, &cancelled, None, None).await?;
        // A running run stops at its next step; the task is cancelled from now on.
        answer.status.state = TaskState::Canceled;
        answer.artifacts.clear();
        Ok(answer.render(dialect, None))
    }

    /// `message/stream`: the task first, then `working` with each step's update, then
    /// the answer as an artifact and the final status (`canceled` when cancelled).
    async fn stream(
        self,
        dialect: Dialect,
        params: &Map<String, Value>,
        rpc_id: Value,
    ) -> Result<Response, RpcError> {
        let sent = Incoming::read(params)?;
        let (context_id, resumed, mut body) = self.prepare(&sent).await?;
        body.stream_mode = Some(StreamModes::Many(vec![
            StreamMode::Values,
            StreamMode::Updates,
        ]));
        let runs = self.engine.as_caller(&self.caller).runs();
        let (run, watched) = runs
            .create_watched(RunTarget::Thread(context_id), body)
            .await
            .map_err(engine_error)?;
        let task = resumed.unwrap_or(TaskId {
            context_id: run.thread_id,
            run_id: run.run_id,
        });
        let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(STREAM_BUFFER);
        let streamer = Streamer {
            agent: self,
            dialect,
            rpc_id,
            sender,
        };
        tokio::spawn(streamer.run(task, run, watched.into_frames(), sent));
        let body = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver
                .recv()
                .await
                .map(|event| (Ok::<_, std::io::Error>(event), receiver))
        });
        Ok(event_stream_response(body))
    }
}

/// Writes one `message/stream` answer's events.
struct Streamer {
    agent: Agent,
    dialect: Dialect,
    rpc_id: Value,
    sender: tokio::sync::mpsc::Sender<Bytes>,
}

impl Streamer {
    /// Sends one JSON-RPC answer as an SSE event; false once the client is gone.
    async fn send(&self, answer: Value) -> bool {
        let event = format!("data: {answer}\n\n");
        self.sender.send(Bytes::from(event)).await.is_ok()
    }

    async fn result(&self, result: Value) -> bool {
        self.send(rpc_result(self.rpc_id.clone(), result)).await
    }

    async fn run(self, task: TaskId, run: Run, mut frames: Subscription, sent: Incoming) {
        let (dialect, task_id) = (self.dialect, task.text());
        let started = Task {
            id: task_id.clone(),
            context_id: task.context_id,
            status: Status {
                state: TaskState::Submitted,
                message: None,
                timestamp: now(),
            },
            artifacts: Vec::new(),
            history: vec![sent.as_message(&task_id, task.context_id)],
        };
        if !self.result(task_event(dialect, &started)).await {
            return;
        }
        let working = |message: Option<Message>| Status {
            state: TaskState::Working,
            message,
            timestamp: now(),
        };
        let event = status_event(dialect, &task_id, task.context_id, &working(None), false);
        if !self.result(event).await {
            return;
        }
        loop {
            let delivery = tokio::select! {
                delivery = frames.next() => delivery,
                // A comment keeps proxies from closing a quiet stream, and finds out
                // whether the client is still there.
                () = tokio::time::sleep(HEARTBEAT) => {
                    if self.sender.send(Bytes::from_static(HEARTBEAT_COMMENT)).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let Some(delivery) = delivery else { break };
            match delivery {
                Delivery::Frame(frame) if frame.event == "updates" => {
                    let Ok(update) = serde_json::from_slice::<Value>(&frame.data) else {
                        continue;
                    };
                    let message =
                        Message::agent(vec![Part::Data(update)], &task_id, task.context_id);
                    let status = working(Some(message));
                    let event = status_event(dialect, &task_id, task.context_id, &status, false);
                    if !self.result(event).await {
                        return;
                    }
                }
                Delivery::Frame(_) => {}
                Delivery::Lagged | Delivery::Unavailable => {
                    let error = rpc_error(
                        self.rpc_id.clone(),
                        INTERNAL_ERROR,
                        "The task's stream cannot be read now; the task goes on: read it with GetTask",
                    );
                    self.send(error).await;
                    return;
                }
            }
        }
        let settled = match self.agent.settled(&run).await {
            Ok(run) => run,
            Err(RpcError(code, message)) => {
                self.send(rpc_error(self.rpc_id.clone(), code, message))
                    .await;
                return;
            }
        };
        let done = match self.agent.task(task, &settled, None, Some(&sent)).await {
            Ok(done) => done,
            Err(RpcError(code, message)) => {
                self.send(rpc_error(self.rpc_id.clone(), code, message))
                    .await;
                return;
            }
        };
        for artifact in &done.artifacts {
            let event = artifact_event(dialect, &task_id, task.context_id, artifact);
            if !self.result(event).await {
                return;
            }
        }
        let event = status_event(dialect, &task_id, task.context_id, &done.status, true);
        self.result(event).await;
    }
}

/// The answer of a completed run: the last AI message of its turn, or its values as
/// data for a graph without messages.
fn answer_parts(values: &Value) -> Vec<Part> {
    let Some(messages) = values.get("messages").and_then(Value::as_array) else {
        return vec![Part::Data(values.clone())];
    };
    let reply = messages
        .iter()
        .rev()
        .take_while(|message| {
            let kind = message.get("type").or_else(|| message.get("role"));
            !matches!(kind.and_then(Value::as_str), Some("human" | "user"))
        })
        .filter_map(|message| wire::from_state_message(message, Uuid::nil()))
        .find(|message| message.role == wire::Role::Agent);
    reply.map_or_else(|| vec![Part::Text(String::new())], |reply| reply.parts)
}

/// Why a run failed, in words.
fn failure(run: &Run, values: &Value) -> String {
    if let Some(error) = values.get("__error__") {
        return error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| error.to_string(), str::to_owned);
    }
    match (&run.error, run.status) {
        (Some(error), _) => error.message.clone(),
        (None, RunStatus::Timeout) => "The run timed out".into(),
        (None, _) => "The run failed".into(),
    }
}
