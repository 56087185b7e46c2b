//! Boot: read configuration, build the store, graphs and engine, serve until a
//! termination signal, then shut down within the grace period.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::ListenerExt;
use service_coordinator_postgres::{PgCoordinator, PgCoordinatorOptions};
use service_engine::bus::{MemoryBus, MemoryBusLimits};
use service_engine::{Engine, EngineConfig, EngineParts};
use service_graph::{Checkpointer, InMemorySaver};
use service_store::{Clock, SystemClock};
use service_store_memory::{MemoryOptions, memory_store};
use service_store_postgres::{PgOptions, PostgresStore};
use tracing_subscriber::EnvFilter;

use crate::config::ConfigFile;
use crate::env::{ConfigError, EnvKnobs};
use crate::graphs;
use std::path::PathBuf;

/// Options shared by both modes.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (default 8123, or PORT).
    #[arg(long)]
    pub port: Option<u16>,
    /// Runs this instance executes at once (default 10, or SERVICE_RUN_CONCURRENCY).
    #[arg(long, short = 'n')]
    pub concurrency: Option<usize>,
    /// Abort runs executing longer than this many milliseconds.
    #[arg(long = "run-timeout")]
    pub run_timeout_ms: Option<u64>,
    /// Configuration file (JSON).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Do not serve the web console.
    #[arg(long)]
    pub no_console: bool,
    /// Log run activity (start, finish, duration).
    #[arg(long)]
    pub verbose: bool,
}

/// Serves until SIGINT or SIGTERM.
pub async fn run(production: bool, args: ServeArgs) -> Result<(), ConfigError> {
    let knobs = EnvKnobs::read(std::env::vars().map(|(name, _)| name), |name| {
        std::env::var(name).ok()
    })?;
    let file = match &args.config {
        Some(path) => ConfigFile::load(path)?,
        None => ConfigFile::default(),
    };
    init_logging(args.verbose);

    let port = match args.port {
        Some(port) => port,
        None => match std::env::var("PORT") {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|_| ConfigError(format!("PORT must be a port number, got {text:?}")))?,
            Err(_) => 8123,
        },
    };
    let config = engine_config(production, &args, &knobs, &file);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let database_url = std::env::var("DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URI"))
        .ok()
        .filter(|url| !url.trim().is_empty());
    let bus = MemoryBus::new(config.bus);
    let graphs = graphs::served(
        Box::new(service_example_graphs::registry),
        file.graphs.clone(),
    );
    let engine = match database_url.filter(|_| production) {
        Some(url) => {
            let backend = postgres_backend(&url, &knobs, &config, clock.clone()).await?;
            let parts = EngineParts {
                store: backend.store,
                graphs,
                checkpointer: backend.checkpointer,
                bus,
                clock,
                config,
            };
            Engine::with_coordinator(parts, backend.coordinator)
        }
        None => {
            if production {
                tracing::warn!(
                    "no DATABASE_URL: running on the in-memory store, nothing survives a restart"
                );
            }
            let store = memory_store(
                MemoryOptions::new(clock.clone()).with_max_page_size(config.max_page_size),
            );
            Engine::new(EngineParts {
                store,
                graphs,
                checkpointer: Arc::new(InMemorySaver::new()),
                bus,
                clock,
                config,
            })
        }
    }
    .map_err(|error| ConfigError(format!("building the graphs failed: {error}")))?;
    engine.ensure_system_assistants().await.map_err(|error| {
        ConfigError(format!("registering the graphs failed: {}", error.chain()))
    })?;
    engine.start();

    let request_log = knobs.request_log.unwrap_or(!production);
    let mut app = service_axum::router(engine.clone());
    if request_log {
        app = app.layer(axum::middleware::from_fn(log_request));
    }
    let address = format!("{}:{port}", args.host);
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(|error| ConfigError(format!("cannot listen on {address}: {error}")))?;
    let local = listener
        .local_addr()
        .map_err(|error| ConfigError(format!("cannot read the listening address: {error}")))?;
    tracing::info!(
        mode = if production { "start" } else { "dev" },
        graphs = ?engine.graph_ids(),
        "listening on http://{local}"
    );
    // Streamed answers (wait bodies, SSE) are written in several small pieces; without
    // TCP_NODELAY, Nagle's algorithm holds each back until the client's delayed ACK.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|error| ConfigError(format!("server error: {error}")))?;
    engine.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// What production on PostgreSQL runs on.
struct PostgresBackend {
    store: service_store::Store,
    checkpointer: Arc<dyn Checkpointer>,
    coordinator: Arc<dyn service_engine::coordination::Coordinator>,
}

/// Connects (migrating the schema first) and builds the three pools.
async fn postgres_backend(
    url: &str,
    knobs: &EnvKnobs,
    config: &EngineConfig,
    clock: Arc<dyn Clock>,
) -> Result<PostgresBackend, ConfigError> {
    let mut options = PgOptions::new(url);
    options.max_page_size = config.max_page_size;
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
    if options.pool_max < config.run_concurrency {
        tracing::warn!(
            pool_max = options.pool_max,
            run_concurrency = config.run_concurrency,
            "DB_POOL_MAX is below the run concurrency: every executing run holds one claim-pool connection, so runs will wait for connections"
        );
    }
    let listen_config: tokio_postgres::Config = url.parse().map_err(|error| {
        ConfigError(format!(
            "DATABASE_URL is not a valid PostgreSQL URL: {error}"
        ))
    })?;
    let backend = PostgresStore::connect(options, clock)
        .await
        .map_err(|error| ConfigError(format!("cannot use the database: {error}")))?;
    let pools = backend.pools().clone();
    let options = PgCoordinatorOptions::new(listen_config, pools.store, pools.claim);
    let coordinator = PgCoordinator::start(options)
        .map_err(|error| ConfigError(format!("cannot coordinate instances: {error}")))?;
    tracing::info!("using PostgreSQL for the store and the checkpointer");
    Ok(PostgresBackend {
        store: backend.store(),
        checkpointer: backend.checkpointer(),
        coordinator: Arc::new(coordinator),
    })
}

fn engine_config(
    production: bool,
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
    EngineConfig {
        run_concurrency: args
            .concurrency
            .or(knobs.run_concurrency)
            .unwrap_or(defaults.run_concurrency),
        run_timeout: args
            .run_timeout_ms
            .map(Duration::from_millis)
            .filter(|timeout| !timeout.is_zero())
            .or(knobs.run_timeout),
        expose_stacks: !production,
        max_page_size: knobs.max_page_size.unwrap_or(defaults.max_page_size),
        shutdown_grace: knobs.shutdown_grace.unwrap_or(defaults.shutdown_grace),
        bus: MemoryBusLimits {
            max_frames_per_topic: knobs
                .bus_max_frames
                .unwrap_or(defaults.bus.max_frames_per_topic),
            max_retained_topics: knobs
                .bus_max_retained
                .unwrap_or(defaults.bus.max_retained_topics),
        },
        idempotency_ttl: defaults.idempotency_ttl,
        store_default_ttl_minutes: store_ttl.and_then(|ttl| ttl.default_ttl),
        store_refresh_on_read: store_ttl.is_none_or(|ttl| ttl.refresh_on_read),
        sweep_interval,
        thread_default_ttl_minutes: thread_ttl.and_then(|ttl| ttl.default_ttl),
    }
}

fn init_logging(verbose: bool) {
    let default = if verbose {
        "info,service_engine=debug"
    } else {
        "info"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // A second initialisation (tests) is harmless; keep the first subscriber.
    // Colours only for a terminal, not for a file or a log collector.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// One log line per request: method, path, status, latency.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        target: "service_server::request",
        "{method} {path} {} {:.1}ms",
        response.status().as_u16(),
        started.elapsed().as_secs_f64() * 1000.0
    );
    response
}

async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
