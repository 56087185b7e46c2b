//! What every repository shares: the store pool, the clock, page bounds, a small SQL
//! builder with numbered parameters, and column conversions.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Object, Pool};
use serde_json::Value;
use service_store::{Clock, PageLimits, StoreError, StoreResult};
use service_types::{Metadata, Timestamp};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::pool_error;

/// The repository object behind every store trait.
pub(crate) struct Db {
    pub(crate) pool: Pool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) limits: PageLimits,
    /// Dropped after the pool (field order), e.g. a test schema guard.
    pub(crate) _guard: Option<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Db")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// A pooled connection.
    pub(crate) async fn client(&self) -> StoreResult<Object> {
        self.pool.get().await.map_err(pool_error)
    }

    /// The clock's now.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

/// A one-row `FROM` item that makes the statement's own transaction commit without
/// waiting for its WAL to reach disk. Only for a run's intermediate writes (its claim,
/// checkpoints and task writes): the run ends with a synchronous commit (its settle, the
/// thread mirror), and WAL is flushed in order, so that commit makes them durable too
/// before anyone is told the run finished. A database crash before then loses at most
/// the unfinished run's progress, which is then recovered as lost or re-run.
pub(crate) const ASYNC_COMMIT: &str =
    "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";

/// SQL text fixed for the life of the process: a `format!` of constants (a local would
/// not compile inside the static), formatted once. For the `*_cached` calls of
/// [`Cached`].
macro_rules! static_sql {
    ($text:literal) => {{
        static TEXT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!($text));
        TEXT.as_str()
    }};
}
pub(crate) use static_sql;

/// Static statements through the connection's statement cache: one round trip per call
/// instead of a prepare and then an execute. Only `'static` SQL goes through here, so
/// each connection caches a bounded set; SQL built per request takes the uncached path.
#[async_trait]
pub(crate) trait Cached: GenericClient {
    async fn execute_cached(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.execute(&statement, params).await
    }

    async fn query_cached(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query(&statement, params).await
    }

    async fn query_one_cached(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query_one(&statement, params).await
    }

    async fn query_opt_cached(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query_opt(&statement, params).await
    }
}

impl<T: GenericClient + ?Sized> Cached for T {}

/// A parameter value.
pub(crate) type Param = Box<dyn ToSql + Sync + Send>;

/// A statement under construction: text plus numbered parameters.
#[derive(Default)]
pub(crate) struct Sql {
    pub(crate) text: String,
    params: Vec<Param>,
}

impl Sql {
    /// A statement starting with `text`.
    pub(crate) fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            params: Vec::new(),
        }
    }

    /// Binds `value` and returns its placeholder (`$n`).
    pub(crate) fn bind(&mut self, value: impl ToSql + Sync + Send + 'static) -> String {
        self.params.push(Box::new(value));
        format!("${}", self.params.len())
    }

    /// Appends text.
    pub(crate) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// The parameters as tokio-postgres takes them.
    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|param| param.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

/// Appends ` WHERE a AND b ...` (nothing when `conditions` is empty).
pub(crate) fn push_where(sql: &mut Sql, conditions: &[String]) {
    if !conditions.is_empty() {
        sql.push(" WHERE ");
        sql.push(&conditions.join(" AND "));
    }
}

/// A timestamp as a column value.
pub(crate) fn at(ts: Timestamp) -> DateTime<Utc> {
    ts.as_datetime()
}

/// A column value as a timestamp.
pub(crate) fn ts(at: DateTime<Utc>) -> Timestamp {
    Timestamp::new(at)
}

/// A JSON object column (metadata, context...); a non-object is a corrupt row.
pub(crate) fn object(value: Value, column: &str) -> StoreResult<Metadata> {
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Metadata::new()),
        other => Err(StoreError::unexpected(format!(
            "column {column} holds {other}, not an object"
        ))),
    }
}

/// Decodes a JSON column into a typed value.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(value: Value, column: &str) -> StoreResult<T> {
    serde_json::from_value(value).map_err(|error| {
        StoreError::unexpected(format!("corrupt column {column}: {error}")).with_source(error)
    })
}

/// Encodes a typed value for a JSON column.
pub(crate) fn encode<T: serde::Serialize>(value: &T) -> StoreResult<Value> {
    serde_json::to_value(value).map_err(|error| {
        StoreError::unexpected(format!("cannot encode a column: {error}")).with_source(error)
    })
}

/// A string-valued enum column through its serde name.
pub(crate) fn enum_text<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    match encode(value)? {
        Value::String(text) => Ok(text),
        other => Err(StoreError::unexpected(format!(
            "{other} is not an enum name"
        ))),
    }
}

/// A string-valued enum column back to its type.
pub(crate) fn enum_from<T: serde::de::DeserializeOwned>(
    text: String,
    column: &str,
) -> StoreResult<T> {
    decode(Value::String(text), column)
}

/// `SQL` direction keywords.
pub(crate) fn direction(order: service_types::SortOrder) -> &'static str {
    match order {
        service_types::SortOrder::Asc => "ASC",
        service_types::SortOrder::Desc => "DESC",
    }
}

/// A row count as `i64` for LIMIT/OFFSET.
pub(crate) fn count(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
