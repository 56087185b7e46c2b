//! Protocol v2, the thread-centric streaming surface of the Python SDK's
//! `client.threads.stream()`: command envelopes (`POST /threads/{id}/commands`, or
//! WebSocket text frames), their success and error answers, the event stream request
//! (`POST /threads/{id}/stream/events`) and the events themselves.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Config, Metadata, MultitaskStrategy};

/// A client command: `{"id": <int>, "method": "<name>", "params": {...}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ProtocolCommand {
    /// Client-assigned, echoed in the answer.
    pub id: i64,
    /// `run.start`, `input.respond`, …
    pub method: String,
    /// The method's parameters (`{}` when absent).
    pub params: Value,
}

impl ProtocolCommand {
    /// Reads an envelope; one whose `id` is not an integer or whose `method` is not a
    /// string is answered with the `invalid_argument` error (echoing the id if any).
    pub fn from_value(value: Value) -> Result<Self, ProtocolResponse> {
        let Value::Object(mut map) = value else {
            return Err(malformed(None));
        };
        let id = map.get("id").and_then(Value::as_i64);
        let method = match map.remove("method") {
            Some(Value::String(method)) => method,
            _ => return Err(malformed(id)),
        };
        let Some(id) = id else {
            return Err(malformed(None));
        };
        let params = match map.remove("params") {
            None | Some(Value::Null) => Value::Object(Metadata::new()),
            Some(params) => params,
        };
        Ok(Self { id, method, params })
    }
}

fn malformed(id: Option<i64>) -> ProtocolResponse {
    ProtocolResponse::error(
        id,
        ProtocolErrorCode::InvalidArgument,
        "Protocol commands must include an integer id and string method.",
    )
}

/// The error codes of an error answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolErrorCode {
    /// Bad parameters.
    InvalidArgument,
    /// A method the server does not serve.
    UnknownCommand,
    /// Anything else that failed.
    UnknownError,
    /// No run to act on.
    NoSuchRun,
    /// `subscription.unsubscribe` of an unknown id.
    NoSuchSubscription,
    /// An unknown namespace.
    NoSuchNamespace,
    /// `input.respond` to an interrupt that is not pending.
    NoSuchInterrupt,
    /// An unknown checkpoint.
    NoSuchCheckpoint,
    /// The caller may not do this.
    PermissionDenied,
    /// Known, but not served on this transport.
    NotSupported,
    /// A cap of the server would be exceeded (subscriptions on one socket).
    LimitExceeded,
    /// `subscription.reconnect` from a `since` older than the events still kept.
    ResumeGap,
}

/// `meta` of an answer: the last event sequence number the command's effects follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResponseMeta {
    /// Events with a greater `seq` reflect the command.
    pub applied_through_seq: u64,
}

/// The answer to a command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProtocolResponse {
    /// The command was applied.
    Success {
        /// The command's id.
        id: i64,
        /// What the method returns (`{"run_id": …}`, `{}`, …).
        result: Value,
        /// Sequence information.
        meta: ResponseMeta,
    },
    /// The command failed.
    Error {
        /// The command's id, `null` when the envelope had none.
        id: Option<i64>,
        /// What went wrong.
        error: ProtocolErrorCode,
        /// Client-facing text.
        message: String,
        /// The same text, for the HTTP error body readers of this service expect on
        /// a 4xx (a malformed envelope is answered with 400).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
}

impl ProtocolResponse {
    /// A success answer to command `id`.
    pub fn success(id: i64, result: Value) -> Self {
        Self::Success {
            id,
            result,
            meta: ResponseMeta::default(),
        }
    }

    /// An error answer.
    pub fn error(id: Option<i64>, error: ProtocolErrorCode, message: impl Into<String>) -> Self {
        Self::Error {
            id,
            error,
            message: message.into(),
            detail: None,
        }
    }

    /// The answer with its message repeated as `detail`, for an HTTP 4xx body.
    pub fn with_detail(mut self) -> Self {
        if let Self::Error {
            message, detail, ..
        } = &mut self
        {
            *detail = Some(message.clone());
        }
        self
    }

    /// True for an error answer.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error { .. })
    }
}

/// `run.start` parameters.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct RunStartParams {
    /// Assistant UUID or graph id.
    pub assistant_id: String,
    /// Graph input.
    #[serde(default)]
    pub input: Option<Value>,
    /// Run configuration; `configurable.checkpoint_id` forks from that checkpoint.
    #[serde(default)]
    pub config: Option<Config>,
    /// Run metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Tracing settings (accepted, not used).
    #[serde(default)]
    pub langsmith_tracer: Option<Value>,
    /// What to do when the thread is busy; `enqueue` when absent.
    #[serde(default, alias = "multitaskStrategy")]
    pub multitask_strategy: Option<MultitaskStrategy>,
}

/// One answer of `input.respond`.
#[derive(Clone, Debug, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct InputResponse {
    /// The interrupt answered.
    pub interrupt_id: String,
    /// Where it was raised (informative).
    #[serde(default)]
    pub namespace: Vec<String>,
    /// The answer.
    #[serde(default)]
    pub response: Value,
}

/// `input.respond` parameters: one answer (`interrupt_id`, `response`) or several
/// (`responses`), with optional state changes applied with the resume.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct InputRespondParams {
    /// The interrupt answered (single form).
    #[serde(default)]
    pub interrupt_id: Option<String>,
    /// Where it was raised (single form, informative).
    #[serde(default)]
    pub namespace: Vec<String>,
    /// The answer (single form).
    #[serde(default)]
    pub response: Value,
    /// Several answers (batch form).
    #[serde(default)]
    pub responses: Option<Vec<InputResponse>>,
    /// State update applied with the resume.
    #[serde(default)]
    pub update: Option<Value>,
    /// Node(s) to go to after the resume.
    #[serde(default)]
    pub goto: Option<Value>,
    /// Run configuration of the resuming run.
    #[serde(default)]
    pub config: Option<Config>,
    /// Run metadata of the resuming run.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

impl InputRespondParams {
    /// The answers, in either form; `None` when neither names an interrupt.
    pub fn answers(&self) -> Option<Vec<InputResponse>> {
        match (&self.responses, &self.interrupt_id) {
            (Some(responses), _) if !responses.is_empty() => Some(responses.clone()),
            (Some(_), _) => None,
            (None, Some(interrupt_id)) => Some(vec![InputResponse {
                interrupt_id: interrupt_id.clone(),
                namespace: self.namespace.clone(),
                response: self.response.clone(),
            }]),
            (None, None) => None,
        }
    }
}

/// `agent.getTree` parameters.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct AgentTreeParams {
    /// The run to describe; the thread's latest when absent.
    #[serde(default)]
    pub run_id: Option<String>,
}

/// `subscription.unsubscribe` parameters.
#[derive(Clone, Debug, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct UnsubscribeParams {
    /// The id `subscription.subscribe` returned.
    pub subscription_id: String,
}

/// What an event stream (or a WebSocket subscription) carries: the SSE request body
/// and the `subscription.subscribe` parameters.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct EventStreamRequest {
    /// Channels: `values`, `updates`, `messages`, `tools`, `lifecycle`, `input`,
    /// `tasks`, `checkpoints`, `custom`, `custom:<name>`; at least one.
    #[serde(default)]
    pub channels: Vec<String>,
    /// Only these namespace subtrees (a segment without `:` matches any task id).
    #[serde(default)]
    pub namespaces: Option<Vec<Vec<String>>>,
    /// How many levels below those namespaces.
    #[serde(default)]
    pub depth: Option<u32>,
    /// Replay only events with a greater `seq`.
    #[serde(default)]
    pub since: Option<u64>,
}

/// The `type` of an event: always `event`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// The only value.
    #[default]
    Event,
}

/// One event of a thread's stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProtocolEvent {
    /// Always `event`.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// Stable across connections: clients de-duplicate on it.
    pub event_id: String,
    /// Position in the connection's stream, from 1; `since` counts in it.
    pub seq: u64,
    /// `lifecycle`, `values`, `updates`, `messages`, `tools`, `tasks`, `custom`,
    /// `input.requested`.
    pub method: String,
    /// Where and what.
    pub params: EventParams,
}

/// The `params` of an event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventParams {
    /// `[]` for the root graph, else one `<node>:<task id>` segment per subgraph.
    pub namespace: Vec<String>,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// Per method.
    pub data: Value,
    /// The node that produced it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_envelope_needs_an_integer_id_and_a_string_method() {
        let command = ProtocolCommand::from_value(json!({"id": 3, "method": "run.start"})).unwrap();
        assert_eq!(command.params, json!({}));
        for bad in [
            json!({"id": "3", "method": "run.start"}),
            json!({"id": 3, "method": 4}),
            json!([1]),
        ] {
            let answer = ProtocolCommand::from_value(bad).unwrap_err();
            assert!(answer.is_error());
        }
        let answer = ProtocolCommand::from_value(json!({"id": 7})).unwrap_err();
        assert_eq!(
            serde_json::to_value(answer).unwrap(),
            json!({"type": "error", "id": 7, "error": "invalid_argument",
                   "message": "Protocol commands must include an integer id and string method."})
        );
    }

    #[test]
    fn answers_have_the_peer_shape() {
        let success = ProtocolResponse::success(1, json!({"run_id": "r"}));
        assert_eq!(
            serde_json::to_value(success).unwrap(),
            json!({"type": "success", "id": 1, "result": {"run_id": "r"},
                   "meta": {"applied_through_seq": 0}})
        );
    }

    #[test]
    fn input_respond_takes_either_form() {
        let one: InputRespondParams =
            serde_json::from_value(json!({"interrupt_id": "i", "namespace": [], "response": true}))
                .unwrap();
        assert_eq!(one.answers().unwrap()[0].response, json!(true));
        let many: InputRespondParams = serde_json::from_value(
            json!({"responses": [{"interrupt_id": "a", "response": 1}, {"interrupt_id": "b"}]}),
        )
        .unwrap();
        assert_eq!(many.answers().unwrap().len(), 2);
        assert_eq!(InputRespondParams::default().answers(), None);
    }
}
