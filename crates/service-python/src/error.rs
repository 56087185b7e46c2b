//! The bridge's own errors, and Python exceptions as graph errors.

use serde_json::Value;
use service_graph::GraphError;
use service_types::RunError;

/// Why the bridge could not start.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The interpreter, LangGraph or the protocol handshake failed (the message
    /// names the language).
    #[error("{0}")]
    Boot(String),
}

/// A Python exception (a RunError as bridge.py writes it) as the graph error the
/// engine maps: LangGraph's rejections of bad input are the caller's fault (400);
/// anything else fails the run with the exception's type, message, stack and causes.
pub(crate) fn python_error(error: &Value) -> GraphError {
    let error = RunError::from_value(error);
    match error.error.as_str() {
        "InvalidUpdateError" | "EmptyInputError" => GraphError::InvalidInput(error.message),
        "CancelledError" => GraphError::Cancelled,
        _ => GraphError::Other(Box::new(error)),
    }
}
