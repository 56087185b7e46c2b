//! A2A objects in the two wire dialects clients speak: 1.0 (the protobuf JSON of the
//! `a2a-sdk` 1.x: `ROLE_USER`, `TASK_STATE_COMPLETED`, parts as `{"text": …}`, stream
//! events wrapped in `statusUpdate`/`artifactUpdate`) and 0.3 (`kind`-tagged objects,
//! lowercase roles and states), and the A2A message read from either.

use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::routes::jsonrpc::RpcError;

/// A2A's code for a message whose parts this agent cannot take (files).
pub(crate) const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;

/// Which A2A version a request was made in; its answer is written in the same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// A2A 1.0 method names (`SendMessage`, …).
    V1,
    /// A2A 0.3 method names (`message/send`, …).
    V03,
}

/// A task's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl State {
    /// A task in this state takes no more messages and cannot be cancelled.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled)
    }

    fn name(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (Self::Submitted, Dialect::V1) => "TASK_STATE_SUBMITTED",
            (Self::Working, Dialect::V1) => "TASK_STATE_WORKING",
            (Self::InputRequired, Dialect::V1) => "TASK_STATE_INPUT_REQUIRED",
            (Self::Completed, Dialect::V1) => "TASK_STATE_COMPLETED",
            (Self::Failed, Dialect::V1) => "TASK_STATE_FAILED",
            (Self::Canceled, Dialect::V1) => "TASK_STATE_CANCELED",
            (Self::Submitted, Dialect::V03) => "submitted",
            (Self::Working, Dialect::V03) => "working",
            (Self::InputRequired, Dialect::V03) => "input-required",
            (Self::Completed, Dialect::V03) => "completed",
            (Self::Failed, Dialect::V03) => "failed",
            (Self::Canceled, Dialect::V03) => "canceled",
        }
    }
}

/// One part of a message or an artifact.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    Text(String),
    Data(Value),
}

impl Part {
    fn render(&self, dialect: Dialect) -> Value {
        match (self, dialect) {
            (Self::Text(text), Dialect::V1) => json!({"text": text}),
            (Self::Data(data), Dialect::V1) => json!({"data": data}),
            (Self::Text(text), Dialect::V03) => json!({"kind": "text", "text": text}),
            (Self::Data(data), Dialect::V03) => json!({"kind": "data", "data": data}),
        }
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Agent,
}

/// An A2A message.
#[derive(Clone, Debug)]
pub(crate) struct Message {
    pub(crate) id: String,
    pub(crate) role: Role,
    pub(crate) parts: Vec<Part>,
    pub(crate) task_id: Option<String>,
    pub(crate) context_id: Uuid,
}

impl Message {
    /// An agent's message in a task.
    pub(crate) fn agent(parts: Vec<Part>, task_id: &str, context_id: Uuid) -> Self {
        Self {
            id: Uuid::new_v4().to_string(),
            role: Role::Agent,
            parts,
            task_id: Some(task_id.to_owned()),
            context_id,
        }
    }

    fn render(&self, dialect: Dialect) -> Value {
        let role = match (self.role, dialect) {
            (Role::User, Dialect::V1) => "ROLE_USER",
            (Role::Agent, Dialect::V1) => "ROLE_AGENT",
            (Role::User, Dialect::V03) => "user",
            (Role::Agent, Dialect::V03) => "agent",
        };
        let mut message = json!({
            "messageId": self.id,
            "role": role,
            "parts": self.parts.iter().map(|part| part.render(dialect)).collect::<Vec<_>>(),
            "contextId": self.context_id,
        });
        if let Some(task_id) = &self.task_id {
            message["taskId"] = json!(task_id);
        }
        if dialect == Dialect::V03 {
            message["kind"] = json!("message");
        }
        message
    }
}

/// A task's status: its state, the agent's word on it, when.
#[derive(Clone, Debug)]
pub(crate) struct Status {
    pub(crate) state: State,
    pub(crate) message: Option<Message>,
    pub(crate) timestamp: String,
}

impl Status {
    fn render(&self, dialect: Dialect) -> Value {
        let mut status = json!({"state": self.state.name(dialect), "timestamp": self.timestamp});
        if let Some(message) = &self.message {
            status["message"] = message.render(dialect);
        }
        status
    }
}

/// An output of a task.
#[derive(Clone, Debug)]
pub(crate) struct Artifact {
    pub(crate) name: &'static str,
    pub(crate) parts: Vec<Part>,
}

impl Artifact {
    fn render(&self, dialect: Dialect) -> Value {
        json!({
            "artifactId": Uuid::new_v4(),
            "name": self.name,
            "parts": self.parts.iter().map(|part| part.render(dialect)).collect::<Vec<_>>(),
        })
    }
}

/// An A2A task: one run on the context's thread.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    pub(crate) id: String,
    pub(crate) context_id: Uuid,
    pub(crate) status: Status,
    pub(crate) artifacts: Vec<Artifact>,
    pub(crate) history: Vec<Message>,
}

impl Task {
    pub(crate) fn render(&self, dialect: Dialect, history_length: Option<usize>) -> Value {
        let mut task = json!({
            "id": self.id,
            "contextId": self.context_id,
            "status": self.status.render(dialect),
        });
        if !self.artifacts.is_empty() {
            task["artifacts"] = self
                .artifacts
                .iter()
                .map(|artifact| artifact.render(dialect))
                .collect();
        }
        let keep = history_length.unwrap_or(usize::MAX).min(self.history.len());
        if keep > 0 {
            let recent = &self.history[self.history.len() - keep..];
            task["history"] = recent.iter().map(|m| m.render(dialect)).collect();
        }
        if dialect == Dialect::V03 {
            task["kind"] = json!("task");
        }
        task
    }

    /// The answer to a send: 1.0 wraps the task in `{"task": …}`, 0.3 sends it bare.
    pub(crate) fn send_result(&self, dialect: Dialect, history_length: Option<usize>) -> Value {
        let task = self.render(dialect, history_length);
        match dialect {
            Dialect::V1 => json!({"task": task}),
            Dialect::V03 => task,
        }
    }
}

/// A status change of a task, as a stream event.
pub(crate) fn status_event(
    dialect: Dialect,
    task_id: &str,
    context_id: Uuid,
    status: &Status,
    last: bool,
) -> Value {
    let mut event = json!({
        "taskId": task_id,
        "contextId": context_id,
        "status": status.render(dialect),
    });
    match dialect {
        // 1.0 has no `final`: the stream ends after a terminal (or input-required) state.
        Dialect::V1 => json!({"statusUpdate": event}),
        Dialect::V03 => {
            event["kind"] = json!("status-update");
            event["final"] = json!(last);
            event
        }
    }
}

/// A task's artifact, whole, as a stream event.
pub(crate) fn artifact_event(
    dialect: Dialect,
    task_id: &str,
    context_id: Uuid,
    artifact: &Artifact,
) -> Value {
    let mut event = json!({
        "taskId": task_id,
        "contextId": context_id,
        "artifact": artifact.render(dialect),
        "append": false,
        "lastChunk": true,
    });
    match dialect {
        Dialect::V1 => json!({"artifactUpdate": event}),
        Dialect::V03 => {
            event["kind"] = json!("artifact-update");
            event
        }
    }
}

/// The first event of a stream: the task as it starts.
pub(crate) fn task_event(dialect: Dialect, task: &Task) -> Value {
    task.send_result(dialect, None)
}

/// A message a client sent, read from either dialect.
#[derive(Clone, Debug)]
pub(crate) struct Incoming {
    pub(crate) message_id: String,
    pub(crate) role: Role,
    pub(crate) parts: Vec<Part>,
    pub(crate) context_id: Option<Uuid>,
    pub(crate) task_id: Option<String>,
}

fn string_field<'a>(
    object: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, RpcError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(RpcError::params(format!("message.{key} must be a string"))),
    }
}

impl Incoming {
    /// Reads `params.message`.
    pub(crate) fn read(params: &Map<String, Value>) -> Result<Self, RpcError> {
        let Some(Value::Object(message)) = params.get("message") else {
            return Err(RpcError::params("params.message must be an object"));
        };
        let role = match string_field(message, "role")? {
            None | Some("ROLE_USER" | "user") => Role::User,
            Some("ROLE_AGENT" | "agent") => Role::Agent,
            Some(other) => return Err(RpcError::params(format!("Unknown message role: {other}"))),
        };
        let message_id = string_field(message, "messageId")?
            .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
        let context_id = string_field(message, "contextId")?
            .map(|id| {
                Uuid::parse_str(id).map_err(|_| {
                    RpcError::params(format!(
                        "contextId must be a UUID (a thread id), not {id:?}"
                    ))
                })
            })
            .transpose()?;
        let task_id = string_field(message, "taskId")?.map(str::to_owned);
        let Some(Value::Array(raw_parts)) = message.get("parts") else {
            return Err(RpcError::params("message.parts must be a list"));
        };
        let parts = raw_parts
            .iter()
            .map(read_part)
            .collect::<Result<Vec<_>, _>>()?;
        if parts.is_empty() {
            return Err(RpcError::params("message.parts must not be empty"));
        }
        Ok(Self {
            message_id,
            role,
            parts,
            context_id,
            task_id,
        })
    }

    /// The run input: the text parts as one message in `messages`, the data parts'
    /// keys beside it.
    pub(crate) fn input(&self) -> Value {
        let mut input = Map::new();
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::Text(text) => Some(text.as_str()),
                Part::Data(_) => None,
            })
            .collect();
        if !texts.is_empty() {
            let content = match texts.as_slice() {
                [one] => json!(one),
                many => many
                    .iter()
                    .map(|text| json!({"type": "text", "text": text}))
                    .collect(),
            };
            let kind = match self.role {
                Role::User => "human",
                Role::Agent => "ai",
            };
            input.insert(
                "messages".to_owned(),
                json!([{"type": kind, "content": content, "id": self.message_id}]),
            );
        }
        for part in &self.parts {
            if let Part::Data(Value::Object(data)) = part {
                input.extend(data.clone());
            }
        }
        Value::Object(input)
    }

    /// What an interrupted task is resumed with: the data part, or the text.
    pub(crate) fn resume_value(&self) -> Value {
        self.parts
            .iter()
            .find_map(|part| match part {
                Part::Data(data) => Some(data.clone()),
                Part::Text(_) => None,
            })
            .unwrap_or_else(|| {
                let text: Vec<&str> = self
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        Part::Text(text) => Some(text.as_str()),
                        Part::Data(_) => None,
                    })
                    .collect();
                json!(text.join("\n"))
            })
    }

    /// The message as the task's history shows it.
    pub(crate) fn as_message(&self, task_id: &str, context_id: Uuid) -> Message {
        Message {
            id: self.message_id.clone(),
            role: self.role,
            parts: self.parts.clone(),
            task_id: Some(task_id.to_owned()),
            context_id,
        }
    }
}

fn read_part(part: &Value) -> Result<Part, RpcError> {
    let Value::Object(part) = part else {
        return Err(RpcError::params("each message part must be an object"));
    };
    if let Some(text) = part.get("text") {
        return match text {
            Value::String(text) => Ok(Part::Text(text.clone())),
            _ => Err(RpcError::params("a text part's text must be a string")),
        };
    }
    if let Some(data) = part.get("data") {
        return match data {
            Value::Object(_) => Ok(Part::Data(integral_floats_as_integers(data.clone()))),
            _ => Err(RpcError::params(
                "a data part's data must be an object (its keys are the run's input)",
            )),
        };
    }
    if ["file", "raw", "url"]
        .iter()
        .any(|key| part.contains_key(*key))
    {
        return Err(RpcError(
            CONTENT_TYPE_NOT_SUPPORTED,
            "File parts are not supported: send text or data parts".into(),
        ));
    }
    Err(RpcError::params("a message part needs text or data"))
}

/// Data parts travel as protobuf `Struct`s, whose numbers are all doubles: `2` arrives
/// as `2.0`. A whole number is given back to the graph as an integer, as it was sent.
fn integral_floats_as_integers(value: Value) -> Value {
    match value {
        Value::Number(number) if number.is_f64() => {
            let float = number.as_f64().unwrap_or(f64::NAN);
            // Exactly representable integers only (|x| < 2^53), so nothing is rounded.
            let exact = float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0;
            if exact {
                #[allow(clippy::cast_possible_truncation)]
                let integer = float as i64;
                json!(integer)
            } else {
                Value::Number(number)
            }
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(integral_floats_as_integers).collect())
        }
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .map(|(key, value)| (key, integral_floats_as_integers(value)))
                .collect(),
        ),
        other => other,
    }
}

/// A LangChain message of the thread's state as an A2A message; tool calls' results
/// and system messages are not part of the conversation A2A shows.
pub(crate) fn from_state_message(message: &Value, context_id: Uuid) -> Option<Message> {
    let kind = message
        .get("type")
        .or_else(|| message.get("role"))
        .and_then(Value::as_str)?;
    let role = match kind {
        "human" | "user" | "HumanMessage" => Role::User,
        "ai" | "assistant" | "AIMessage" | "AIMessageChunk" => Role::Agent,
        _ => return None,
    };
    let parts = content_parts(message.get("content")?);
    let id = message
        .get("id")
        .and_then(Value::as_str)
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
    Some(Message {
        id,
        role,
        parts,
        task_id: None,
        context_id,
    })
}

/// A message's content as parts: a string is one text part; content blocks give their
/// text, in order.
pub(crate) fn content_parts(content: &Value) -> Vec<Part> {
    match content {
        Value::String(text) => vec![Part::Text(text.clone())],
        Value::Array(blocks) => {
            let text: String = blocks
                .iter()
                .filter_map(|block| match block {
                    Value::String(text) => Some(text.as_str()),
                    block => block.get("text").and_then(Value::as_str),
                })
                .collect();
            vec![Part::Text(text)]
        }
        Value::Null => Vec::new(),
        other => vec![Part::Text(other.to_string())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_in_data_parts_become_integers_and_fractions_stay() {
        let data = json!({"n": 2.0, "x": 0.5, "list": [1.0, -3.0], "deep": {"k": 1e3}, "s": "2.0"});
        assert_eq!(
            integral_floats_as_integers(data),
            json!({"n": 2, "x": 0.5, "list": [1, -3], "deep": {"k": 1000}, "s": "2.0"})
        );
        assert_eq!(integral_floats_as_integers(json!(1e300)), json!(1e300));
    }

    #[test]
    fn a_message_reads_the_same_in_both_dialects() {
        for message in [
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": {"n": 2.0}}]}),
            json!({"kind": "message", "messageId": "m", "role": "user",
                "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"n": 2}}]}),
        ] {
            let params = json!({"message": message});
            let incoming = Incoming::read(params.as_object().unwrap()).unwrap();
            assert_eq!(
                incoming.input(),
                json!({"messages": [{"type": "human", "content": "hi", "id": "m"}], "n": 2})
            );
        }
    }

    #[test]
    fn file_parts_are_refused_with_content_type_not_supported() {
        let params = json!({"message": {"role": "user", "parts": [{"url": "https://x/y.png"}]}});
        let error = Incoming::read(params.as_object().unwrap()).unwrap_err();
        assert_eq!(error.0, CONTENT_TYPE_NOT_SUPPORTED);
        let params = json!({"message": {"role": "user", "parts": [], "contextId": "not-a-uuid"}});
        assert_eq!(
            Incoming::read(params.as_object().unwrap()).unwrap_err().0,
            -32602
        );
    }

    #[test]
    fn a_1_0_status_update_is_wrapped_and_a_0_3_one_is_kind_tagged() {
        let status = Status {
            state: State::Canceled,
            message: None,
            timestamp: "t".into(),
        };
        let context = Uuid::nil();
        let v1 = status_event(Dialect::V1, "task", context, &status, true);
        assert_eq!(v1["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED");
        let v03 = status_event(Dialect::V03, "task", context, &status, true);
        assert_eq!(v03["kind"], "status-update");
        assert_eq!(v03["status"]["state"], "canceled");
        assert_eq!(v03["final"], true);
    }
}
