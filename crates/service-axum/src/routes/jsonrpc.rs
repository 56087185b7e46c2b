//! JSON-RPC 2.0 framing shared by the MCP and A2A endpoints: one request per POST,
//! answers and errors in the shape both protocols' clients read.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use service_engine::{EngineError, ErrorKind};

use crate::json::Json;

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error answer.
pub(crate) fn rpc_error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

pub(crate) fn rpc_result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A request-level failure: the HTTP status and the JSON-RPC error sent with it.
pub(crate) fn refused(status: StatusCode, code: i64, message: &str) -> Response {
    (status, Json(rpc_error(Value::Null, code, message))).into_response()
}

/// A method's failure, answered in a 200 JSON-RPC response.
#[derive(Debug)]
pub(crate) struct RpcError(pub(crate) i64, pub(crate) String);

impl RpcError {
    pub(crate) fn params(message: impl Into<String>) -> Self {
        Self(INVALID_PARAMS, message.into())
    }
}

impl From<EngineError> for RpcError {
    fn from(error: EngineError) -> Self {
        let code = match error.kind {
            ErrorKind::BadRequest | ErrorKind::Unprocessable | ErrorKind::NotFound => {
                INVALID_PARAMS
            }
            _ => INTERNAL_ERROR,
        };
        Self(code, error.message.clone())
    }
}

/// What a POST carried.
pub(crate) enum Incoming {
    /// A request: it gets an answer.
    Call {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// A notification, or a response to a request of ours (these servers send none,
    /// so nothing awaits it).
    NoAnswer,
}

/// The JSON-RPC message in `bytes`, or why it is none (answered with a 400).
pub(crate) fn parse(bytes: &[u8]) -> Result<Incoming, RpcError> {
    let invalid = |why: &str| RpcError(INVALID_REQUEST, format!("Invalid Request: {why}"));
    let Ok(message) = serde_json::from_slice::<Value>(bytes) else {
        return Err(RpcError(PARSE_ERROR, "Parse error".into()));
    };
    // Batches left MCP in 2025-06-18, and A2A never had them.
    let Value::Object(mut message) = message else {
        return Err(invalid("one JSON-RPC object per POST"));
    };
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    let id = message.remove("id");
    if id
        .as_ref()
        .is_some_and(|id| !(id.is_string() || id.is_i64() || id.is_u64()))
    {
        return Err(invalid("id must be a string or an integer"));
    }
    match (message.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Call {
            id,
            method,
            params: message.remove("params"),
        }),
        (Some(Value::String(_)), None) => Ok(Incoming::NoAnswer),
        (Some(_), _) => Err(invalid("method must be a string")),
        (None, Some(_)) if message.contains_key("result") || message.contains_key("error") => {
            Ok(Incoming::NoAnswer)
        }
        (None, _) => Err(invalid("no method")),
    }
}
