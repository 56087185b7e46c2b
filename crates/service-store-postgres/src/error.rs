//! Errors of the driver's own calls (connect, migrate) and the mapping of database
//! errors onto the store's error kinds.

use service_store::text::nul_refused;
use service_store::{ErrorKind, StoreError};
use tokio_postgres::error::SqlState;

/// A failure to connect, configure or migrate.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// Bad options (url, schema name, pool size).
    #[error("{0}")]
    Config(String),
    /// The database refused or failed a call.
    #[error("database error: {}", describe(.0))]
    Database(#[from] tokio_postgres::Error),
    /// A migration failed; the ledger row was not written and the next boot retries.
    #[error("migration {version} ({name}) failed: {}", describe(.source))]
    Migration {
        /// Migration number.
        version: i32,
        /// File name.
        name: String,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
}

/// A database error with its SQLSTATE and server message (tokio-postgres' own
/// Display says only "db error"), or its cause chain for connection failures.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{}: {}", db.code().code(), db.message());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Maps a database error to a store error: text the database cannot hold (a NUL in
/// `text` or `jsonb`) is invalid, as every driver refuses it; lost connections,
/// timeouts and serialization failures are transient; everything else is unexpected.
pub(crate) fn store_error(error: tokio_postgres::Error) -> StoreError {
    if matches!(
        error.code(),
        Some(&SqlState::UNTRANSLATABLE_CHARACTER | &SqlState::CHARACTER_NOT_IN_REPERTOIRE)
    ) {
        return StoreError::invalid(nul_refused("text")).with_source(error);
    }
    let transient = match error.code() {
        Some(code) => {
            *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::QUERY_CANCELED
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::TOO_MANY_CONNECTIONS
                || code.code().starts_with("08")
        }
        None => true,
    };
    let message = format!("database error: {}", describe(&error));
    let kind = if transient {
        ErrorKind::Transient
    } else {
        ErrorKind::Unexpected
    };
    StoreError::new(kind, message).with_source(error)
}

/// Maps a pool error (no free connection in time, connect failure) to a transient
/// store error.
pub(crate) fn pool_error(error: deadpool_postgres::PoolError) -> StoreError {
    StoreError::transient(format!("database pool: {error}")).with_source(error)
}

/// True when `error` is a unique violation.
pub(crate) fn is_unique_violation(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// True when `error` is a foreign-key violation.
pub(crate) fn is_foreign_key_violation(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION)
}
