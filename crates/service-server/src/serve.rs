//! Boot: build the store, graphs and engine a [`ServerConfig`] describes, serve until a
//! termination signal, then shut down within the grace period.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use service_coordinator_postgres::{PgCoordinator, PgCoordinatorOptions};
use service_engine::bus::MemoryBus;
use service_engine::{Engine, EngineParts};
use service_graph::{Checkpointer, GraphSource, InMemorySaver};
use service_store::{Clock, SystemClock};
use service_store_memory::{MemoryOptions, memory_store};
use service_store_postgres::PostgresStore;
use service_webhooks::{Dispatcher, Outbox};
use tokio_util::sync::CancellationToken;

use crate::cli::Mode;
use crate::env::ConfigError;
use crate::graphs;
use crate::server::Embedding;
use crate::settings::{Database, ServerConfig};

/// Serves `graphs` as `config` says, with what the embedder handed the server, until
/// SIGINT or SIGTERM.
pub(crate) async fn serve(
    config: ServerConfig,
    graphs: Box<dyn GraphSource>,
    embedding: Embedding,
) -> Result<(), ConfigError> {
    let Embedding {
        dispatcher,
        logger,
        sinks,
        store_adapter,
    } = embedding;
    let traces = crate::otel::Tracing::from_env()?;
    crate::log::init(
        &config.log_filter,
        config.log_format,
        &logger,
        traces.iter().map(crate::otel::Tracing::layer).collect(),
    );
    for warning in config
        .warnings
        .iter()
        .chain(&boot_warnings(&config, dispatcher.is_some()))
    {
        tracing::warn!("{warning}");
    }
    for notice in &config.notices {
        tracing::info!("{notice}");
    }
    if let Some(auth) = &config.auth {
        auth.load_keys()
            .await
            .map_err(|error| ConfigError(error.0))?;
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let engine_config = config.engine;
    let mut bridges = Vec::new();
    let mut parts = crate::metrics::Parts::default();
    // The `store.adapter` the Python or the Node workers loaded (one of them, by its file).
    let mut file_store = None;
    let mut langgraph_py_version = None;
    if let Some(options) = config.python {
        let bridge = graphs::start_bridge(options).await?;
        langgraph_py_version = Some(bridge.versions().1.to_owned());
        file_store = bridge.store_adapter();
        if let Some(embedder) = &config.python_embedder {
            bridge.attach_embedder(embedder);
        }
        bridges.push(bridge);
    }
    if let Some(options) = config.node {
        let bridge = graphs::start_node(options).await?;
        file_store = file_store.or_else(|| bridge.store_adapter());
        bridges.push(bridge);
    }
    parts.workers = bridges.iter().map(service_python::Bridge::health).collect();
    let graphs = graphs::served(graphs, config.graph_aliases, bridges);
    let redis = match &config.queue {
        Some(options) => {
            let bus = service_redis::RedisBus::connect(options.clone())
                .await
                .map_err(|error| ConfigError(error.to_string()))?;
            tracing::info!(
                "streaming through Redis: runs can be streamed and joined from any instance; webhook retries are delayed jobs there"
            );
            Some(bus)
        }
        None => None,
    };
    let bus: Arc<dyn service_engine::bus::StreamBus> = match &redis {
        Some(bus) => bus.clone(),
        None => MemoryBus::new(engine_config.bus),
    };
    // Channel replies are deliveries of the outbox, sent through their providers.
    let dispatcher = match (config.channels.is_empty(), dispatcher) {
        (true, dispatcher) => dispatcher,
        (false, custom) => {
            let http: Arc<dyn Dispatcher> = match custom {
                Some(custom) => custom,
                None => Arc::new(
                    service_webhooks::HttpDispatcher::new(&config.webhooks)
                        .map_err(|error| ConfigError(format!("cannot send webhooks: {error}")))?,
                ),
            };
            let channels = service_channels::ChannelDispatcher::new(
                config.channels.clone(),
                http,
                config.webhooks.timeout,
            )
            .map_err(|error| ConfigError(format!("cannot send channel replies: {error}")))?;
            Some(Arc::new(channels) as Arc<dyn Dispatcher>)
        }
    };
    let adapt = |store| {
        let (engine, store_ttl) = (&engine_config, config.store_ttl);
        crate::adapter::attach(
            store,
            store_adapter.clone(),
            file_store.clone(),
            engine,
            store_ttl,
        )
    };
    // Every store and checkpointer call a span, only while traces are exported.
    let traced = traces.is_some();
    let store_of = |store: service_store::Store| match &traces {
        Some(traces) => traces.traced_store(&store),
        None => store,
    };
    let saver_of = |checkpointer: Arc<dyn Checkpointer>| match &traces {
        Some(traces) => traces.traced_checkpointer(checkpointer),
        None => checkpointer,
    };
    let webhooks = |store: &service_store::Store| {
        let settings = config.webhooks.clone();
        let outbox = match &dispatcher {
            Some(dispatcher) => Outbox::with_dispatcher(
                settings,
                store.clone(),
                clock.clone(),
                Arc::clone(dispatcher),
            ),
            None => Outbox::new(settings, store.clone(), clock.clone())
                .map_err(|error| ConfigError(format!("cannot send webhooks: {error}")))?,
        };
        let outbox = match &redis {
            Some(bus) => outbox.with_retry_queue(Arc::new(service_redis::RedisRetryQueue::of(bus))),
            None => outbox,
        };
        Ok::<_, ConfigError>(Some(Arc::new(outbox) as Arc<dyn service_engine::Webhooks>))
    };
    let engine = match &config.database {
        Some(database) => {
            let backend = postgres_backend(database, clock.clone()).await?;
            parts.pools = Some(backend.pools);
            let store = store_of(adapt(backend.store)?);
            let parts = EngineParts {
                webhooks: webhooks(&store)?,
                store,
                graphs,
                checkpointer: saver_of(backend.checkpointer),
                bus,
                clock,
                config: engine_config,
            };
            // With Redis, cancels travel over its pub/sub; the rest stays on PostgreSQL.
            let coordinator: Arc<dyn service_engine::coordination::Coordinator> = match &redis {
                Some(bus) => Arc::new(service_redis::RedisCancels::new(
                    backend.coordinator,
                    Arc::clone(bus),
                )),
                None => backend.coordinator,
            };
            Engine::with_coordinator(parts, coordinator)
        }
        None => {
            // An in-memory checkpointer is also the store's, so a claim can tell whether
            // a thread has checkpoints (`ClaimedRun::thread_has_no_checkpoint`).
            let mut in_memory = None;
            let checkpointer: Arc<dyn Checkpointer> = match &config.checkpoint_database {
                Some(database) => {
                    let backend = PostgresStore::connect(database.options.clone(), clock.clone())
                        .await
                        .map_err(|error| {
                            ConfigError(format!("cannot use the database: {error}"))
                        })?;
                    tracing::info!("using PostgreSQL for the checkpointer, memory for the store");
                    parts.pools = Some(backend.pools().clone());
                    backend.checkpointer()
                }
                None => in_memory.insert(Arc::new(InMemorySaver::new())).clone(),
            };
            let mut options =
                MemoryOptions::new(clock.clone()).with_max_page_size(engine_config.max_page_size);
            if let Some(saver) = in_memory {
                options = options.with_checkpoints(saver);
            }
            if let Some(index) = &engine_config.store_index {
                options = options.with_index(index.spec());
            }
            let store = store_of(adapt(memory_store(options))?);
            Engine::new(EngineParts {
                webhooks: webhooks(&store)?,
                store,
                graphs,
                checkpointer: saver_of(checkpointer),
                bus,
                clock,
                config: engine_config,
            })
        }
    }
    .map_err(|error| ConfigError(format!("building the graphs failed: {error}")))?;
    engine
        .system()
        .ensure_system_assistants()
        .await
        .map_err(|error| {
            ConfigError(format!("registering the graphs failed: {}", error.chain()))
        })?;
    let mut http = config.http;
    if let Some(plan) = config.ui {
        http.ui = Some(Arc::new(crate::ui::bundle(plan).await?));
    }
    http.trace_routes = traced;
    http.langgraph_py_version = langgraph_py_version;
    if http.metrics {
        http.metrics_collector = Some(Arc::new(parts));
    }
    if !config.channels.is_empty() {
        let channels = service_channels::Channels::new(engine.clone(), config.channels);
        channels.check_assistants().await.map_err(ConfigError)?;
        http.channels = Some(channels);
    }
    for sink in sinks {
        engine.add_telemetry_sink(sink);
    }
    engine.log_run_activity(config.log_run_activity);
    // Every graph is loaded once now: one that cannot load is reported in its block
    // and the others serve.
    engine.probe_graphs().await;
    engine.start();

    let mut app = service_axum::router_with(engine.clone(), http);
    if let Some(mount) = &config.console {
        app = service_axum::console(mount).merge(app);
    }
    if config.request_log {
        app = app.layer(axum::middleware::from_fn(log_request));
    }
    if traced {
        // Outermost: the authentication and Idempotency-Key layers' store calls are
        // part of the request's trace.
        app = app.layer(crate::otel::TraceRequests);
    }
    let listener = tokio::net::TcpListener::bind(&config.address)
        .await
        .map_err(|error| ConfigError(format!("cannot listen on {}: {error}", config.address)))?;
    let signalled = shutdown_signal()?;
    let local = listener
        .local_addr()
        .map_err(|error| ConfigError(format!("cannot read the listening address: {error}")))?;
    tracing::info!(
        mode = match config.mode {
            Mode::Dev => "dev",
            Mode::Start => "start",
        },
        graphs = ?engine.graph_ids(),
        "listening on http://{local}"
    );
    if let Some(mount) = &config.console {
        tracing::info!("console at http://{local}{mount}/");
    }
    let stopping = CancellationToken::new();
    let (heap_percent, heap_sample) = config.heap_warn;
    crate::heap::spawn(heap_percent, heap_sample, stopping.clone());
    let server = crate::listen::serve(listener, app, config.connections, stopping.clone());
    tokio::pin!(server);
    tokio::select! {
        () = &mut server => return Ok(()),
        () = signalled => {}
    }
    // No new connections from here; requests in flight go on while the runs drain.
    stopping.cancel();
    let deadline = Instant::now() + engine.config().shutdown_grace + CLOSE_BUDGET;
    engine.shutdown().await;
    // Streams have ended with the engine; a connection still open now (a client that
    // is slow to send its request, or to read its answer) is closed with the runtime.
    let close = deadline
        .saturating_duration_since(Instant::now())
        .max(LAST_CLOSE);
    if tokio::time::timeout(close, &mut server).await.is_err() {
        tracing::warn!("connections still open at the end of the shutdown budget are closed");
    }
    tracing::info!("stopped");
    if let Some(traces) = traces {
        traces.shutdown().await;
    }
    Ok(())
}

/// What the shutdown budget allows beyond the runs' grace period: cancelled runs
/// settle and open connections end (SPEC: about 8 s in all with the default grace).
const CLOSE_BUDGET: Duration = Duration::from_secs(3);
/// The least time connections get to end after the engine stopped.
const LAST_CLOSE: Duration = Duration::from_millis(250);

/// What production on PostgreSQL runs on.
struct PostgresBackend {
    store: service_store::Store,
    checkpointer: Arc<dyn Checkpointer>,
    coordinator: Arc<dyn service_engine::coordination::Coordinator>,
    /// Its three pools, for `/metrics`.
    pools: service_store_postgres::PgPools,
}

/// Connects (migrating the schema first) and builds the three pools.
async fn postgres_backend(
    database: &Database,
    clock: Arc<dyn Clock>,
) -> Result<PostgresBackend, ConfigError> {
    let backend = PostgresStore::connect(database.options.clone(), clock)
        .await
        .map_err(|error| ConfigError(format!("cannot use the database: {error}")))?;
    let pools = backend.pools().clone();
    let options = PgCoordinatorOptions::new(
        database.listen.clone(),
        pools.store.clone(),
        pools.claim.clone(),
    );
    let coordinator = PgCoordinator::start(options)
        .map_err(|error| ConfigError(format!("cannot coordinate instances: {error}")))?;
    tracing::info!("using PostgreSQL for the store and the checkpointer");
    Ok(PostgresBackend {
        store: backend.store(),
        checkpointer: backend.checkpointer(),
        coordinator: Arc::new(coordinator),
        pools,
    })
}

/// The boot warnings that depend on what the embedder handed over as well as on the
/// configuration (SPEC: a signing key with a custom dispatcher; a durable store
/// whose webhook retries are not durably scheduled).
pub(crate) fn boot_warnings(config: &ServerConfig, custom_dispatcher: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    if custom_dispatcher && !config.webhooks.secrets.is_empty() {
        warnings.push(
            "webhooks are signed and sent through a custom dispatcher: it must pass headers and body on unchanged or receivers will reject the signature"
                .to_owned(),
        );
    }
    if config.database.is_some() && config.queue.is_none() {
        warnings.push(
            "webhook retries are scheduled from the PostgreSQL outbox: a pending retry is not kept across a restart by a queue, but the delivery is picked up again at the next boot"
                .to_owned(),
        );
    }
    warnings
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

/// SIGINT or SIGTERM, handled from the moment this is called: installed before the
/// server says it listens, so a signal sent as soon as it answers stops it cleanly
/// instead of killing it.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, ConfigError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let install = |kind| {
            signal(kind)
                .map_err(|error| ConfigError(format!("cannot handle termination signals: {error}")))
        };
        let mut interrupt = install(SignalKind::interrupt())?;
        let mut terminate = install(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            tracing::info!("shutting down");
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    })
}
