//! [`Server`]: the bundled binary's boot over any graph source.

use std::fmt;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use service_engine::telemetry::TelemetrySink;
use service_graph::GraphSource;
use service_store::StoreAdapter;
use service_webhooks::Dispatcher;

use crate::cli::{Cli, Mode, ServeArgs};
use crate::env::ConfigError;
use crate::log::{Logger, LoggerChoice};
use crate::serve::serve;
use crate::settings::ServerConfig;

/// A server over your graphs with everything the `service-server` binary takes: the
/// `dev` and `start` commands and their flags, the environment knobs and the
/// configuration file (docs/configuration.md).
///
/// ```no_run
/// # use std::sync::Arc;
/// # use service_graph::{Checkpointer, GraphError, GraphRegistry};
/// /// Your graphs, built with the checkpointer the server owns.
/// fn graphs(checkpointer: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
///     # let _ = checkpointer;
///     Ok(GraphRegistry::new())
/// }
///
/// fn main() -> std::process::ExitCode {
///     service_server::Server::new(graphs).main()
/// }
/// ```
pub struct Server {
    graphs: Box<dyn GraphSource>,
    embedding: Embedding,
}

/// What an embedder hands the server beside its graphs.
#[derive(Default)]
pub(crate) struct Embedding {
    pub(crate) dispatcher: Option<Arc<dyn Dispatcher>>,
    pub(crate) logger: LoggerChoice,
    pub(crate) sinks: Vec<Arc<dyn TelemetrySink>>,
    pub(crate) store_adapter: Option<Arc<dyn StoreAdapter>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").finish_non_exhaustive()
    }
}

impl Server {
    /// A server of the graphs `graphs` builds.
    pub fn new(graphs: impl GraphSource + 'static) -> Self {
        Self {
            graphs: Box::new(graphs),
            embedding: Embedding::default(),
        }
    }

    /// Logs through `logger` instead of the server's own output (SPEC Logging 2: an
    /// injected logger wins over [`Server::without_logger`] and the default). The
    /// filter (RUST_LOG, `--verbose`) still decides what reaches it.
    pub fn logger(mut self, logger: Arc<dyn Logger>) -> Self {
        self.embedding.logger = LoggerChoice::Injected(logger);
        self
    }

    /// Installs no log subscriber (SPEC `logger: false`): the program's own, if it
    /// installed one before serving, gets the server's `tracing` events. An injected
    /// [`Server::logger`] still wins.
    pub fn without_logger(mut self) -> Self {
        if !matches!(self.embedding.logger, LoggerChoice::Injected(_)) {
            self.embedding.logger = LoggerChoice::Off;
        }
        self
    }

    /// Hands every run's `run.finished` event to `sink` (SPEC "Telemetry").
    pub fn telemetry_sink(mut self, sink: Arc<dyn TelemetrySink>) -> Self {
        self.embedding.sinks.push(sink);
        self
    }

    /// Sends webhook attempts through `dispatcher` instead of the built-in HTTP
    /// client. It must pass each attempt's headers and body on unchanged: the
    /// signature covers the body's exact bytes.
    pub fn webhook_dispatcher(mut self, dispatcher: Arc<dyn Dispatcher>) -> Self {
        self.embedding.dispatcher = Some(dispatcher);
        self
    }

    /// Keeps the long-term store's items in `adapter` instead of the server's own
    /// store (SPEC's store adapter, as `store.adapter` does for a Python `BaseStore`):
    /// the server applies its filter, ordering, paging and namespace rules over the
    /// adapter's items. The boot fails when the configuration file also sets
    /// `store.adapter` or `store.index`, or sets `store.ttl` without
    /// `"refresh_on_read": false` and an adapter that sweeps.
    pub fn store_adapter(mut self, adapter: Arc<dyn StoreAdapter>) -> Self {
        self.embedding.store_adapter = Some(adapter);
        self
    }

    /// A program's whole `main`: parses the command line, serves until SIGINT or
    /// SIGTERM, and exits non-zero with the reason on stderr when the boot fails.
    pub fn main(self) -> ExitCode {
        let (mode, args) = Cli::parse().into_parts();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("error: cannot start the async runtime: {error}");
                return ExitCode::FAILURE;
            }
        };
        match runtime.block_on(self.run(mode, args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    }

    /// Serves in `mode` with `args` and the process environment until SIGINT or
    /// SIGTERM.
    pub async fn run(self, mode: Mode, args: ServeArgs) -> Result<(), ConfigError> {
        // Names that are not Unicode cannot be knobs; skipping them keeps `vars()`
        // from panicking.
        let names = std::env::vars_os().filter_map(|(name, _)| name.into_string().ok());
        let config = ServerConfig::resolve(mode, &args, names, |name| std::env::var(name).ok())?;
        serve(config, self.graphs, self.embedding).await
    }
}
