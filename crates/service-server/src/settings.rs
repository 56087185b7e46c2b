//! One [`ServerConfig`] per boot, resolved from flags, environment and configuration
//! file in [`ServerConfig::resolve`]: a flag wins over its environment variable, which
//! wins over the default; every value is validated there, before anything is built.

use std::collections::BTreeMap;
use std::time::Duration;

use service_engine::EngineConfig;
use service_engine::bus::MemoryBusLimits;
use service_store::SemanticIndex;
use service_store_postgres::PgOptions;
use tracing_subscriber::EnvFilter;

use crate::cli::{Mode, ServeArgs};
use crate::config::{ConfigFile, ConsoleSetting, DEFAULT_CONSOLE};
use crate::env::{ConfigError, EnvKnobs};

/// Everything a boot needs to know.
#[derive(Debug)]
pub(crate) struct ServerConfig {
    /// Dev or start.
    pub mode: Mode,
    /// `host:port` to listen on.
    pub address: String,
    /// The engine's settings (page size and bus limits among them).
    pub engine: EngineConfig,
    /// PostgreSQL, in `start` with `DATABASE_URL`; else the in-memory store.
    pub database: Option<Database>,
    /// PostgreSQL for the checkpoints alone: `dev` with `"checkpointer": "default"`.
    pub checkpoint_database: Option<Database>,
    /// One log line per request.
    pub request_log: bool,
    /// Resident-memory share warned above (0: off), and the sampling period.
    pub heap_warn: (f64, Duration),
    /// The timeouts and hard head caps of each connection.
    pub connections: crate::listen::Connections,
    /// The HTTP adapter's settings (the request body limit).
    pub http: service_axum::RouterOptions,
    /// The web console's mount path, when it is served.
    pub console: Option<String>,
    /// The tracing filter.
    pub log_filter: String,
    /// Text lines or JSON objects (SERVICE_LOG_FORMAT).
    pub log_format: crate::log::LogFormat,
    /// Log run activity (`--verbose`).
    pub log_run_activity: bool,
    /// The configuration file's `graphs` block, for the program's own graphs.
    pub graph_aliases: Option<BTreeMap<String, String>>,
    /// The Python graphs the block names (and a Python `store.index.embed` or
    /// `store.adapter`), and how to run them.
    pub python: Option<service_python::BridgeOptions>,
    /// `store.index.embed` when the Python workers serve it (attached once they run).
    pub python_embedder: Option<service_python::PythonEmbedder>,
    /// The file has a `store.ttl` block (a store adapter must then sweep).
    pub store_ttl: bool,
    /// The JS graphs the block names (and a JS `store.adapter`), and how to run them.
    pub node: Option<service_node::NodeOptions>,
    /// langgraph.json's generative UI components, bundled at boot.
    pub ui: Option<crate::ui::UiPlan>,
    /// How run-completion webhooks are sent.
    pub webhooks: service_webhooks::WebhookSettings,
    /// Inbound channel routes, their credentials read from the environment.
    pub channels: service_channels::Routes,
    /// The Redis stream bus, when a queue is configured; else the in-memory bus.
    pub queue: Option<service_redis::RedisBusOptions>,
    /// The `auth` block's keys and tokens, whose JWK Set is fetched before serving.
    pub auth: Option<service_auth::Resolved>,
    /// Settings that have no effect here, to log once logging is set up.
    pub warnings: Vec<String>,
    /// Settings accepted and ignored on purpose (langgraph.json's image keys), logged
    /// at info.
    pub notices: Vec<String>,
}

/// Where PostgreSQL is and how to use it.
#[derive(Debug)]
pub(crate) struct Database {
    /// The store's options (pools, timeouts, page size).
    pub options: PgOptions,
    /// The URL, parsed, for the coordinator's LISTEN connection.
    pub listen: tokio_postgres::Config,
}

const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 8123;

impl ServerConfig {
    /// Resolves the configuration of a boot in `mode`: `names` lists the environment
    /// variables set (to catch typos), `lookup` reads one.
    pub(crate) fn resolve(
        mode: Mode,
        args: &ServeArgs,
        names: impl IntoIterator<Item = String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let knobs = EnvKnobs::read(names, &lookup)?;
        let file = match &args.config {
            Some(path) => ConfigFile::load(path)?,
            None => ConfigFile::default(),
        };
        let mut warnings = knobs.warnings.clone();
        let webhooks_block = file.webhooks_policy()?;
        let (webhooks, webhook_warnings) = service_webhooks::WebhookSettings::resolve(
            &webhooks_block,
            knobs.webhook_secret.as_deref(),
            knobs.webhook_timeout_ms.as_deref(),
        )
        .map_err(|error| ConfigError(error.to_string()))?;
        warnings.extend(webhook_warnings);
        let channels = service_channels::Routes::resolve(&file.service.channels, &lookup)
            .map_err(|error| ConfigError(error.to_string()))?;
        let config_dir = args
            .config
            .as_deref()
            .and_then(std::path::Path::parent)
            // `--config langgraph.json`: its parent is the empty path, the working directory.
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        let auth = service_auth::resolve(&file.auth, config_dir, &lookup)
            .map_err(|error| ConfigError(error.0))?;
        let plan = crate::graphs::GraphPlan::of(file.graph_targets())?;
        // Graph paths are relative to the config file, wherever the server starts.
        let base = || {
            std::path::absolute(config_dir).map_err(|error| {
                ConfigError(format!(
                    "cannot resolve the config file's directory: {error}"
                ))
            })
        };
        let python_embed = file
            .store
            .index
            .as_ref()
            .map(|index| index.embed.as_str())
            .filter(|embed| crate::graphs::embedded_by_python(embed));
        // `store.adapter` is loaded by the workers of its language.
        let (js_adapter, python_adapter) = match file.store.adapter.clone() {
            Some(adapter) if crate::adapter::is_js(&adapter) => (Some(adapter), None),
            adapter => (None, adapter),
        };
        let python_needed = python_embed.is_some() || python_adapter.is_some();
        let python = if plan.python.is_empty() && !python_needed {
            None
        } else {
            let mut options = crate::graphs::bridge_options(
                plan.python,
                &base()?,
                file.dependencies.as_deref().unwrap_or_default(),
                file.env.as_ref(),
                knobs.python.as_deref(),
                knobs.python_workers,
            )?;
            if let Some(serde) = &file.checkpointer.serde {
                // The workers build their serializer from it (python/bridge.py).
                options.env.push((
                    "SERVICE_CHECKPOINTER_SERDE".into(),
                    serde_json::Value::Object(serde.clone()).to_string(),
                ));
            }
            options.embed = python_embed.map(str::to_owned);
            options.store_adapter = python_adapter;
            Some(options)
        };
        let mut python_embedder = None;
        let cors = file
            .http
            .cors
            .as_ref()
            .map(crate::config::CorsBlock::policy)
            .transpose()?;
        let node = if plan.node.is_empty() && js_adapter.is_none() {
            None
        } else {
            let mut options = crate::graphs::node_options(
                plan.node,
                &base()?,
                file.env.as_ref(),
                file.node_version.as_ref(),
                knobs.node.as_deref(),
                knobs.node_workers,
            )?;
            options.store_adapter = js_adapter;
            Some(options)
        };
        let queue = queue(mode, args, &knobs, &file, &mut warnings);
        let mut engine = engine_config(mode, args, &knobs, &file);
        engine.store_index = match &file.store.index {
            Some(index) => {
                // As on the Python server, where langgraph.json's `env` is in the
                // process environment: the embedder's key may come from there; a
                // variable of the server's own environment wins.
                let file_env = crate::graphs::config_env(config_dir, file.env.as_ref())?;
                let embed_lookup = |name: &str| {
                    lookup(name).or_else(|| {
                        file_env
                            .iter()
                            .find(|(set, _)| set == name)
                            .map(|(_, value)| value.clone())
                    })
                };
                let embedder: std::sync::Arc<dyn service_store::Embedder> = if python_embed
                    .is_some()
                {
                    let embedder = service_python::PythonEmbedder::new(&index.embed, index.dims);
                    python_embedder = Some(embedder.clone());
                    std::sync::Arc::new(embedder)
                } else {
                    service_embed::from_config(&index.embed, index.dims, &embed_lookup)
                        .map_err(ConfigError)?
                };
                Some(SemanticIndex::new(embedder, index.fields(), index.hnsw))
            }
            None => None,
        };
        let database = match (mode, &knobs.database_url) {
            (Mode::Start, Some(url)) => Some(database(url, &knobs, &engine, &mut warnings)?),
            (Mode::Start, None) => {
                warnings.push(
                    "no DATABASE_URL: running on the in-memory store, nothing survives a restart"
                        .into(),
                );
                None
            }
            (Mode::Dev, url) => {
                if url.is_some() && !file.checkpointer.database_saver {
                    warnings.push(
                        "dev runs on the in-memory store; DATABASE_URL is used by `start` only"
                            .into(),
                    );
                }
                None
            }
        };
        // SPEC: `"checkpointer": "default"` is the database saver; `start` on
        // PostgreSQL uses it anyway, `dev` keeps its store in memory beside it.
        let checkpoint_database = match (&knobs.database_url, file.checkpointer.database_saver) {
            (_, false) => None,
            (None, true) => {
                return Err(ConfigError(
                    "checkpointer \"default\" is the PostgreSQL saver: set DATABASE_URL".into(),
                ));
            }
            (Some(_), true) if database.is_some() => None,
            (Some(url), true) => Some(self::database(url, &knobs, &engine, &mut warnings)?),
        };
        if database.is_none() && checkpoint_database.is_none() {
            let set: Vec<&str> = [
                ("DB_POOL_MAX", knobs.db_pool_max.is_some()),
                (
                    "DB_CONNECTION_TIMEOUT_MS",
                    knobs.db_connection_timeout.is_some(),
                ),
                ("DB_IDLE_TIMEOUT_MS", knobs.db_idle_timeout.is_some()),
                (
                    "DB_STATEMENT_TIMEOUT_MS",
                    knobs.db_statement_timeout.is_some(),
                ),
            ]
            .into_iter()
            .filter_map(|(name, set)| set.then_some(name))
            .collect();
            if !set.is_empty() {
                warnings.push(format!(
                    "{} only apply to PostgreSQL; this boot runs in memory",
                    set.join(", ")
                ));
            }
        }
        let log_filter = match &knobs.log_filter {
            Some(filter) => {
                EnvFilter::try_new(filter).map_err(|error| {
                    ConfigError(format!("RUST_LOG is not a valid log filter: {error}"))
                })?;
                filter.clone()
            }
            None => "info".into(),
        };
        // `--no-console` wins; then the file; unset, the mode decides.
        let console = match file.console()? {
            _ if args.no_console => None,
            ConsoleSetting::At(mount) => Some(mount),
            ConsoleSetting::Off => None,
            ConsoleSetting::Unset => (mode == Mode::Dev).then(|| DEFAULT_CONSOLE.into()),
        };
        let host = args.host.as_deref().unwrap_or(DEFAULT_HOST);
        let port = args.port.or(knobs.port).unwrap_or(DEFAULT_PORT);
        Ok(Self {
            mode,
            address: format!("{host}:{port}"),
            engine,
            database,
            checkpoint_database,
            request_log: knobs.request_log.unwrap_or(mode == Mode::Dev),
            connections: knobs.connections(),
            heap_warn: (
                knobs
                    .heap_warn_percent
                    .unwrap_or(crate::heap::DEFAULT_WARN_PERCENT),
                knobs.heap_sample.unwrap_or(crate::heap::DEFAULT_SAMPLE),
            ),
            http: service_axum::RouterOptions {
                max_body_bytes: knobs
                    .max_body_bytes
                    .unwrap_or(service_axum::RouterOptions::default().max_body_bytes),
                auth: auth
                    .as_ref()
                    .map(|resolved| resolved.auth.clone())
                    .unwrap_or_default(),
                disable_runs: file.http.disable_runs.unwrap_or(false),
                metrics: knobs.metrics.unwrap_or(mode == Mode::Dev),
                limits: knobs.client_limits(),
                // MCP admits the browsers CORS admits by name (and loopback ones);
                // without `http.cors`, loopback only.
                allowed_origins: cors
                    .as_ref()
                    .map(|cors| cors.allow_origins.clone())
                    .unwrap_or_default(),
                cors,
                configurable_headers: file
                    .http
                    .configurable_headers
                    .as_ref()
                    .map(crate::config::HeaderPatterns::copied),
                // The channels, metrics collector and UI bundles are made in serve.rs.
                ..service_axum::RouterOptions::default()
            },
            console,
            log_filter,
            log_format: knobs.log_format.unwrap_or_default(),
            log_run_activity: args.verbose,
            graph_aliases: plan.program,
            python,
            python_embedder,
            store_ttl: file.store.ttl.is_some(),
            node,
            ui: crate::ui::plan(&file, &base()?, knobs.node.as_deref())?,
            notices: file.notices(),
            webhooks,
            channels,
            queue,
            auth,
            warnings,
        })
    }
}

/// The durable queue's bus: `--queue`, else (in `start`) REDIS_URL, else the config
/// file's `queue.url`; its caps from SERVICE_QUEUE_STREAM_MAXLEN and
/// SERVICE_STREAM_BUFFER_FRAMES.
fn queue(
    mode: Mode,
    args: &ServeArgs,
    knobs: &EnvKnobs,
    file: &ConfigFile,
    warnings: &mut Vec<String>,
) -> Option<service_redis::RedisBusOptions> {
    let from_env = match mode {
        Mode::Start => knobs.redis_url.clone(),
        Mode::Dev => {
            if knobs.redis_url.is_some() && args.queue.is_none() {
                warnings.push(
                    "dev streams through the in-memory bus; REDIS_URL is used by `start` only (pass --queue to use Redis in dev)"
                        .into(),
                );
            }
            None
        }
    };
    let url = args
        .queue
        .clone()
        .or(from_env)
        .or_else(|| file.queue.as_ref().and_then(|queue| queue.url.clone()));
    let Some(url) = url else {
        if knobs.queue_stream_maxlen.is_some() || knobs.stream_buffer_frames.is_some() {
            warnings.push(
                "SERVICE_QUEUE_STREAM_MAXLEN and SERVICE_STREAM_BUFFER_FRAMES bound the Redis bus; no queue is configured"
                    .into(),
            );
        }
        return None;
    };
    let mut options = service_redis::RedisBusOptions::new(url);
    if let Some(prefix) = file.queue.as_ref().and_then(|queue| queue.prefix.clone()) {
        options.prefix = prefix;
    }
    if let Some(max_len) = knobs.queue_stream_maxlen {
        options.max_len = max_len;
    }
    if let Some(frames) = knobs.stream_buffer_frames {
        options.batch = frames;
    }
    Some(options)
}

/// The PostgreSQL options: DB_* knobs over the driver's defaults, the engine's page
/// size.
fn database(
    url: &str,
    knobs: &EnvKnobs,
    engine: &EngineConfig,
    warnings: &mut Vec<String>,
) -> Result<Database, ConfigError> {
    let listen = url.parse().map_err(|error| {
        ConfigError(format!(
            "DATABASE_URL is not a valid PostgreSQL URL: {error}"
        ))
    })?;
    let mut options = PgOptions::new(url);
    options.max_page_size = engine.max_page_size;
    options.index = engine.store_index.as_ref().map(SemanticIndex::spec);
    if let Some(pool_max) = knobs.db_pool_max {
        options.pool_max = pool_max;
    }
    if let Some(timeout) = knobs.db_connection_timeout {
        options.connection_timeout = timeout;
    }
    if let Some(idle) = knobs.db_idle_timeout {
        options.idle_timeout = Some(idle);
    }
    if let Some(timeout) = knobs.db_statement_timeout {
        options.statement_timeout = timeout;
    }
    if options.pool_max < engine.run_concurrency {
        warnings.push(format!(
            "DB_POOL_MAX ({}) is below the run concurrency ({}): every executing run holds one claim-pool connection, so runs will wait for connections",
            options.pool_max, engine.run_concurrency
        ));
    }
    Ok(Database { options, listen })
}

fn engine_config(
    mode: Mode,
    args: &ServeArgs,
    knobs: &EnvKnobs,
    file: &ConfigFile,
) -> EngineConfig {
    let defaults = EngineConfig::default();
    let minutes = |value: Option<f64>| value.map(|minutes| Duration::from_secs_f64(minutes * 60.0));
    let store_ttl = file.store.ttl.as_ref();
    let thread_ttl = file.checkpointer.ttl.as_ref();
    let sweep_interval = minutes(store_ttl.and_then(|ttl| ttl.sweep_interval_minutes))
        .into_iter()
        .chain(minutes(
            thread_ttl.and_then(|ttl| ttl.sweep_interval_minutes),
        ))
        .min()
        .unwrap_or(defaults.sweep_interval);
    // 0 turns the timeout off, on the flag as in the environment.
    let run_timeout = args
        .run_timeout_ms
        .map(|ms| (ms > 0).then(|| Duration::from_millis(ms)))
        .or(knobs.run_timeout)
        .flatten();
    EngineConfig {
        run_concurrency: args
            .concurrency
            .or(knobs.run_concurrency)
            .unwrap_or(defaults.run_concurrency),
        run_timeout,
        expose_stacks: mode == Mode::Dev,
        max_page_size: knobs.max_page_size.unwrap_or(defaults.max_page_size),
        shutdown_grace: knobs.shutdown_grace.unwrap_or(defaults.shutdown_grace),
        bus: MemoryBusLimits {
            max_frames_per_topic: knobs
                .bus_max_frames
                .unwrap_or(defaults.bus.max_frames_per_topic),
            max_retained_topics: knobs
                .bus_max_retained
                .unwrap_or(defaults.bus.max_retained_topics),
            max_retained_bytes: knobs
                .bus_max_retained_bytes
                .unwrap_or(defaults.bus.max_retained_bytes),
        },
        idempotency_ttl: defaults.idempotency_ttl,
        store_default_ttl_minutes: store_ttl.and_then(|ttl| ttl.default_ttl),
        store_refresh_on_read: store_ttl.is_none_or(|ttl| ttl.refresh_on_read),
        sweep_interval,
        thread_default_ttl_minutes: thread_ttl.and_then(|ttl| ttl.default_ttl),
        store_index: None,
    }
}

#[cfg(test)]
mod tests;
