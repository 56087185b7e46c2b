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
use tokio_postgres::types::{FromSql, ToSql, Type};
use tokio_postgres::{Row, Statement};

use crate::error::{describe, pool_error};

/// The repository object behind every store trait.
pub(crate) struct Db {
    pub(crate) pool: Pool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) limits: PageLimits,
    /// The semantic index, when configured.
    pub(crate) vectors: Option<crate::vectors::Vectors>,
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
/// instead of a prepare and then an execute. Only `'static` SQL goes through here; SQL
/// built per request goes through [`Built`], which bounds the cache.
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

/// How many statements a connection's cache holds before it is emptied: the static
/// ones are under a hundred, and the shapes a statement built at run time takes (a
/// store filter's keys and operators, a prefix's length) are few in practice but
/// unbounded in principle, and each holds memory on both ends (the database keeps its
/// parse tree and plan). Emptied, it refills with what is still used (a prepare each).
const CACHED_STATEMENTS_MAX: usize = 256;

/// Statements built at run time ([`Sql`]) through the connection's statement cache, so
/// PostgreSQL parses and plans each shape once per connection instead of at every call
/// (a filtered store search spent more time planning than executing).
#[async_trait]
pub(crate) trait Built {
    async fn query_built(&self, sql: &Sql) -> Result<Vec<Row>, tokio_postgres::Error>;
    async fn query_built_one(&self, sql: &Sql) -> Result<Row, tokio_postgres::Error>;
}

#[async_trait]
impl Built for Object {
    async fn query_built(&self, sql: &Sql) -> Result<Vec<Row>, tokio_postgres::Error> {
        let statement = prepared(self, sql).await?;
        self.query(&statement, &sql.values()).await
    }

    async fn query_built_one(&self, sql: &Sql) -> Result<Row, tokio_postgres::Error> {
        let statement = prepared(self, sql).await?;
        self.query_one(&statement, &sql.values()).await
    }
}

/// `sql` prepared from `client`'s cache, which is emptied first when full (a client
/// sending ever new shapes must not grow it without bound).
async fn prepared(client: &Object, sql: &Sql) -> Result<Statement, tokio_postgres::Error> {
    if client.statement_cache.size() >= CACHED_STATEMENTS_MAX {
        client.statement_cache.clear();
    }
    client.prepare_typed_cached(&sql.text, &sql.types()).await
}

/// A value a statement built at run time binds, and the type PostgreSQL takes it as.
/// Sending the types with the statement lets it go in one round trip (parse, bind and
/// execute together) instead of a describe first to learn them.
pub(crate) trait Bindable: ToSql + Sync + Send + 'static {
    const TYPE: Type;
}

macro_rules! bindable {
    ($($rust:ty => $pg:ident),* $(,)?) => {
        $(impl Bindable for $rust {
            const TYPE: Type = Type::$pg;
        })*
    };
}

bindable! {
    String => TEXT,
    bool => BOOL,
    i32 => INT4,
    i64 => INT8,
    uuid::Uuid => UUID,
    Vec<uuid::Uuid> => UUID_ARRAY,
    DateTime<Utc> => TIMESTAMPTZ,
    Value => JSONB,
    Vec<Value> => JSONB_ARRAY,
}

/// A statement under construction: text plus numbered parameters.
#[derive(Default)]
pub(crate) struct Sql {
    pub(crate) text: String,
    params: Vec<(Box<dyn ToSql + Sync + Send>, Type)>,
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
    pub(crate) fn bind<T: Bindable>(&mut self, value: T) -> String {
        self.params.push((Box::new(value), T::TYPE));
        format!("${}", self.params.len())
    }

    /// Appends text.
    pub(crate) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// The parameters' types, in order.
    fn types(&self) -> Vec<Type> {
        self.params.iter().map(|(_, pg)| pg.clone()).collect()
    }

    /// The parameters' values, in order, for a prepared statement.
    fn values(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|(value, _)| value.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }

    /// The parameters with their types, as tokio-postgres's `query_typed` takes them.
    pub(crate) fn params(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.params
            .iter()
            .map(|(value, pg)| (value.as_ref() as &(dyn ToSql + Sync), pg.clone()))
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

/// A row read as part of `of` (a table, or what a statement returns): a column that is
/// missing or does not decode is an `Unexpected` error naming it and `of`, keeping the
/// driver's error as its source, never a panic. `try_get` is the lookup `Row::get`
/// makes, so reading through here costs what `get` did.
#[derive(Clone, Copy)]
pub(crate) struct Columns<'a> {
    row: &'a Row,
    of: &'static str,
}

impl<'a> Columns<'a> {
    /// Reads `row` as part of `of`.
    pub(crate) fn of(row: &'a Row, of: &'static str) -> Self {
        Self { row, of }
    }

    /// The column named `name`.
    pub(crate) fn column<T: FromSql<'a>>(self, name: &str) -> StoreResult<T> {
        self.row
            .try_get(name)
            .map_err(|error| self.error(name, error))
    }

    /// The column at `index`, for a statement that returns columns of the same name
    /// from two relations.
    pub(crate) fn column_at<T: FromSql<'a>>(self, index: usize) -> StoreResult<T> {
        self.row.try_get(index).map_err(|error| {
            let name = match self.row.columns().get(index) {
                Some(column) => column.name().to_owned(),
                None => format!("#{index}"),
            };
            self.error(&name, error)
        })
    }

    #[cold]
    fn error(self, name: &str, error: tokio_postgres::Error) -> StoreError {
        let message = format!("column \"{name}\" of {}: {}", self.of, describe(&error));
        StoreError::unexpected(message).with_source(error)
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

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use service_store::ErrorKind;
    use tokio_postgres::{NoTls, Row};

    use super::{Built, CACHED_STATEMENTS_MAX, Columns, Sql};

    /// The one row `sql` returns on the test database (no schema needed).
    async fn row(sql: &str) -> Row {
        let url = std::env::var("TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let (client, connection) = tokio_postgres::connect(&url, NoTls)
            .await
            .expect("PostgreSQL must be reachable");
        tokio::spawn(connection);
        client
            .query_one(sql, &[])
            .await
            .expect("the statement runs")
    }

    /// A pooled connection to the test database.
    async fn pooled() -> deadpool_postgres::Object {
        let url = std::env::var("TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let manager = deadpool_postgres::Manager::new(url.parse().expect("a URL"), NoTls);
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(1)
            .build()
            .expect("a pool");
        pool.get().await.expect("PostgreSQL must be reachable")
    }

    #[tokio::test]
    async fn statements_built_at_run_time_are_cached_per_shape_within_a_bound() {
        let client = pooled().await;
        let shape = |n: usize| {
            let mut sql = Sql::new("");
            let p = sql.bind(n as i64);
            sql.push(&format!("SELECT {p}::int8 + {n} AS total"));
            sql
        };
        for _ in 0..3 {
            let row = client.query_built_one(&shape(1)).await.expect("runs");
            let total: i64 = Columns::of(&row, "a test").column("total").unwrap();
            assert_eq!(total, 2);
        }
        assert_eq!(client.statement_cache.size(), 1, "one shape, one statement");
        // Ever new shapes (a hostile client's filters over ever new keys) keep the
        // cache bounded, and every statement still answers.
        for n in 0..CACHED_STATEMENTS_MAX + 10 {
            let rows = client.query_built(&shape(n)).await.expect("runs");
            let total: i64 = Columns::of(&rows[0], "a test").column("total").unwrap();
            assert_eq!(total, (2 * n) as i64);
            assert!(client.statement_cache.size() <= CACHED_STATEMENTS_MAX);
        }
    }

    #[tokio::test]
    async fn a_column_that_does_not_decode_is_an_unexpected_error_naming_it() {
        let row = row("SELECT 'not json'::text AS kwargs").await;
        let error = Columns::of(&row, "runs")
            .column::<Value>("kwargs")
            .expect_err("text is not JSON");
        assert_eq!(error.kind, ErrorKind::Unexpected);
        assert!(
            error.message.starts_with("column \"kwargs\" of runs: "),
            "{}",
            error.message
        );
        let source = std::error::Error::source(&error).expect("the driver's error is kept");
        assert!(source.is::<tokio_postgres::Error>());
    }

    #[tokio::test]
    async fn a_column_read_by_position_is_named_in_its_error() {
        let row = row("SELECT 1::int4 AS version, 'idle'::text AS status").await;
        let error = Columns::of(&row, "threads")
            .column_at::<i64>(1)
            .expect_err("text is not a bigint");
        assert!(
            error.message.starts_with("column \"status\" of threads: "),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn a_missing_column_is_an_unexpected_error_naming_it() {
        let row = row("SELECT 1::int4 AS version").await;
        let columns = Columns::of(&row, "assistants");
        let by_name = columns
            .column::<i32>("graph_id")
            .expect_err("no such column");
        assert_eq!(by_name.kind, ErrorKind::Unexpected);
        assert!(
            by_name
                .message
                .starts_with("column \"graph_id\" of assistants: ")
        );
        let by_position = columns.column_at::<i32>(3).expect_err("no such column");
        assert!(
            by_position
                .message
                .starts_with("column \"#3\" of assistants: ")
        );
    }

    #[tokio::test]
    async fn a_column_that_decodes_reads_as_before() {
        let row = row("SELECT 7::int8 AS version, NULL::text AS name").await;
        let columns = Columns::of(&row, "assistants");
        assert_eq!(columns.column::<i64>("version").ok(), Some(7));
        assert_eq!(columns.column_at::<Option<String>>(1).ok(), Some(None));
    }
}
