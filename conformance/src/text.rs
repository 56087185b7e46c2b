//! Text rules: no string the store keeps or queries may hold NUL (U+0000). PostgreSQL
//! cannot store one, so every driver refuses it as `Invalid` and writes nothing.

use serde_json::{Value, json};
use service_store::{
    AssistantFilter, ErrorKind, ItemSearch, NamespaceQuery, NewAssistant, NewCron, NewThread,
    PutItem, StoreFilter, ThreadFilter, ThreadPatch, ThreadQuery, TtlChange,
};
use service_types::{IfExists, Metadata, ThreadStatus};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind, ns, obj};

const NUL: &str = "a\u{0}b";

fn new_thread(metadata: Value) -> NewThread {
    NewThread {
        thread_id: Uuid::now_v7(),
        metadata: obj(metadata),
        status: ThreadStatus::Idle,
        ttl: None,
    }
}

/// A NUL in a thread's metadata (value or key), on create or patch, is refused and
/// changes nothing.
pub async fn nul_in_thread_metadata_is_invalid_and_writes_nothing(factory: Factory) {
    let h = Harness::new(&factory).await;
    for metadata in [
        json!({"k": NUL}),
        json!({NUL: 1}),
        json!({"k": {"deep": [NUL]}}),
    ] {
        let new = new_thread(metadata);
        let thread_id = new.thread_id;
        assert_kind(
            h.store.threads().create(new, IfExists::Raise).await,
            ErrorKind::Invalid,
        );
        assert_eq!(h.store.threads().get(thread_id).await.expect("get"), None);
    }
    let thread = h.thread_with(json!({"k": "v"})).await;
    let patch = ThreadPatch {
        metadata: Some(obj(json!({"k": NUL}))),
        ttl: TtlChange::Keep,
    };
    assert_kind(
        h.store.threads().patch(thread.thread_id, patch).await,
        ErrorKind::Invalid,
    );
    assert_eq!(
        h.store.threads().get(thread.thread_id).await.expect("get"),
        Some(thread)
    );
}

/// A NUL in an item's namespace, key or value is refused and stores nothing; reading
/// or deleting with a NUL in the namespace or key is refused too.
pub async fn nul_in_an_item_is_invalid_and_writes_nothing(factory: Factory) {
    let h = Harness::new(&factory).await;
    let puts = [
        (ns(&["a", NUL]), "k".to_owned(), json!({})),
        (ns(&["a"]), NUL.to_owned(), json!({})),
        (ns(&["a"]), "k".to_owned(), json!({"v": NUL})),
        (ns(&["a"]), "k".to_owned(), json!({NUL: true})),
    ];
    for (namespace, key, value) in puts {
        let put = PutItem {
            namespace,
            key,
            value: obj(value),
            ttl_minutes: None,
            vectors: Vec::new(),
        };
        assert_kind(h.store.items().put(put).await, ErrorKind::Invalid);
    }
    let everything = NamespaceQuery {
        prefix: None,
        suffix: None,
        max_depth: None,
        limit: None,
        offset: 0,
    };
    assert_eq!(
        h.store
            .items()
            .list_namespaces(&everything)
            .await
            .expect("list"),
        Vec::<Vec<String>>::new(),
        "nothing was stored"
    );
    assert_kind(
        h.store.items().get(&ns(&["a"]), NUL, false).await,
        ErrorKind::Invalid,
    );
    assert_kind(
        h.store.items().get(&ns(&[NUL]), "k", true).await,
        ErrorKind::Invalid,
    );
    assert_kind(
        h.store.items().delete(&ns(&["a"]), NUL).await,
        ErrorKind::Invalid,
    );
}

/// A NUL in what a search or count asks for (a filter, a namespace pattern, a
/// metadata match) is refused rather than matched.
pub async fn nul_in_a_search_is_invalid(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.thread_with(json!({"k": "v"})).await;
    h.put(&["a"], "k", json!({"v": 1})).await;
    assert_kind(
        StoreFilter::from_object(&obj(json!({NUL: 1}))),
        ErrorKind::Invalid,
    );
    assert_kind(
        StoreFilter::from_object(&obj(json!({"v": {"$eq": NUL}}))),
        ErrorKind::Invalid,
    );
    let search = ItemSearch {
        namespace_prefix: ns(&[NUL]),
        filter: StoreFilter::default(),
        query: None,
        limit: None,
        offset: 0,
        refresh_ttl: false,
    };
    assert_kind(h.store.items().search(&search).await, ErrorKind::Invalid);
    let namespaces = NamespaceQuery {
        prefix: Some(ns(&[NUL])),
        suffix: None,
        max_depth: None,
        limit: None,
        offset: 0,
    };
    assert_kind(
        h.store.items().list_namespaces(&namespaces).await,
        ErrorKind::Invalid,
    );
    let filter = ThreadFilter {
        metadata: Some(obj(json!({"k": NUL}))),
        ..ThreadFilter::default()
    };
    assert_kind(h.store.threads().count(&filter).await, ErrorKind::Invalid);
    let query = ThreadQuery {
        filter,
        ..ThreadQuery::default()
    };
    assert_kind(h.store.threads().search(&query).await, ErrorKind::Invalid);
    let assistants = AssistantFilter {
        name: Some(NUL.into()),
        ..AssistantFilter::default()
    };
    assert_kind(
        h.store.assistants().count(&assistants).await,
        ErrorKind::Invalid,
    );
}

/// A NUL in an assistant or a cron is refused and stores nothing.
pub async fn nul_in_an_assistant_or_cron_is_invalid_and_writes_nothing(factory: Factory) {
    let h = Harness::new(&factory).await;
    let assistant = |name: &str, metadata: Value| NewAssistant {
        assistant_id: Uuid::now_v7(),
        graph_id: "echo".into(),
        config: Default::default(),
        context: Default::default(),
        metadata: obj(metadata),
        name: name.into(),
        description: None,
    };
    for new in [assistant(NUL, json!({})), assistant("a", json!({"k": NUL}))] {
        let assistant_id = new.assistant_id;
        assert_kind(
            h.store.assistants().create(new, IfExists::Raise).await,
            ErrorKind::Invalid,
        );
        assert_eq!(
            h.store.assistants().get(assistant_id).await.expect("get"),
            None
        );
    }
    let cron = NewCron {
        cron_id: Uuid::now_v7(),
        assistant_id: Some(Uuid::now_v7()),
        thread_id: None,
        user_id: None,
        schedule: "* * * * *".into(),
        timezone: None,
        end_time: None,
        payload: json!({"input": {"x": NUL}}),
        metadata: Metadata::new(),
        on_run_completed: None,
        enabled: true,
    };
    let cron_id = cron.cron_id;
    assert_kind(h.store.crons().create(cron).await, ErrorKind::Invalid);
    assert_eq!(h.store.crons().get(cron_id).await.expect("get"), None);
}

/// A NUL in a new run (its metadata or options) is refused: no run, and its thread is
/// left as it was (not marked busy), also for a thread that was to be made with it.
pub async fn nul_in_a_new_run_is_invalid_and_leaves_its_thread_as_it_was(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await;
    let in_options = service_store::NewRun {
        kwargs: json!({"input": {"x": NUL}}),
        ..h.new_run(thread.thread_id)
    };
    let in_metadata = service_store::NewRun {
        metadata: obj(json!({"k": NUL})),
        ..h.new_run(thread.thread_id)
    };
    for new in [in_options, in_metadata] {
        let run_id = new.run_id;
        assert_kind(
            h.store
                .runs()
                .create(new, obj(json!({"graph_id": "echo"})))
                .await,
            ErrorKind::Invalid,
        );
        assert_eq!(h.store.runs().get(run_id).await.expect("get"), None);
    }
    assert_eq!(
        h.store.threads().get(thread.thread_id).await.expect("get"),
        Some(thread)
    );
    let made = new_thread(json!({}));
    let made_id = made.thread_id;
    let run = service_store::NewRun {
        kwargs: json!({"input": {"x": NUL}}),
        ..h.new_run(made_id)
    };
    assert_kind(
        h.store.runs().create_with_thread(made, run).await,
        ErrorKind::Invalid,
    );
    assert_eq!(h.store.threads().get(made_id).await.expect("get"), None);
}
