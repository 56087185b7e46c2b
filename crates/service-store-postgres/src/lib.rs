//! The PostgreSQL driver of the service store, its migrator and its checkpoint saver.
//!
//! [`PostgresStore::connect`] applies the numbered migrations in `migrations/` (see
//! [`migrate`]) and builds three connection pools: the store pool behind every
//! repository, the checkpointer pool behind [`PostgresSaver`], and the execution
//! claim pool the engine uses to hold one connection per executing run. Filters,
//! JSONB containment (`@>`, GIN indexes), sorting and paging run in SQL; every
//! timestamp comes from the injected [`Clock`] and is passed as a parameter (the
//! database's `now()` is never used), so a test's `ManualClock` drives TTLs,
//! schedules and ordering. With [`PgOptions::index`], item vectors live in pgvector
//! (set up at connect, see `vectors`), and a query ranks by exact cosine distance.

mod assistants;
mod checkpoint;
mod crons;
mod db;
mod deliveries;
mod error;
mod filter;
mod idempotency;
mod items;
pub mod migrate;
#[doc(hidden)]
pub mod plans;
mod runs;
mod threads;
mod vectors;

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use service_store::{Clock, IndexSpec, PageLimits, Store, StoreHealth, StoreParts, StoreResult};
use tokio_postgres::NoTls;

pub use checkpoint::PostgresSaver;
pub use error::PgError;

use db::Db;

/// Connection and pool options (the DB_* knobs plus SERVICE_MAX_PAGE_SIZE).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgOptions {
    /// `postgres://user:pass@host:port/db` (or a key=value connection string).
    pub url: String,
    /// Connections per pool (DB_POOL_MAX); each of the three pools gets this many.
    pub pool_max: usize,
    /// Wait for a free connection (DB_CONNECTION_TIMEOUT_MS); `None` waits forever.
    pub connection_timeout: Option<Duration>,
    /// Close pooled connections idle this long (DB_IDLE_TIMEOUT_MS); `None` keeps them.
    pub idle_timeout: Option<Duration>,
    /// Server-side limit of one statement (DB_STATEMENT_TIMEOUT_MS); `None` is off.
    pub statement_timeout: Option<Duration>,
    /// The largest page any list returns (SERVICE_MAX_PAGE_SIZE).
    pub max_page_size: usize,
    /// Schema holding the tables (created if missing); `None` uses the server's
    /// search_path (normally `public`).
    pub schema: Option<String>,
    /// The semantic index (`store.index`): pgvector and the vectors table are set up
    /// at connect only when this is set.
    pub index: Option<IndexSpec>,
}

impl PgOptions {
    /// Options for `url` with SPEC's defaults: 10 connections per pool, 30 s
    /// connection wait, 10 s idle lifetime, 30 s statement timeout, pages of 1000.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            pool_max: 10,
            connection_timeout: Some(Duration::from_secs(30)),
            idle_timeout: Some(Duration::from_secs(10)),
            statement_timeout: Some(Duration::from_secs(30)),
            max_page_size: service_store::page::DEFAULT_MAX_PAGE_SIZE,
            schema: None,
            index: None,
        }
    }

    /// The tokio-postgres configuration every pooled connection uses.
    fn pg_config(&self, application_name: &str) -> Result<tokio_postgres::Config, PgError> {
        let mut config: tokio_postgres::Config = self
            .url
            .parse()
            .map_err(|error| PgError::Config(format!("invalid database url: {error}")))?;
        let mut settings = Vec::new();
        if let Some(timeout) = self.statement_timeout {
            settings.push(format!("-c statement_timeout={}", timeout.as_millis()));
        }
        if let Some(schema) = &self.schema {
            validate_schema_name(schema)?;
            settings.push(format!("-c search_path={schema}"));
        }
        // Keep options the URL already carries.
        if let Some(existing) = config.get_options() {
            settings.insert(0, existing.to_owned());
        }
        if !settings.is_empty() {
            config.options(settings.join(" "));
        }
        if config.get_application_name().is_none() {
            config.application_name(application_name);
        }
        if let Some(timeout) = self.connection_timeout {
            config.connect_timeout(timeout);
        }
        Ok(config)
    }
}

/// Schema names go into `-c search_path=` and identifiers: letters, digits, `_`.
fn validate_schema_name(schema: &str) -> Result<(), PgError> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !schema.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(PgError::Config(format!(
            "invalid schema name {schema:?}: use letters, digits and underscores"
        )))
    }
}

/// The three pools of one instance.
#[derive(Clone, Debug)]
pub struct PgPools {
    /// Behind every store repository.
    pub store: Pool,
    /// Behind the checkpoint saver.
    pub checkpointer: Pool,
    /// One connection per executing run (the per-thread execution claim); size it at
    /// least the run concurrency.
    pub claim: Pool,
}

/// A connected, migrated PostgreSQL backend: the [`Store`], the checkpoint saver and
/// the pools.
#[derive(Clone)]
pub struct PostgresStore {
    store: Store,
    saver: Arc<PostgresSaver>,
    pools: PgPools,
    options: PgOptions,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.options.schema)
            .field("pool_max", &self.options.pool_max)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Applies pending migrations (serialized across instances by an advisory lock)
    /// and builds the three pools. Connections open lazily, except the one the
    /// migrator uses, so an unreachable server fails here.
    pub async fn connect(options: PgOptions, clock: Arc<dyn Clock>) -> Result<Self, PgError> {
        Self::connect_with_guard(options, clock, None).await
    }

    /// Like [`connect`](Self::connect), keeping `guard` alive as long as any
    /// repository of the store (tests drop their schema in the guard's `Drop`).
    pub async fn connect_with_guard(
        options: PgOptions,
        clock: Arc<dyn Clock>,
        guard: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Self, PgError> {
        if options.pool_max == 0 {
            return Err(PgError::Config("pool_max must be at least 1".to_owned()));
        }
        migrate::run(&options).await?;
        let vectors = match options.index {
            Some(spec) => Some(vectors::prepare(&options, spec).await?),
            None => None,
        };
        let pools = PgPools {
            store: build_pool(&options, "service-store")?,
            checkpointer: build_pool(&options, "service-checkpointer")?,
            claim: build_pool(&options, "service-claim")?,
        };
        let db = Arc::new(Db {
            pool: pools.store.clone(),
            clock,
            limits: PageLimits::new(options.max_page_size),
            vectors,
            _guard: guard.clone(),
        });
        let store = Store::new(StoreParts {
            assistants: db.clone(),
            threads: db.clone(),
            runs: db.clone(),
            crons: db.clone(),
            items: db.clone(),
            idempotency: db.clone(),
            deliveries: Some(db.clone()),
            health: db,
            durable: true,
            semantic_search: options.index.is_some(),
        });
        let saver = Arc::new(PostgresSaver::with_guard(pools.checkpointer.clone(), guard));
        Ok(Self {
            store,
            saver,
            pools,
            options,
        })
    }

    /// The store (every repository, deliveries included).
    pub fn store(&self) -> Store {
        self.store.clone()
    }

    /// The checkpoint saver, on the checkpointer pool.
    pub fn checkpointer(&self) -> Arc<PostgresSaver> {
        self.saver.clone()
    }

    /// The three pools.
    pub fn pools(&self) -> &PgPools {
        &self.pools
    }

    /// The execution claim pool: hold one connection per executing run.
    pub fn claim_pool(&self) -> &Pool {
        &self.pools.claim
    }

    /// The options this backend was built with.
    pub fn options(&self) -> &PgOptions {
        &self.options
    }
}

/// A connection from the store pool and one round trip on it.
#[async_trait]
impl StoreHealth for Db {
    async fn ping(&self) -> StoreResult<()> {
        self.client()
            .await?
            .batch_execute("SELECT 1")
            .await
            .map_err(error::store_error)
    }
}

/// One pool of `options.pool_max` connections, with an idle reaper when
/// `idle_timeout` is set.
fn build_pool(options: &PgOptions, application_name: &str) -> Result<Pool, PgError> {
    let manager = Manager::from_config(
        options.pg_config(application_name)?,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(options.pool_max)
        .wait_timeout(options.connection_timeout)
        .create_timeout(options.connection_timeout)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|error| PgError::Config(format!("cannot build pool: {error}")))?;
    if let Some(idle) = options.idle_timeout
        && let Ok(handle) = tokio::runtime::Handle::try_current()
    {
        // Ends by itself once the pool is dropped (the weak handle stops upgrading).
        let weak = pool.weak();
        handle.spawn(async move {
            let mut tick = tokio::time::interval(idle.max(Duration::from_millis(100)) / 2);
            loop {
                tick.tick().await;
                let Some(pool) = weak.upgrade() else { break };
                pool.retain(|_, metrics| metrics.last_used() < idle);
            }
        });
    }
    Ok(pool)
}
