//! Store and checkpointer calls as spans (`store.runs.create`, `checkpoint.put`, ...)
//! of the request, run or node that makes them: every repository and the saver wrapped
//! once at boot, only when traces are exported, so a server without an exporter calls
//! its store directly. A call makes no spans of its own, so its span is not made the
//! current scope: it is recorded from the caller's scope and ended as the call
//! returns (or is dropped), only inside a sampled span.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use service_graph::trace_context::{self, SpanKind};
use service_graph::{
    CheckpointConfig, CheckpointListOptions, CheckpointTuple, Checkpointer, GraphError, NamedStep,
};
use service_store::{
    ActiveRunsQuery, AssistantFilter, AssistantPage, AssistantPatch, AssistantQuery,
    AssistantsRepo, AttemptOutcome, Begin, CancelOutcome, ClaimNext, Claimed, ClaimedRun,
    CronFilter, CronPatch, CronQuery, CronsRepo, DeliveriesRepo, DeliveryQuery, DeliveryRecord,
    IdempotencyRepo, ItemSearch, ItemsRepo, NamespaceQuery, NewAssistant, NewCron, NewRun,
    NewThread, PutItem, RunListQuery, RunsRepo, Settled, SettledAndMirrored, Settlement, StateHold,
    Store, StoreParts, StoreResult, StoredResponse, ThreadAndActive, ThreadFilter, ThreadMirror,
    ThreadPatch, ThreadQuery, ThreadRunCreated, ThreadsRepo, VersionQuery,
};
use service_types::{
    Assistant, AssistantVersion, Cron, Delivery, IfExists, Item, JsonText, Metadata, PruneStrategy,
    Run, SearchItem, Thread, ThreadStatus, Timestamp,
};
use uuid::Uuid;

/// A repository or saver whose every call is a span named `<prefix>.<method>`.
struct Traced<T: ?Sized>(Arc<T>);

/// Implements `$trait` for `Traced<dyn $trait>` by forwarding each listed method in a
/// span of its own. A method whose arguments are all owned returns its repository's
/// future as it is when the call is not traced, and boxed with its span when it is
/// (the arguments are not moved into a future of our own first: docs/performance.md
/// §17); one that borrows an argument is an `async fn`, whose signature
/// `async_trait` writes.
macro_rules! traced {
    ($trait:ident, $prefix:literal, {
        $(fn $method:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $out:ty;)*
    } borrowing {
        $(fn $borrowing:ident(&self $(, $barg:ident: $bty:ty)* $(,)?) -> $bout:ty;)*
    }) => {
        #[async_trait]
        impl $trait for Traced<dyn $trait> {
            $(
                fn $method<'life0, 'async_trait>(
                    &'life0 self $(, $arg: $ty)*
                ) -> Pin<Box<dyn Future<Output = $out> + Send + 'async_trait>>
                where
                    'life0: 'async_trait,
                    Self: 'async_trait,
                {
                    in_call_span(
                        concat!($prefix, ".", stringify!($method)),
                        self.0.$method($($arg),*),
                    )
                }
            )*
            $(
                async fn $borrowing(&self $(, $barg: $bty)*) -> $bout {
                    let call = self.0.$borrowing($($barg),*);
                    let _span = trace_context::call_span(
                        concat!($prefix, ".", stringify!($borrowing)),
                        SpanKind::Client,
                    );
                    call.await
                }
            )*
        }
    };
}

/// `call` ended with a span of its own, when it is made inside a sampled span (the
/// caller is being polled, so its scope is the thread's). Background work outside any
/// span (sweepers, pollers) starts no trace of its own per call.
fn in_call_span<'a, T: 'a>(
    name: &'static str,
    call: Pin<Box<dyn Future<Output = T> + Send + 'a>>,
) -> Pin<Box<dyn Future<Output = T> + Send + 'a>> {
    match trace_context::call_span(name, SpanKind::Client) {
        None => call,
        Some(span) => Box::pin(async move {
            let _span = span;
            call.await
        }),
    }
}

traced!(RunsRepo, "store.runs", {
    fn create(&self, new: NewRun, thread_metadata: Metadata) -> StoreResult<Run>;
    fn thread_and_active(&self, thread_id: Uuid) -> StoreResult<Option<ThreadAndActive>>;
    fn create_with_thread(&self, thread: NewThread, run: NewRun) -> StoreResult<ThreadRunCreated>;
    fn get(&self, run_id: Uuid) -> StoreResult<Option<Run>>;
    fn latest(&self, thread_id: Uuid) -> StoreResult<Option<Run>>;
    fn claim_next(&self, now: Timestamp) -> StoreResult<Option<Claimed>>;
    fn claim(&self, run_id: Uuid, now: Timestamp) -> StoreResult<Option<ClaimedRun>>;
    fn next_available_at(&self, now: Timestamp) -> StoreResult<Option<Timestamp>>;
    fn cancel_requested(&self, run_id: Uuid) -> StoreResult<bool>;
    fn settle(&self, run_id: Uuid, settlement: Settlement) -> StoreResult<Settled>;
    fn settle_and_mirror(
        &self,
        run_id: Uuid,
        settlement: Settlement,
        mirror: ThreadMirror,
        next: Option<ClaimNext>,
    ) -> StoreResult<SettledAndMirrored>;
    fn delete(&self, run_id: Uuid) -> StoreResult<()>;
} borrowing {
    fn list(&self, thread_id: Uuid, query: &RunListQuery) -> StoreResult<Vec<Run>>;
    fn active(&self, query: &ActiveRunsQuery) -> StoreResult<Vec<Run>>;
    fn request_cancel(&self, run_id: Uuid, reason: &str) -> StoreResult<CancelOutcome>;
});

traced!(ThreadsRepo, "store.threads", {
    fn create(&self, new: NewThread, if_exists: IfExists) -> StoreResult<Thread>;
    fn get(&self, thread_id: Uuid) -> StoreResult<Option<Thread>>;
    fn patch(&self, thread_id: Uuid, patch: ThreadPatch) -> StoreResult<Thread>;
    fn set_status(&self, thread_id: Uuid, status: ThreadStatus) -> StoreResult<()>;
    fn mirror(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<()>;
    fn mirror_after_run(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<bool>;
    fn hold_state(&self, thread_id: Uuid, until: Timestamp) -> StoreResult<StateHold>;
    fn release_state(&self, hold: StateHold) -> StoreResult<()>;
    fn delete(&self, thread_id: Uuid) -> StoreResult<()>;
    fn copy(&self, source: Uuid, new_id: Uuid) -> StoreResult<Thread>;
    fn expired(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Uuid>>;
} borrowing {
    fn search(&self, query: &ThreadQuery) -> StoreResult<Vec<Thread>>;
    fn count(&self, filter: &ThreadFilter) -> StoreResult<u64>;
});

traced!(AssistantsRepo, "store.assistants", {
    fn create(&self, new: NewAssistant, if_exists: IfExists) -> StoreResult<Assistant>;
    fn get(&self, assistant_id: Uuid) -> StoreResult<Option<Assistant>>;
    fn update(&self, assistant_id: Uuid, patch: AssistantPatch) -> StoreResult<Assistant>;
    fn set_latest(&self, assistant_id: Uuid, version: i64) -> StoreResult<Assistant>;
    fn delete(&self, assistant_id: Uuid) -> StoreResult<()>;
} borrowing {
    fn search(&self, query: &AssistantQuery) -> StoreResult<AssistantPage>;
    fn count(&self, filter: &AssistantFilter) -> StoreResult<u64>;
    fn versions(
        &self,
        assistant_id: Uuid,
        query: &VersionQuery,
    ) -> StoreResult<Vec<AssistantVersion>>;
});

traced!(CronsRepo, "store.crons", {
    fn create(&self, new: NewCron) -> StoreResult<Cron>;
    fn get(&self, cron_id: Uuid) -> StoreResult<Option<Cron>>;
    fn update(&self, cron_id: Uuid, patch: CronPatch) -> StoreResult<Cron>;
    fn delete(&self, cron_id: Uuid) -> StoreResult<()>;
    fn set_enabled(&self, cron_id: Uuid, enabled: bool) -> StoreResult<Cron>;
    fn due(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Cron>>;
    fn advance(&self, cron_id: Uuid, fired_for: Timestamp) -> StoreResult<Option<Cron>>;
} borrowing {
    fn search(&self, query: &CronQuery) -> StoreResult<Vec<Cron>>;
    fn count(&self, filter: &CronFilter) -> StoreResult<u64>;
});

traced!(ItemsRepo, "store.items", {
    fn put(&self, item: PutItem) -> StoreResult<()>;
    fn sweep_expired(&self, now: Timestamp) -> StoreResult<u64>;
} borrowing {
    fn get(&self, namespace: &[String], key: &str, refresh: bool) -> StoreResult<Option<Item>>;
    fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()>;
    fn search(&self, search: &ItemSearch) -> StoreResult<Vec<SearchItem>>;
    fn list_namespaces(&self, query: &NamespaceQuery) -> StoreResult<Vec<Vec<String>>>;
});

traced!(IdempotencyRepo, "store.idempotency", {
    fn expire(&self, now: Timestamp) -> StoreResult<u64>;
} borrowing {
    fn begin(
        &self,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Begin>;
    fn complete(&self, key: &str, response: StoredResponse) -> StoreResult<()>;
    fn abandon(&self, key: &str) -> StoreResult<()>;
});

traced!(DeliveriesRepo, "store.deliveries", {
    fn get(&self, delivery_id: Uuid) -> StoreResult<Option<DeliveryRecord>>;
    fn claim(
        &self,
        delivery_id: Uuid,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<DeliveryRecord>>;
    fn claim_due(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<DeliveryRecord>>;
    fn finish_attempt(
        &self,
        delivery_id: Uuid,
        outcome: AttemptOutcome,
    ) -> StoreResult<DeliveryRecord>;
    fn replay(&self, run_id: Uuid, delivery_id: Uuid) -> StoreResult<Delivery>;
    fn purge_expired(&self, now: Timestamp) -> StoreResult<u64>;
    fn count_awaiting_retry(&self) -> StoreResult<u64>;
} borrowing {
    fn list(&self, run_id: Uuid, query: &DeliveryQuery) -> StoreResult<Vec<Delivery>>;
});

/// The writes of a superstep's tasks, as the saver takes them.
type TaskWrites = Vec<(String, Vec<(String, Value)>)>;

traced!(Checkpointer, "checkpoint", {
} borrowing {
    fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, GraphError>;
    fn list(
        &self,
        config: &CheckpointConfig,
        options: CheckpointListOptions,
    ) -> Result<Vec<CheckpointTuple>, GraphError>;
    fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError>;
    fn put_named(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError>;
    fn put_writes(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
    ) -> Result<(), GraphError>;
    fn put_after_writes(
        &self,
        config: &CheckpointConfig,
        task_writes: TaskWrites,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError>;
    fn put_steps(&self, config: &CheckpointConfig, steps: Vec<NamedStep>) -> Result<(), GraphError>;
    fn merge_metadata(
        &self,
        config: &CheckpointConfig,
        metadata: Metadata,
    ) -> Result<(), GraphError>;
    fn delete_thread(&self, thread_id: &str) -> Result<(), GraphError>;
    fn copy_thread(&self, from: &str, to: &str) -> Result<(), GraphError>;
    fn prune(&self, thread_id: &str, strategy: PruneStrategy) -> Result<(), GraphError>;
    fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<(), GraphError>;
});

/// `store` with every repository call a span.
pub(super) fn traced_store(store: &Store) -> Store {
    let parts = store.parts();
    Store::new(StoreParts {
        assistants: Arc::new(Traced(parts.assistants)),
        threads: Arc::new(Traced(parts.threads)),
        runs: Arc::new(Traced(parts.runs)),
        crons: Arc::new(Traced(parts.crons)),
        items: Arc::new(Traced(parts.items)),
        idempotency: Arc::new(Traced(parts.idempotency)),
        deliveries: parts
            .deliveries
            .map(|deliveries| Arc::new(Traced(deliveries)) as Arc<dyn DeliveriesRepo>),
        ..parts
    })
}

/// `checkpointer` with every call a span.
pub(super) fn traced_checkpointer(checkpointer: Arc<dyn Checkpointer>) -> Arc<dyn Checkpointer> {
    Arc::new(Traced(checkpointer))
}
