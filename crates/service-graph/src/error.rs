use service_types::RunError;

/// Everything an [`AgentGraph`](crate::AgentGraph), a resolver, a checkpointer or a
/// long-term store can fail with. The HTTP layer maps the kinds to statuses; a run's
/// [`RunError`] comes from [`GraphError::to_run_error`].
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// An optional agent method is not implemented (HTTP 422 `agent_capability_missing`).
    #[error("The agent does not implement {capability}")]
    CapabilityMissing {
        /// The method name as SPEC names it (see [`crate::capability`]).
        capability: &'static str,
    },
    /// The caller sent something the graph cannot accept (HTTP 400), e.g. an
    /// unknown `as_node`: `Node <x> does not exist`.
    #[error("{0}")]
    InvalidInput(String),
    /// A thing the caller named does not exist (e.g. a checkpoint id, a graph id).
    #[error("{0}")]
    NotFound(String),
    /// The run was cancelled through its [`RunContext`](crate::RunContext) token.
    #[error("Run was cancelled")]
    Cancelled,
    /// The run took more supersteps than its recursion limit allows.
    #[error(
        "Recursion limit of {limit} reached without hitting a stop condition. You can increase the limit by setting the `recursion_limit` config key."
    )]
    RecursionLimit {
        /// The limit in force.
        limit: u32,
    },
    /// A node failed; `error` keeps its cause chain.
    #[error("Node {node} failed: {error}")]
    NodeFailed {
        /// The node that failed.
        node: String,
        /// What it failed with (boxed: keeps `Result<_, GraphError>` small).
        error: Box<RunError>,
    },
    /// A graph could not be loaded (HTTP 500 `graph_load_failed`).
    #[error("Graph {graph_id} failed to load: {reason}")]
    LoadFailed {
        /// The graph id.
        graph_id: String,
        /// Why.
        reason: String,
    },
    /// The checkpointer failed (see [`GraphError::checkpointer`]).
    #[error("Checkpointer error: {message}")]
    Checkpointer {
        /// What failed.
        message: String,
        /// The error it failed with (database, decoder), kept for the log's cause chain.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The long-term store failed (see [`GraphError::store`]).
    #[error("Store error: {message}")]
    Store {
        /// What failed.
        message: String,
        /// The error it failed with, kept for the log's cause chain.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Anything else, already shaped as a RunError.
    #[error("{0}")]
    Other(Box<RunError>),
}

impl GraphError {
    /// The RunError a run that failed with this error reports. A node failure is
    /// reported as the node's own error (its name, message and cause chain).
    pub fn to_run_error(&self) -> RunError {
        let name = match self {
            Self::NodeFailed { error, .. } | Self::Other(error) => return (**error).clone(),
            Self::CapabilityMissing { .. } => "CapabilityMissingError",
            Self::InvalidInput(_) => "InvalidUpdateError",
            Self::NotFound(_) => "NotFoundError",
            Self::Cancelled => "CancelledError",
            Self::RecursionLimit { .. } => "GraphRecursionError",
            Self::LoadFailed { .. } => "GraphLoadError",
            Self::Checkpointer { .. } => "CheckpointerError",
            Self::Store { .. } => "StoreError",
        };
        RunError::new(name, self.to_string())
    }

    /// A checkpointer failure of its own.
    pub fn checkpointer(message: impl Into<String>) -> Self {
        Self::Checkpointer {
            message: message.into(),
            source: None,
        }
    }

    /// A long-term store failure of its own.
    pub fn store(message: impl Into<String>) -> Self {
        Self::Store {
            message: message.into(),
            source: None,
        }
    }

    /// A long-term store failure caused by `source`, which the error keeps.
    pub fn store_caused_by(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Store {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A checkpointer failure caused by `source`, which the error keeps.
    pub fn checkpointer_caused_by(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Checkpointer {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The error an optional method reports when the agent lacks it.
    pub fn missing(capability: &'static str) -> Self {
        Self::CapabilityMissing { capability }
    }
}

impl From<RunError> for GraphError {
    fn from(error: RunError) -> Self {
        Self::Other(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_failure_reports_the_node_error_with_its_cause_chain() {
        let cause = RunError::new("RuntimeError", "root cause");
        let error = GraphError::NodeFailed {
            node: "explode".into(),
            error: Box::new(RunError::new("ValueError", "boom").with_cause(cause)),
        };
        let run_error = error.to_run_error();
        assert_eq!(run_error.message, "boom");
        assert_eq!(
            run_error.chain_summary(),
            "ValueError: boom; caused by RuntimeError: root cause"
        );
    }

    #[test]
    fn capability_missing_names_the_method() {
        let error = GraphError::missing(crate::capability::UPDATE_STATE);
        assert_eq!(
            error.to_string(),
            "The agent does not implement updateState"
        );
    }

    #[test]
    fn a_checkpointer_error_keeps_its_cause_out_of_its_message() {
        let cause = std::io::Error::other("connection reset");
        let error = GraphError::checkpointer_caused_by("database pool: timed out", cause);
        assert_eq!(
            error.to_string(),
            "Checkpointer error: database pool: timed out"
        );
        let source = std::error::Error::source(&error).expect("the cause is kept");
        assert_eq!(source.to_string(), "connection reset");
        let run_error = error.to_run_error();
        assert_eq!(run_error.error, "CheckpointerError");
        assert_eq!(
            run_error.message,
            "Checkpointer error: database pool: timed out"
        );
    }

    #[test]
    fn recursion_limit_is_a_graph_recursion_error() {
        let error = GraphError::RecursionLimit { limit: 3 }.to_run_error();
        assert_eq!(error.error, "GraphRecursionError");
        assert!(error.message.starts_with("Recursion limit of 3 reached"));
    }
}
