//! The Python graph bridge: LangGraph Python graphs, unmodified, served as
//! [`AgentGraph`](service_graph::AgentGraph)s.
//!
//! [`Bridge::start`] launches a pool of Python worker processes (the interpreter the
//! options name, with its own packages; `langgraph` 1.x must be installed there) that
//! import the graphs. Each graph is then one more agent of the engine: a run is a
//! request to the least busy worker, whose chunks come back as frames. The workers
//! keep no state: LangGraph's checkpointer and store calls come back to the server's
//! own [`Checkpointer`] and the run's long-term store, so threads, history, copy,
//! prune and PostgreSQL persistence work as for Rust graphs and a worker restart loses
//! nothing. A worker that dies fails only its own in-flight requests and is replaced.
//!
//! The protocol between the two sides is described in docs/python-graphs.md. Another
//! language side speaking it (service-node's) starts its workers with
//! [`Bridge::start_runtime`].

mod adapter;
mod calls;
mod embed;
mod error;
mod graph;
mod runtime;
mod worker;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use service_graph::{Checkpointer, GraphError, GraphResolver, GraphSource};
use service_store::StoreAdapter;
use service_types::RunError;

pub use embed::PythonEmbedder;
pub use error::BridgeError;
pub use runtime::Runtime;

use crate::graph::PythonGraphs;
use crate::worker::{Launch, Pool};

/// What to serve and how to run Python.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// The interpreter (`SERVICE_PYTHON`, default `python3` on PATH).
    pub python: OsString,
    /// Graph id → `./path/file.py:attr` or `package.module:attr`.
    pub graphs: BTreeMap<String, String>,
    /// The directory graph paths are relative to (the config file's).
    pub base: PathBuf,
    /// Directories put first on the workers' Python path (`dependencies`).
    pub paths: Vec<PathBuf>,
    /// Environment of the workers, over the server's own (`env`).
    pub env: Vec<(String, String)>,
    /// How many worker processes run.
    pub workers: usize,
    /// The `store.index.embed` the workers load at boot, when Python serves it.
    pub embed: Option<String>,
    /// The `store.adapter` (`./store.py:store`, a LangGraph `BaseStore`) the workers
    /// load at boot.
    pub store_adapter: Option<String>,
}

impl BridgeOptions {
    /// Options for `graphs` relative to `base`, with `python3`, one worker per CPU.
    pub fn new(graphs: BTreeMap<String, String>, base: impl Into<PathBuf>) -> Self {
        Self {
            python: OsString::from("python3"),
            graphs,
            base: base.into(),
            paths: Vec::new(),
            env: Vec::new(),
            workers: std::thread::available_parallelism().map_or(1, usize::from),
            embed: None,
            store_adapter: None,
        }
    }
}

/// How many of a bridge's workers are alive and how many were restarted.
#[derive(Clone, Debug)]
pub struct WorkerHealth(std::sync::Weak<Pool>);

impl WorkerHealth {
    /// The workers' language (`Python`, `Node`).
    pub fn language(&self) -> Option<&'static str> {
        self.0.upgrade().map(|pool| pool.language())
    }

    /// Live worker processes; 0 once the bridge stopped.
    pub fn alive(&self) -> usize {
        self.0.upgrade().map_or(0, |pool| pool.pids().len())
    }

    /// Workers started in place of ones that exited.
    pub fn restarts(&self) -> u64 {
        self.0.upgrade().map_or(0, |pool| {
            pool.restarts.load(std::sync::atomic::Ordering::Relaxed)
        })
    }
}

/// The running workers and the graphs they loaded.
#[derive(Debug)]
pub struct Bridge {
    pool: Arc<Pool>,
    graph_ids: Vec<String>,
    failures: BTreeMap<String, RunError>,
    runtime: String,
    langgraph: String,
    store_adapter: Option<adapter::WorkerStore>,
}

impl Bridge {
    /// Starts the workers and waits until each has imported the graphs. A graph that
    /// fails to import does not stop the others (see [`Bridge::failures`]); a missing
    /// interpreter or LangGraph does.
    pub async fn start(options: BridgeOptions) -> Result<Self, BridgeError> {
        let mut paths: Vec<String> = options
            .paths
            .iter()
            .map(|path| path.to_string_lossy().into_owned())
            .collect();
        paths.push(options.base.to_string_lossy().into_owned());
        let spec = serde_json::json!({
            "graphs": options.graphs,
            "base": options.base.to_string_lossy(),
            "paths": paths,
            "embed": options.embed,
            "store_adapter": options.store_adapter,
        });
        let launch = Launch {
            runtime: Runtime::python(options.python),
            cwd: options.base,
            env: options.env,
            spec: spec.to_string(),
        };
        Self::launch(
            launch,
            options.graphs.into_keys().collect(),
            options.workers,
            options.store_adapter,
        )
        .await
    }

    /// Starts `workers` workers of another language side, each given `spec` (the
    /// `SERVICE_BRIDGE_SPEC` JSON its bridge reads) and run in `cwd` with `env`.
    /// `store_adapter` is the spec's `store.adapter`, when it names one: the workers
    /// answer the same `adapter` requests as Python's.
    pub async fn start_runtime(
        runtime: Runtime,
        cwd: PathBuf,
        env: Vec<(String, String)>,
        spec: &serde_json::Value,
        graph_ids: Vec<String>,
        workers: usize,
        store_adapter: Option<String>,
    ) -> Result<Self, BridgeError> {
        let launch = Launch {
            runtime,
            cwd,
            env,
            spec: spec.to_string(),
        };
        Self::launch(launch, graph_ids, workers, store_adapter).await
    }

    async fn launch(
        launch: Launch,
        graph_ids: Vec<String>,
        workers: usize,
        store_adapter: Option<String>,
    ) -> Result<Self, BridgeError> {
        let language = launch.runtime.language;
        let (pool, hello) =
            Pool::start(launch, workers)
                .await
                .map_err(|BridgeError::Boot(message)| {
                    BridgeError::Boot(format!("{language} graphs: {message}"))
                })?;
        let store_adapter = match (store_adapter, hello.store_adapter) {
            (None, _) => None,
            (Some(spec), Some((supports_ttl, sweeps))) => Some(adapter::WorkerStore {
                pool: Arc::clone(&pool),
                spec,
                supports_ttl,
                sweeps,
            }),
            // Serving without it would keep the items elsewhere, silently.
            (Some(spec), None) => {
                return Err(BridgeError::Boot(format!(
                    "{language} graphs: the worker did not report loading store.adapter {spec}"
                )));
            }
        };
        Ok(Self {
            store_adapter,
            pool,
            graph_ids,
            failures: hello.failures.into_iter().collect(),
            runtime: hello.runtime,
            langgraph: hello.langgraph,
        })
    }

    /// Graphs that failed to load, with the error (stack included).
    pub fn failures(&self) -> &BTreeMap<String, RunError> {
        &self.failures
    }

    /// The interpreter's and LangGraph's versions the workers run.
    pub fn versions(&self) -> (&str, &str) {
        (&self.runtime, &self.langgraph)
    }

    /// Connects `embedder` to these workers (they loaded its spec at boot).
    pub fn attach_embedder(&self, embedder: &PythonEmbedder) {
        embedder.attach(&self.pool);
    }

    /// The `store.adapter` the workers loaded, to keep the store items
    /// ([`service_store::with_adapter`]).
    pub fn store_adapter(&self) -> Option<Arc<dyn StoreAdapter>> {
        self.store_adapter
            .clone()
            .map(|store| Arc::new(store) as Arc<dyn StoreAdapter>)
    }

    /// Process ids of the live workers.
    pub fn worker_pids(&self) -> Vec<u32> {
        self.pool.pids()
    }

    /// A handle on the workers' health for `/metrics`, valid while the bridge runs.
    pub fn health(&self) -> WorkerHealth {
        WorkerHealth(Arc::downgrade(&self.pool))
    }

    /// The resolver of the Python graphs, their state kept in `checkpointer`.
    pub fn resolver(&self, checkpointer: Arc<dyn Checkpointer>) -> Arc<dyn GraphResolver> {
        Arc::new(self.graphs(checkpointer))
    }

    /// This bridge as an engine's graph source.
    pub fn into_source(self) -> impl GraphSource {
        move |checkpointer: Arc<dyn Checkpointer>| -> Result<_, GraphError> {
            Ok(self.graphs(checkpointer))
        }
    }

    fn graphs(&self, checkpointer: Arc<dyn Checkpointer>) -> PythonGraphs {
        // One saver per bridge: a second attach keeps the first (an engine owns one).
        let _ = self.pool.checkpointer.set(checkpointer);
        let failures = self.failures.clone().into_iter().collect();
        PythonGraphs::new(Arc::clone(&self.pool), self.graph_ids.clone(), &failures)
    }
}
