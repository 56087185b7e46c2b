//! What every conformance test gets: a fresh store from the driver's factory, the
//! manual clock it was built with, and small builders for rows.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use service_graph::Checkpointer;
use service_store::{
    ErrorKind, IndexSpec, ManualClock, NewRun, NewThread, PageLimits, PutItem, Settlement, Store,
    StoreResult,
};
use service_types::{IfExists, Metadata, Run, RunStatus, Thread, ThreadStatus, Timestamp};
use uuid::Uuid;

/// What a factory needs to build a fresh, empty store for one test.
#[derive(Clone, Debug)]
pub struct TestEnv {
    /// The clock the driver must read "now" from.
    pub clock: Arc<ManualClock>,
    /// The page bounds the driver must enforce (SERVICE_MAX_PAGE_SIZE).
    pub limits: PageLimits,
    /// The semantic index to build the store with (`store.index`); `None` for every
    /// rule but the semantic ones. A driver without semantic search ignores it.
    pub index: Option<IndexSpec>,
}

/// What a factory builds: a store, and the checkpointer runs on it write to, whose
/// checkpoints its claims see.
pub struct TestStore {
    /// The store.
    pub store: Store,
    /// Its checkpointer.
    pub checkpointer: Arc<dyn Checkpointer>,
}

impl std::fmt::Debug for TestStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestStore")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// Builds a fresh, empty store per test (for SQL: a fresh schema).
#[async_trait]
pub trait StoreFactory: Send + Sync + 'static {
    /// A new empty store honouring `env`.
    async fn build(&self, env: TestEnv) -> TestStore;
}

#[async_trait]
impl<F, Fut> StoreFactory for F
where
    F: Fn(TestEnv) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = TestStore> + Send,
{
    async fn build(&self, env: TestEnv) -> TestStore {
        self(env).await
    }
}

/// A shared factory, as tests receive it.
pub type Factory = Arc<dyn StoreFactory>;

/// Runs one async conformance test on a fresh multi-threaded runtime.
pub fn run<F, Fut>(factory: impl StoreFactory, test: F)
where
    F: FnOnce(Factory) -> Fut,
    Fut: Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(test(Arc::new(factory)));
}

/// The instant every test's clock starts at.
pub fn start_time() -> Timestamp {
    Timestamp::parse("2025-01-15T12:00:00Z").expect("valid start time")
}

/// A fresh store, its checkpointer and its clock.
#[derive(Clone)]
pub struct Harness {
    /// The store under test.
    pub store: Store,
    /// The checkpointer whose checkpoints the store's claims see.
    pub checkpointer: Arc<dyn Checkpointer>,
    /// Its clock.
    pub clock: Arc<ManualClock>,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("store", &self.store)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Harness {
    /// A fresh store with default page bounds.
    pub async fn new(factory: &Factory) -> Self {
        Self::build(factory, PageLimits::default(), None).await
    }

    /// A fresh store whose max page size is `max_page_size`.
    pub async fn with_max_page_size(factory: &Factory, max_page_size: usize) -> Self {
        Self::build(factory, PageLimits::new(max_page_size), None).await
    }

    /// A fresh store with a semantic index of `spec`.
    pub async fn with_index(factory: &Factory, spec: IndexSpec) -> Self {
        Self::build(factory, PageLimits::default(), Some(spec)).await
    }

    async fn build(factory: &Factory, limits: PageLimits, index: Option<IndexSpec>) -> Self {
        let clock = Arc::new(ManualClock::new(start_time()));
        let TestStore {
            store,
            checkpointer,
        } = factory
            .build(TestEnv {
                clock: clock.clone(),
                limits,
                index,
            })
            .await;
        Self {
            store,
            checkpointer,
            clock,
        }
    }

    /// The clock's now.
    pub fn now(&self) -> Timestamp {
        service_store::Clock::now(self.clock.as_ref())
    }

    /// Moves time forward.
    pub fn advance_minutes(&self, minutes: f64) {
        self.clock.advance_minutes(minutes);
    }

    /// A new thread with `metadata` (a JSON object).
    pub async fn thread_with(&self, metadata: Value) -> Thread {
        let new = NewThread {
            thread_id: Uuid::now_v7(),
            metadata: obj(metadata),
            status: ThreadStatus::Idle,
            ttl: None,
        };
        self.store
            .threads()
            .create(new, IfExists::Raise)
            .await
            .expect("create thread")
    }

    /// A new thread without metadata.
    pub async fn thread(&self) -> Thread {
        self.thread_with(json!({})).await
    }

    /// A stored assistant of the `echo` graph named `a`.
    pub async fn assistant(&self) -> service_types::Assistant {
        self.store
            .assistants()
            .create(
                service_store::NewAssistant {
                    assistant_id: Uuid::now_v7(),
                    graph_id: "echo".into(),
                    config: Default::default(),
                    context: Default::default(),
                    metadata: Default::default(),
                    name: "a".into(),
                    description: None,
                },
                IfExists::Raise,
            )
            .await
            .expect("assistant")
    }

    /// A pending run on `thread_id`, available now.
    pub async fn run_on(&self, thread_id: Uuid) -> Run {
        self.store
            .runs()
            .create(self.new_run(thread_id), Metadata::new())
            .await
            .expect("create run")
    }

    /// A new-run input on `thread_id`, available now.
    pub fn new_run(&self, thread_id: Uuid) -> NewRun {
        NewRun {
            run_id: Uuid::now_v7(),
            thread_id,
            assistant_id: Uuid::now_v7(),
            metadata: Metadata::new(),
            multitask_strategy: None,
            kwargs: json!({}),
            available_at: self.now(),
            assistant_as_read: None,
            claimed: false,
            traceparent: None,
        }
    }

    /// A run on `thread_id` that a worker claimed (running, started).
    pub async fn started_run(&self, thread_id: Uuid) -> Run {
        let run = self.run_on(thread_id).await;
        let claimed = self
            .store
            .runs()
            .claim_next(self.now())
            .await
            .expect("claim");
        assert_eq!(
            claimed.map(|claimed| claimed.run.run_id),
            Some(run.run_id),
            "the only pending run is claimed"
        );
        self.store
            .runs()
            .get(run.run_id)
            .await
            .expect("get")
            .expect("run exists")
    }

    /// Writes an item without ttl.
    pub async fn put(&self, namespace: &[&str], key: &str, value: Value) {
        self.put_with_ttl(namespace, key, value, None).await;
    }

    /// Writes an item with an optional ttl in minutes.
    pub async fn put_with_ttl(
        &self,
        namespace: &[&str],
        key: &str,
        value: Value,
        ttl_minutes: Option<f64>,
    ) {
        let item = PutItem {
            namespace: ns(namespace),
            key: key.to_owned(),
            value: obj(value),
            ttl_minutes,
            vectors: Vec::new(),
        };
        self.store.items().put(item).await.expect("put item");
    }
}

/// A thread as a run made with it creates it: busy, without metadata or TTL.
pub fn busy_thread(thread_id: Uuid) -> NewThread {
    NewThread {
        thread_id,
        metadata: Metadata::new(),
        status: ThreadStatus::Busy,
        ttl: None,
    }
}

/// A namespace from string slices.
pub fn ns(path: &[&str]) -> Vec<String> {
    path.iter().map(|segment| (*segment).to_owned()).collect()
}

/// The object inside a `json!` literal.
pub fn obj(value: Value) -> Metadata {
    match value {
        Value::Object(map) => map,
        other => panic!("expected a JSON object, got {other}"),
    }
}

/// A settlement without error or webhook.
pub fn settlement(status: RunStatus) -> Settlement {
    Settlement {
        status,
        error: None,
        interrupted: false,
        webhook: None,
    }
}

/// Asserts that `result` failed with `kind`.
pub fn assert_kind<T: std::fmt::Debug>(result: StoreResult<T>, kind: ErrorKind) {
    match result {
        Err(error) => assert_eq!(error.kind, kind, "unexpected error kind: {error}"),
        Ok(value) => panic!("expected a {kind} error, got {value:?}"),
    }
}
