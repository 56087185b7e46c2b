//! The worker processes: started, fed and read here, replaced when one dies.
//!
//! Each worker is one interpreter process running the embedded bridge of its
//! [`Runtime`] (`bridge.py` for Python). Requests go to its stdin and answers come from its protocol stream (its original stdout), one JSON
//! message per line; its stderr (where the graphs' prints go too) is logged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use service_graph::trace_context::{Scope, SpanKind};
use service_graph::{Checkpointer, GraphError, LongTermStore};
use service_types::RunError;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

use crate::calls;
use crate::error::{BridgeError, python_error};
use crate::runtime::Runtime;

/// The Python side, shipped inside the binary.
pub(crate) const BRIDGE_PY: &str = include_str!("../python/bridge.py");

/// The protocol version both sides speak (`PROTOCOL` in bridge.py).
pub(crate) const PROTOCOL: u64 = 1;

/// How long a worker may take to load LangGraph and the graphs.
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// How to start a worker.
#[derive(Clone, Debug)]
pub(crate) struct Launch {
    pub runtime: Runtime,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// The `SERVICE_BRIDGE_SPEC` JSON: graphs, their base directory, import paths.
    pub spec: String,
}

/// What a worker reports once it has loaded the graphs.
#[derive(Clone, Debug)]
pub(crate) struct Hello {
    /// The interpreter's version.
    pub runtime: String,
    pub langgraph: String,
    /// Graph id → why it failed to load (absent: loaded).
    pub failures: HashMap<String, RunError>,
    /// The loaded `store.adapter`: whether it takes a ttl, whether it sweeps.
    pub store_adapter: Option<(bool, bool)>,
}

/// One piece of an answer.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A stream chunk: `[mode, namespace, data]`.
    Chunk(Value),
    /// The end: the result, or why it failed.
    Done(Result<Value, GraphError>),
}

struct Pending {
    frames: mpsc::UnboundedSender<Frame>,
    store: Option<Arc<dyn LongTermStore>>,
    /// Present when the request was made in an exported span.
    trace: Option<Trace>,
}

/// A traced request's spans: the one it was made in, and one per node the worker
/// reported started and not yet ended (closed when dropped, so a request that ends
/// or dies mid-node closes them).
struct Trace {
    scope: Scope,
    nodes: HashMap<String, Scope>,
}

impl Trace {
    /// A node's start or end (`{"task", "name", "ns", "end"?, "error"?}`).
    fn node(&mut self, node: &Value) {
        let task = node["task"].as_str().unwrap_or_default().to_owned();
        if node["end"].as_bool() == Some(true) {
            if let (Some(scope), Some(error)) = (self.nodes.remove(&task), node["error"].as_str()) {
                scope.record(|span| span.error = Some(error.to_owned()));
            }
            return;
        }
        let name = node["name"].as_str().unwrap_or_default();
        let namespace = node["ns"].as_array().map_or(0, Vec::len);
        let scope = self.scope.child("node", SpanKind::Internal);
        scope.record(|span| {
            span.name = format!("node {name}").into();
            span.set("langgraph.node", name.to_owned());
            span.set("langgraph.task_id", task.clone());
            span.set("langgraph.namespace_depth", namespace as u64);
        });
        self.nodes.insert(task, scope);
    }

    /// Where a call the worker makes meanwhile belongs: the node running, when only
    /// one is, else the request.
    fn call_scope(&self) -> Scope {
        match self.nodes.values().next() {
            Some(node) if self.nodes.len() == 1 => node.clone(),
            _ => self.scope.clone(),
        }
    }
}

/// A running worker process.
pub(crate) struct Worker {
    pid: u32,
    language: &'static str,
    input: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<u64, Pending>>,
    alive: AtomicBool,
    in_flight: AtomicUsize,
}

impl Worker {
    fn send(&self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        // A closed pipe means the worker is gone; its reader fails what is pending.
        let _ = self.input.send(line);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The long-term store of `request`, and the span its calls belong to.
    fn call_context(&self, request: u64) -> (Option<Arc<dyn LongTermStore>>, Option<Scope>) {
        self.lock().get(&request).map_or((None, None), |pending| {
            (
                pending.store.clone(),
                pending.trace.as_ref().map(Trace::call_scope),
            )
        })
    }

    /// Ends every pending request with `error` (the worker died).
    fn fail_all(&self, error: &RunError) {
        let pending: Vec<Pending> = self.lock().drain().map(|(_, pending)| pending).collect();
        for pending in pending {
            let _ = pending
                .frames
                .send(Frame::Done(Err(GraphError::Other(Box::new(error.clone())))));
        }
    }
}

/// The worker pool: requests go to the least busy live worker.
pub(crate) struct Pool {
    launch: Launch,
    workers: Mutex<Vec<Arc<Worker>>>,
    next_id: AtomicU64,
    pub(crate) checkpointer: OnceLock<Arc<dyn Checkpointer>>,
    stopped: AtomicBool,
    /// Workers started in place of ones that exited (`/metrics`).
    pub(crate) restarts: AtomicU64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("workers", &self.workers().len())
            .finish_non_exhaustive()
    }
}

/// A request in flight: its frames, and its cancellation when dropped unfinished.
pub(crate) struct Request {
    id: u64,
    language: &'static str,
    worker: Arc<Worker>,
    frames: mpsc::UnboundedReceiver<Frame>,
    finished: bool,
}

impl Request {
    /// The next frame; `None` never comes before `Done` unless the pool is gone.
    pub(crate) async fn next(&mut self) -> Frame {
        let frame = self.frames.recv().await.unwrap_or_else(|| {
            Frame::Done(Err(GraphError::Other(Box::new(RunError::new(
                "WorkerExited",
                format!("the {} worker stopped", self.language),
            )))))
        });
        if matches!(frame, Frame::Done(_)) {
            self.finished = true;
        }
        frame
    }

    /// Waits for the result, skipping chunks.
    pub(crate) async fn result(mut self) -> Result<Value, GraphError> {
        loop {
            if let Frame::Done(result) = self.next().await {
                return result;
            }
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if self.worker.lock().remove(&self.id).is_some() {
            self.worker.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        if !self.finished {
            self.worker.send(&json!({"id": self.id, "op": "cancel"}));
        }
    }
}

impl Pool {
    /// Starts `size` workers and waits until each has loaded the graphs.
    pub(crate) async fn start(
        launch: Launch,
        size: usize,
    ) -> Result<(Arc<Self>, Hello), BridgeError> {
        let pool = Arc::new(Self {
            launch,
            workers: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            checkpointer: OnceLock::new(),
            stopped: AtomicBool::new(false),
            restarts: AtomicU64::new(0),
        });
        let started =
            futures::future::join_all((0..size.max(1)).map(|_| spawn(Arc::downgrade(&pool)))).await;
        let mut hello = None;
        for result in started {
            let (worker, greeting) = result?;
            pool.workers
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(worker);
            hello.get_or_insert(greeting);
        }
        let hello = hello.ok_or_else(|| BridgeError::Boot("no worker started".into()))?;
        Ok((pool, hello))
    }

    fn workers(&self) -> Vec<Arc<Worker>> {
        self.workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Sends `message` (an object with `op`) to the least busy worker.
    pub(crate) fn request(
        &self,
        mut message: Value,
        store: Option<Arc<dyn LongTermStore>>,
    ) -> Result<Request, GraphError> {
        let worker = self
            .workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter(|worker| worker.alive.load(Ordering::Relaxed))
            .min_by_key(|worker| worker.in_flight.load(Ordering::Relaxed))
            .cloned()
            .ok_or_else(|| {
                GraphError::Other(Box::new(RunError::new(
                    "WorkerUnavailable",
                    format!(
                        "no {} worker is running (one is being restarted); try again",
                        self.launch.runtime.language
                    ),
                )))
            })?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (frames, receiver) = mpsc::unbounded_channel();
        // Only exported spans are worth following into the worker: none of a trace
        // not sampled (its flags `00`) is.
        let traceparent = service_graph::trace_context::current()
            .filter(|traceparent| traceparent.ends_with("-01"));
        let trace = traceparent.as_ref().map(|_| Trace {
            scope: Scope::current(),
            nodes: HashMap::new(),
        });
        worker.lock().insert(
            id,
            Pending {
                frames,
                store,
                trace,
            },
        );
        worker.in_flight.fetch_add(1, Ordering::Relaxed);
        if let Value::Object(fields) = &mut message {
            fields.insert("id".into(), json!(id));
            if let Some(traceparent) = traceparent {
                fields.insert("traceparent".into(), Value::String(traceparent));
            }
        }
        worker.send(&message);
        Ok(Request {
            id,
            language: worker.language,
            worker,
            frames: receiver,
            finished: false,
        })
    }

    /// Process ids of the live workers (tests kill one).
    /// The language its workers run (`Python`, `Node`).
    pub(crate) fn language(&self) -> &'static str {
        self.launch.runtime.language
    }

    pub(crate) fn pids(&self) -> Vec<u32> {
        self.workers()
            .iter()
            .filter(|worker| worker.alive.load(Ordering::Relaxed))
            .map(|worker| worker.pid)
            .collect()
    }

    /// Stops the workers: their stdin closes, so they exit.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts one worker and reads its hello. Boxed: a worker's reader starts its
/// replacement, whose reader may start one in turn.
fn spawn(pool: Weak<Pool>) -> BoxFuture<'static, Result<(Arc<Worker>, Hello), BridgeError>> {
    Box::pin(start_worker(pool))
}

/// Refuses a graphs directory (the workers' working directory) that is not one,
/// naming it: spawning in it would fail with an error naming the interpreter instead.
fn check_graphs_directory(cwd: &Path) -> Result<(), BridgeError> {
    let refused = |why: String| {
        Err(BridgeError::Boot(format!(
            "the graphs directory {} {why}",
            cwd.display()
        )))
    };
    match std::fs::metadata(cwd) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => refused("is not a directory".into()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            refused("does not exist".into())
        }
        Err(error) => refused(format!("cannot be read: {error}")),
    }
}

async fn start_worker(pool: Weak<Pool>) -> Result<(Arc<Worker>, Hello), BridgeError> {
    let launch = pool
        .upgrade()
        .map(|pool| pool.launch.clone())
        .ok_or_else(|| BridgeError::Boot("the bridge stopped".into()))?;
    check_graphs_directory(&launch.cwd)?;
    let runtime = &launch.runtime;
    let language = runtime.language;
    let program = runtime.program.to_string_lossy().into_owned();
    let mut child = Command::new(&runtime.program)
        .args(&runtime.args)
        .current_dir(&launch.cwd)
        .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("SERVICE_BRIDGE_SPEC", &launch.spec)
        .envs(runtime.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| {
            BridgeError::Boot(format!(
                "cannot start the {language} interpreter {program:?} (set {}): {error}",
                runtime.program_variable
            ))
        })?;
    let pid = child.id().unwrap_or_default();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(BridgeError::Boot("the worker's pipes are missing".into()));
    };
    tokio::spawn(log_stderr(pid, language, stderr));
    let mut lines = BufReader::new(stdout);
    let hello = tokio::time::timeout(BOOT_TIMEOUT, read_hello(&mut lines, runtime, &program))
        .await
        .map_err(|_| {
            BridgeError::Boot(format!(
                "the {language} worker ({program}) did not load the graphs within {}s",
                BOOT_TIMEOUT.as_secs()
            ))
        })?;
    let hello = match hello {
        Ok(hello) => hello,
        Err(error) => {
            let status = child.wait().await.ok();
            return Err(match (error, status) {
                (BridgeError::Boot(message), Some(status)) if !status.success() => {
                    BridgeError::Boot(format!(
                        "{message} (the worker exited: {status}; its stderr is logged above)"
                    ))
                }
                (error, _) => error,
            });
        }
    };
    let (input, outgoing) = mpsc::unbounded_channel();
    let worker = Arc::new(Worker {
        pid,
        language,
        input,
        pending: Mutex::new(HashMap::new()),
        alive: AtomicBool::new(true),
        in_flight: AtomicUsize::new(0),
    });
    tokio::spawn(write_stdin(stdin, outgoing));
    tokio::spawn(read_stdout(pool, Arc::clone(&worker), lines, child));
    tracing::debug!(pid, "{language} worker ready");
    Ok((worker, hello))
}

async fn read_hello(
    lines: &mut BufReader<ChildStdout>,
    runtime: &Runtime,
    program: &str,
) -> Result<Hello, BridgeError> {
    let language = runtime.language;
    let mut line = Vec::new();
    let read = lines
        .read_until(b'\n', &mut line)
        .await
        .map_err(|error| BridgeError::Boot(format!("reading the worker: {error}")))?;
    if read == 0 {
        return Err(BridgeError::Boot(format!(
            "the {language} worker ({program}) exited before it was ready"
        )));
    }
    let message: Value = serde_json::from_slice(&line).map_err(|error| {
        BridgeError::Boot(format!("the worker's first message is not JSON: {error}"))
    })?;
    let hello = &message["hello"];
    if let Some(error) = hello["langgraph_error"].as_str() {
        return Err(BridgeError::Boot(format!(
            "{} is not installed for {program} ({error}); install it there ({}) or point {} at an interpreter that has it",
            runtime.package, runtime.install, runtime.program_variable
        )));
    }
    if let Some(error) = hello.get("embed_error") {
        let error = RunError::from_value(error);
        return Err(BridgeError::Boot(format!(
            "store.index.embed failed to load: {}\n{}",
            error.chain_summary(),
            error.stack.as_deref().unwrap_or_default()
        )));
    }
    if let Some(error) = hello.get("store_adapter_error") {
        let error = RunError::from_value(error);
        return Err(BridgeError::Boot(format!(
            "store.adapter failed to load: {}\n{}",
            error.chain_summary(),
            error.stack.as_deref().unwrap_or_default()
        )));
    }
    if hello["protocol"].as_u64() != Some(PROTOCOL) {
        return Err(BridgeError::Boot(format!(
            "the worker speaks protocol {}, the server {PROTOCOL}",
            hello["protocol"]
        )));
    }
    let langgraph = hello["langgraph"].as_str().unwrap_or_default().to_owned();
    let major: u64 = langgraph
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .unwrap_or(0);
    if major < 1 {
        return Err(BridgeError::Boot(format!(
            "{program} has {package} {langgraph}; the bridge needs {package} 1.0 or newer ({})",
            runtime.install,
            package = runtime.package
        )));
    }
    let failures = hello["graphs"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, loaded)| loaded["ok"] != Value::Bool(true))
        .map(|(id, loaded)| (id.clone(), RunError::from_value(&loaded["error"])))
        .collect();
    Ok(Hello {
        runtime: hello[runtime.version_field]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        langgraph,
        failures,
        store_adapter: hello.get("store_adapter").map(|adapter| {
            (
                adapter["supports_ttl"] == Value::Bool(true),
                adapter["sweeps"] == Value::Bool(true),
            )
        }),
    })
}

async fn write_stdin(mut stdin: ChildStdin, mut outgoing: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(line) = outgoing.recv().await {
        if stdin.write_all(&line).await.is_err() {
            return;
        }
    }
}

async fn log_stderr(pid: u32, language: &'static str, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(target: "service_python::worker", pid, language, "{line}");
    }
}

/// Dispatches the worker's messages until it exits, then fails what it had in flight
/// and starts a replacement.
async fn read_stdout(
    pool: Weak<Pool>,
    worker: Arc<Worker>,
    mut lines: BufReader<ChildStdout>,
    mut child: Child,
) {
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match serde_json::from_slice::<Map<String, Value>>(&line) {
            Ok(message) => dispatch(&pool, &worker, message),
            Err(error) => {
                tracing::error!(pid = worker.pid, %error, "unreadable message from the {} worker", worker.language)
            }
        }
    }
    worker.alive.store(false, Ordering::Relaxed);
    let status = child
        .wait()
        .await
        .map_or_else(|error| error.to_string(), |s| s.to_string());
    let Some(pool) = pool.upgrade() else { return };
    if pool.stopped.load(Ordering::Relaxed) {
        return;
    }
    let language = worker.language;
    let cause = RunError::new(
        "WorkerExited",
        format!(
            "the {language} worker (pid {}) exited ({status})",
            worker.pid
        ),
    );
    tracing::error!(pid = worker.pid, %status, "a {language} worker exited; its runs fail and a new worker starts");
    worker.fail_all(&cause);
    let weak = Arc::downgrade(&pool);
    drop(pool);
    replace(weak, worker).await;
}

/// Starts a worker in place of `dead`, retrying with a growing pause while starting
/// fails (a broken environment must not spin).
async fn replace(pool: Weak<Pool>, dead: Arc<Worker>) {
    let mut pause = Duration::from_millis(250);
    loop {
        match spawn(pool.clone()).await {
            Ok((worker, _)) => {
                let Some(pool) = pool.upgrade() else { return };
                if pool.stopped.load(Ordering::Relaxed) {
                    return;
                }
                let mut workers = pool
                    .workers
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                workers.retain(|worker| !Arc::ptr_eq(worker, &dead));
                pool.restarts.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    pid = worker.pid,
                    "a new {} worker replaced the one that exited",
                    worker.language
                );
                workers.push(worker);
                return;
            }
            Err(error) => {
                if pool
                    .upgrade()
                    .is_none_or(|pool| pool.stopped.load(Ordering::Relaxed))
                {
                    return;
                }
                tracing::error!(%error, "restarting a {} worker failed; retrying in {pause:?}", dead.language);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// Routes one message of the worker: a call to the server's checkpointer or store, or
/// a frame of a request.
fn dispatch(pool: &Weak<Pool>, worker: &Arc<Worker>, mut message: Map<String, Value>) {
    if let Some(call) = message.get("call").and_then(Value::as_u64) {
        let (store, scope) = message
            .get("id")
            .and_then(Value::as_u64)
            .map_or((None, None), |request| worker.call_context(request));
        let checkpointer = pool
            .upgrade()
            .and_then(|pool| pool.checkpointer.get().cloned());
        let worker = Arc::clone(worker);
        let serve = async move {
            let reply = match calls::serve(checkpointer, store, message).await {
                Ok(value) => json!({"reply": call, "ok": value}),
                Err(error) => json!({"reply": call, "err": error.to_string()}),
            };
            worker.send(&reply);
        };
        match scope {
            Some(scope) => tokio::spawn(scope.instrument(serve)),
            None => tokio::spawn(serve),
        };
        return;
    }
    let Some(id) = message.get("id").and_then(Value::as_u64) else {
        return;
    };
    if let Some(node) = message.get("node") {
        if let Some(trace) = worker
            .lock()
            .get_mut(&id)
            .and_then(|pending| pending.trace.as_mut())
        {
            trace.node(node);
        }
        return;
    }
    let frame = if let Some(chunk) = message.remove("chunk") {
        Frame::Chunk(chunk)
    } else if let Some(result) = message.remove("ok") {
        Frame::Done(Ok(result))
    } else if let Some(error) = message.get("err") {
        Frame::Done(Err(python_error(error)))
    } else if message.contains_key("cancelled") {
        Frame::Done(Err(GraphError::Cancelled))
    } else {
        return;
    };
    let done = matches!(frame, Frame::Done(_));
    let mut pending = worker.lock();
    if let Some(request) = pending.get(&id) {
        let _ = request.frames.send(frame);
    }
    if done && pending.remove(&id).is_some() {
        worker.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
