use std::fmt;

/// What went wrong, independent of transport; only the HTTP layer maps it to a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The addressed row does not exist.
    NotFound,
    /// The row exists, or its state forbids the change.
    Conflict,
    /// The request is malformed (bad filter, namespace, schedule, ttl...).
    Invalid,
    /// The driver does not implement this operation.
    Unsupported,
    /// A retry may succeed (lost connection, serialization failure).
    Transient,
    /// A row the caller built on changed since it read it (see `NewRun::assistant_as_read`);
    /// read again and retry.
    Stale,
    /// A bug or a corrupt row.
    Unexpected,
    /// The store adapter the deployment configured (`store.adapter`) failed: the
    /// message is its own account (which adapter, its error's class and message),
    /// for the client as for the log.
    Adapter,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::NotFound => "not found",
            Self::Conflict => "conflict",
            Self::Invalid => "invalid",
            Self::Unsupported => "unsupported",
            Self::Transient => "transient",
            Self::Stale => "stale",
            Self::Unexpected => "unexpected",
            Self::Adapter => "adapter failed",
        };
        f.write_str(name)
    }
}

/// The one error type of the store layer: a kind, a client-presentable message, and
/// the error that caused it, if any (database, decoder), kept for the log's cause chain.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct StoreError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Human text; the contract's wording where one exists.
    pub message: String,
    /// The underlying error, reported through `std::error::Error::source`.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Result of every store call.
pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `source`.
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// A missing row.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// A duplicate or a forbidden state change.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    /// A row the caller built on changed since it read it.
    pub fn stale(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Stale, message)
    }

    /// A malformed request.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    /// An operation this driver lacks.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    /// A failure a retry may cure.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transient, message)
    }

    /// A bug or corrupt data.
    pub fn unexpected(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unexpected, message)
    }

    /// The configured store adapter failed, as `message` tells.
    pub fn adapter(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Adapter, message)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_store_error_keeps_its_cause_and_shows_only_its_message() {
        let cause = std::io::Error::other("connection reset");
        let error = StoreError::transient("database error: connection reset").with_source(cause);
        assert_eq!(error.to_string(), "database error: connection reset");
        let source = error.source().expect("the cause is kept");
        assert_eq!(source.to_string(), "connection reset");
    }

    #[test]
    fn a_store_error_of_its_own_has_no_cause() {
        assert!(StoreError::not_found("Run not found").source().is_none());
    }
}
