//! Threads: create, patch, mirror, search with enforced metadata, count, copy, and
//! the delete cascade.

use serde_json::json;
use service_store::containment::Enforced;
use service_store::{
    CronFilter, ErrorKind, NewCron, NewThread, RunListQuery, ThreadFilter, ThreadMirror,
    ThreadPatch, ThreadQuery, ThreadSortBy,
};
use service_types::{IfExists, Interrupt, Metadata, SortOrder, Thread, ThreadStatus};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind, obj};

async fn read(h: &Harness, thread_id: Uuid) -> Thread {
    h.store
        .threads()
        .get(thread_id)
        .await
        .expect("get")
        .expect("thread exists")
}

async fn search_ids(h: &Harness, filter: ThreadFilter) -> Vec<Uuid> {
    let query = ThreadQuery {
        filter,
        sort_by: ThreadSortBy::ThreadId,
        sort_order: SortOrder::Asc,
        ..Default::default()
    };
    h.store
        .threads()
        .search(&query)
        .await
        .expect("search")
        .into_iter()
        .map(|t| t.thread_id)
        .collect()
}

async fn sorted_by(h: &Harness, sort_by: ThreadSortBy, sort_order: SortOrder) -> Vec<Uuid> {
    let query = ThreadQuery {
        sort_by,
        sort_order,
        ..Default::default()
    };
    h.store
        .threads()
        .search(&query)
        .await
        .expect("search")
        .into_iter()
        .map(|t| t.thread_id)
        .collect()
}

fn sorted(mut ids: Vec<Uuid>) -> Vec<Uuid> {
    ids.sort();
    ids
}

fn cron_on(thread_id: Option<Uuid>) -> NewCron {
    NewCron {
        cron_id: Uuid::now_v7(),
        assistant_id: None,
        thread_id,
        user_id: None,
        schedule: "*/5 * * * *".into(),
        timezone: None,
        end_time: None,
        payload: json!({}),
        metadata: Metadata::new(),
        on_run_completed: None,
        enabled: true,
    }
}

/// A new thread is idle with null values, no interrupts, no error.
pub async fn thread_create_is_idle_with_null_values(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread_with(json!({"owner": "a"})).await;
    assert_eq!(thread.status, ThreadStatus::Idle);
    assert_eq!(
        (thread.values.clone(), thread.error.clone(), thread.ttl),
        (None, None, None)
    );
    assert!(thread.interrupts.is_empty());
    assert_eq!((thread.created_at, thread.updated_at), (h.now(), h.now()));
    assert_eq!(
        h.store.threads().get(thread.thread_id).await.expect("get"),
        Some(thread)
    );
}

/// A thread made to run something at once is created busy, and stays so.
pub async fn thread_created_busy_reads_back_busy(factory: Factory) {
    let h = Harness::new(&factory).await;
    let new = NewThread {
        thread_id: Uuid::now_v7(),
        metadata: obj(json!({"graph_id": "echo"})),
        status: ThreadStatus::Busy,
        ttl: None,
    };
    let thread = h
        .store
        .threads()
        .create(new, IfExists::Raise)
        .await
        .expect("create");
    assert_eq!(thread.status, ThreadStatus::Busy);
    assert_eq!(read(&h, thread.thread_id).await, thread);
    let busy = ThreadFilter {
        status: Some(ThreadStatus::Busy),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, busy).await, vec![thread.thread_id]);
}

/// An existing id conflicts with `raise` and is returned unchanged with `do_nothing`.
pub async fn thread_create_existing_conflicts_or_returns_existing(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await;
    let again = NewThread {
        thread_id: thread.thread_id,
        metadata: obj(json!({"x": 1})),
        status: ThreadStatus::Idle,
        ttl: None,
    };
    let error = h
        .store
        .threads()
        .create(again.clone(), IfExists::Raise)
        .await
        .expect_err("duplicate");
    assert_eq!(error.kind, ErrorKind::Conflict);
    assert_eq!(
        error.message,
        format!("Thread with ID {} already exists", thread.thread_id)
    );
    assert_eq!(
        h.store
            .threads()
            .create(again, IfExists::DoNothing)
            .await
            .expect("do nothing"),
        thread
    );
}

/// Patch shallow-merges metadata and bumps updated_at; unknown ids are NotFound.
pub async fn thread_patch_merges_metadata_and_bumps_updated_at(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread_with(json!({"a": 1, "b": {"x": 1}})).await;
    h.advance_minutes(1.0);
    let patch = ThreadPatch {
        metadata: Some(obj(json!({"b": {"y": 2}, "c": 3}))),
        ..Default::default()
    };
    let patched = h
        .store
        .threads()
        .patch(thread.thread_id, patch.clone())
        .await
        .expect("patch");
    assert_eq!(
        patched.metadata,
        obj(json!({"a": 1, "b": {"y": 2}, "c": 3}))
    );
    assert_eq!(patched.updated_at, h.now());
    assert_eq!(patched.created_at, thread.created_at);
    assert_kind(
        h.store.threads().patch(Uuid::now_v7(), patch).await,
        ErrorKind::NotFound,
    );
    assert_kind(
        h.store.threads().delete(Uuid::now_v7()).await,
        ErrorKind::NotFound,
    );
}

/// Mirroring a failure writes `error` and `metadata.error`; a later success clears both.
pub async fn thread_mirror_error_writes_metadata_error_and_success_clears_it(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread_with(json!({"keep": true})).await;
    h.advance_minutes(1.0);
    let failed = ThreadMirror {
        status: ThreadStatus::Error,
        values: Some(json!({"n": 1})),
        interrupts: Default::default(),
        error: Some("boom".into()),
    };
    h.store
        .threads()
        .mirror(thread.thread_id, failed)
        .await
        .expect("mirror");
    let mirrored = read(&h, thread.thread_id).await;
    assert_eq!(
        (mirrored.status, mirrored.error.as_deref()),
        (ThreadStatus::Error, Some("boom"))
    );
    assert_eq!(
        mirrored.metadata,
        obj(json!({"keep": true, "error": "boom"}))
    );
    assert_eq!(
        (mirrored.values.clone(), mirrored.state_updated_at),
        (Some(json!({"n": 1})), h.now())
    );
    h.advance_minutes(1.0);
    let interrupt = Interrupt {
        id: "i1".into(),
        value: json!("ok?"),
    };
    let paused = ThreadMirror {
        status: ThreadStatus::Interrupted,
        values: None,
        interrupts: [("task".to_owned(), vec![interrupt])].into_iter().collect(),
        error: None,
    };
    h.store
        .threads()
        .mirror(thread.thread_id, paused)
        .await
        .expect("mirror");
    let mirrored = read(&h, thread.thread_id).await;
    assert_eq!(
        (mirrored.status, mirrored.error.clone()),
        (ThreadStatus::Interrupted, None)
    );
    assert_eq!(mirrored.metadata, obj(json!({"keep": true})));
    assert_eq!(
        mirrored.values,
        Some(json!({"n": 1})),
        "values absent from the mirror are kept"
    );
    assert_eq!(mirrored.interrupts["task"][0].id, "i1");
    assert_eq!(mirrored.updated_at, h.now());
}

/// After a run, the mirror keeps the thread busy while another run waits on it (and
/// says so), and releases it once none does; the outcome is written either way.
pub async fn thread_mirror_after_run_stays_busy_while_runs_wait(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await.thread_id;
    let first = h.started_run(thread).await.run_id;
    let second = h.run_on(thread).await.run_id;
    let hr = &h;
    let settle = move |run_id| async move {
        hr.store
            .runs()
            .settle(
                run_id,
                crate::harness::settlement(service_types::RunStatus::Success),
            )
            .await
            .expect("settle")
    };
    settle(first).await;
    let outcome = |n: i64| ThreadMirror {
        status: ThreadStatus::Idle,
        values: Some(json!({"n": n})),
        interrupts: Default::default(),
        error: None,
    };
    let runs_wait = h.store.threads().mirror_after_run(thread, outcome(1)).await;
    assert!(runs_wait.expect("mirror"), "the second run waits");
    let mirrored = read(&h, thread).await;
    assert_eq!(
        (mirrored.status, mirrored.values),
        (ThreadStatus::Busy, Some(json!({"n": 1})))
    );
    let claimed = h.store.runs().claim(second, h.now()).await.expect("claim");
    assert!(claimed.is_some());
    settle(second).await;
    let runs_wait = h.store.threads().mirror_after_run(thread, outcome(2)).await;
    assert!(!runs_wait.expect("mirror"), "no run waits");
    let mirrored = read(&h, thread).await;
    assert_eq!(
        (mirrored.status, mirrored.values),
        (ThreadStatus::Idle, Some(json!({"n": 2})))
    );
    assert_kind(
        h.store
            .threads()
            .mirror_after_run(Uuid::now_v7(), outcome(3))
            .await,
        ErrorKind::NotFound,
    );
}

/// Enforced metadata is ANDed with the request's metadata filter.
pub async fn thread_search_enforced_metadata_is_anded(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mine = h
        .thread_with(json!({"owner": "me", "topic": "x"}))
        .await
        .thread_id;
    let mine_other_topic = h
        .thread_with(json!({"owner": "me", "topic": "y"}))
        .await
        .thread_id;
    h.thread_with(json!({"owner": "you", "topic": "x"})).await;
    let enforced = Some(Enforced::metadata(obj(json!({"owner": "me"}))));
    let only_enforced = ThreadFilter {
        enforced: enforced.clone(),
        ..Default::default()
    };
    assert_eq!(
        search_ids(&h, only_enforced).await,
        sorted(vec![mine, mine_other_topic])
    );
    let both = ThreadFilter {
        metadata: Some(obj(json!({"topic": "x"}))),
        enforced,
        ..Default::default()
    };
    assert_eq!(search_ids(&h, both.clone()).await, vec![mine]);
    assert_eq!(h.store.threads().count(&both).await.expect("count"), 1);
}

/// A key present in both the request and the enforced metadata matches nothing.
pub async fn thread_search_enforced_metadata_key_collision_matches_nothing(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.thread_with(json!({"owner": "me"})).await;
    let filter = ThreadFilter {
        metadata: Some(obj(json!({"owner": "me"}))),
        enforced: Some(Enforced::metadata(obj(json!({"owner": "me"})))),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, filter.clone()).await, Vec::<Uuid>::new());
    assert_eq!(h.store.threads().count(&filter).await.expect("count"), 0);
}

/// Enforced alternatives match any; one that collides with the request's filter is
/// dropped while the others still apply; none at all matches nothing.
pub async fn thread_search_enforced_alternatives_match_any(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mine = h.thread_with(json!({"owner": "me"})).await.thread_id;
    let shared = h
        .thread_with(json!({"shared": true, "owner": "you"}))
        .await
        .thread_id;
    h.thread_with(json!({"owner": "you"})).await;
    let alternatives = Enforced(vec![
        obj(json!({"owner": "me"})),
        obj(json!({"shared": true})),
    ]);
    let both = ThreadFilter {
        enforced: Some(alternatives.clone()),
        ..Default::default()
    };
    assert_eq!(
        search_ids(&h, both.clone()).await,
        sorted(vec![mine, shared])
    );
    assert_eq!(h.store.threads().count(&both).await.expect("count"), 2);
    let colliding = ThreadFilter {
        metadata: Some(obj(json!({"owner": "you"}))),
        enforced: Some(alternatives),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, colliding.clone()).await, vec![shared]);
    let nothing = ThreadFilter {
        enforced: Some(Enforced(Vec::new())),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, nothing.clone()).await, Vec::<Uuid>::new());
    assert_eq!(h.store.threads().count(&nothing).await.expect("count"), 0);
}

/// Search filters by ids, status and values containment (null values never match).
pub async fn thread_search_filters_ids_status_and_values(factory: Factory) {
    let h = Harness::new(&factory).await;
    let a = h.thread().await.thread_id;
    let b = h.thread().await.thread_id;
    let c = h.thread().await.thread_id;
    h.store
        .threads()
        .set_status(b, ThreadStatus::Busy)
        .await
        .expect("status");
    let mirror = ThreadMirror {
        status: ThreadStatus::Idle,
        values: Some(json!({"topic": "rust", "n": [1, 2]})),
        interrupts: Default::default(),
        error: None,
    };
    h.store.threads().mirror(c, mirror).await.expect("mirror");
    let ids = ThreadFilter {
        ids: Some(vec![a, b, Uuid::now_v7()]),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, ids).await, sorted(vec![a, b]));
    let busy = ThreadFilter {
        status: Some(ThreadStatus::Busy),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, busy).await, vec![b]);
    let values = ThreadFilter {
        values: Some(obj(json!({"n": [2]}))),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, values).await, vec![c]);
    let combined = ThreadFilter {
        ids: Some(vec![a, c]),
        status: Some(ThreadStatus::Idle),
        ..Default::default()
    };
    assert_eq!(search_ids(&h, combined).await, sorted(vec![a, c]));
}

/// `exclude_metadata` leaves out the threads whose metadata contains any of its
/// objects, in search and count alike, ANDed with the other conditions.
pub async fn thread_search_and_count_leave_out_excluded_metadata(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.thread_with(json!({"kind": "draft", "team": "a"})).await;
    let archived = h
        .thread_with(json!({"archived": true, "team": "a"}))
        .await
        .thread_id;
    let kept = h
        .thread_with(json!({"kind": "final", "team": "a"}))
        .await
        .thread_id;
    let team = || Some(obj(json!({"team": "a"})));
    let one = ThreadFilter {
        metadata: team(),
        exclude_metadata: vec![obj(json!({"kind": "draft"}))],
        ..Default::default()
    };
    assert_eq!(
        search_ids(&h, one.clone()).await,
        sorted(vec![archived, kept])
    );
    let two = ThreadFilter {
        metadata: team(),
        exclude_metadata: vec![
            obj(json!({"kind": "draft"})),
            obj(json!({"archived": true})),
        ],
        ..Default::default()
    };
    assert_eq!(search_ids(&h, two.clone()).await, vec![kept]);
    assert_eq!(h.store.threads().count(&two).await.expect("count"), 1);
    assert_eq!(h.store.threads().count(&one).await.expect("count"), 2);
}

/// Search sorts by each field in both directions.
pub async fn thread_search_sorts_by_each_field(factory: Factory) {
    let h = Harness::new(&factory).await;
    let first = h.thread().await.thread_id;
    h.advance_minutes(1.0);
    let second = h.thread().await.thread_id;
    h.advance_minutes(1.0);
    h.store
        .threads()
        .set_status(first, ThreadStatus::Busy)
        .await
        .expect("status");
    let search = |sort_by, order| sorted_by(&h, sort_by, order);
    assert_eq!(
        search(ThreadSortBy::CreatedAt, SortOrder::Desc).await,
        vec![second, first]
    );
    assert_eq!(
        search(ThreadSortBy::CreatedAt, SortOrder::Asc).await,
        vec![first, second]
    );
    assert_eq!(
        search(ThreadSortBy::UpdatedAt, SortOrder::Desc).await,
        vec![first, second]
    );
    assert_eq!(
        search(ThreadSortBy::Status, SortOrder::Asc).await,
        vec![first, second],
        "busy < idle"
    );
}

/// Count by status is exact.
pub async fn thread_count_by_status(factory: Factory) {
    let h = Harness::new(&factory).await;
    for status in [
        ThreadStatus::Busy,
        ThreadStatus::Busy,
        ThreadStatus::Error,
        ThreadStatus::Idle,
    ] {
        let id = h.thread().await.thread_id;
        h.store
            .threads()
            .set_status(id, status)
            .await
            .expect("status");
    }
    let count = |status| ThreadFilter {
        status: Some(status),
        ..Default::default()
    };
    assert_eq!(
        h.store
            .threads()
            .count(&count(ThreadStatus::Busy))
            .await
            .expect("count"),
        2
    );
    assert_eq!(
        h.store
            .threads()
            .count(&count(ThreadStatus::Error))
            .await
            .expect("count"),
        1
    );
    assert_eq!(
        h.store
            .threads()
            .count(&count(ThreadStatus::Interrupted))
            .await
            .expect("count"),
        0
    );
    assert_eq!(
        h.store
            .threads()
            .count(&ThreadFilter::default())
            .await
            .expect("count"),
        4
    );
}

/// Copy makes a new thread with the source's metadata and state.
pub async fn thread_copy_duplicates_state_under_new_id(factory: Factory) {
    let h = Harness::new(&factory).await;
    let source = h.thread_with(json!({"k": "v"})).await.thread_id;
    let mirror = ThreadMirror {
        status: ThreadStatus::Idle,
        values: Some(json!({"n": 1})),
        interrupts: Default::default(),
        error: None,
    };
    h.store
        .threads()
        .mirror(source, mirror)
        .await
        .expect("mirror");
    let new_id = Uuid::now_v7();
    let copy = h.store.threads().copy(source, new_id).await.expect("copy");
    assert_eq!(copy.thread_id, new_id);
    assert_eq!(
        (copy.metadata.clone(), copy.values.clone()),
        (obj(json!({"k": "v"})), Some(json!({"n": 1})))
    );
    assert!(h.store.threads().get(source).await.expect("get").is_some());
    assert_kind(
        h.store.threads().copy(Uuid::now_v7(), Uuid::now_v7()).await,
        ErrorKind::NotFound,
    );
}

/// Deleting a thread deletes its runs and its thread-scoped crons, not others'.
pub async fn thread_delete_cascades_to_runs_and_thread_crons(factory: Factory) {
    let h = Harness::new(&factory).await;
    let doomed = h.thread().await.thread_id;
    let kept = h.thread().await.thread_id;
    let doomed_run = h.run_on(doomed).await.run_id;
    let kept_run = h.run_on(kept).await.run_id;
    let doomed_cron = h
        .store
        .crons()
        .create(cron_on(Some(doomed)))
        .await
        .expect("cron")
        .cron_id;
    let kept_cron = h
        .store
        .crons()
        .create(cron_on(Some(kept)))
        .await
        .expect("cron")
        .cron_id;
    let stateless_cron = h
        .store
        .crons()
        .create(cron_on(None))
        .await
        .expect("cron")
        .cron_id;
    h.store.threads().delete(doomed).await.expect("delete");
    assert_eq!(h.store.threads().get(doomed).await.expect("get"), None);
    assert_eq!(h.store.runs().get(doomed_run).await.expect("get"), None);
    assert!(
        h.store
            .runs()
            .list(doomed, &RunListQuery::default())
            .await
            .expect("list")
            .is_empty()
    );
    assert_eq!(h.store.runs().latest(doomed).await.expect("latest"), None);
    assert_eq!(h.store.crons().get(doomed_cron).await.expect("get"), None);
    assert!(h.store.runs().get(kept_run).await.expect("get").is_some());
    assert!(h.store.crons().get(kept_cron).await.expect("get").is_some());
    assert!(
        h.store
            .crons()
            .get(stateless_cron)
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(
        h.store
            .crons()
            .count(&CronFilter::default())
            .await
            .expect("count"),
        2
    );
    let claimed = h
        .store
        .runs()
        .claim_next(h.now())
        .await
        .expect("claim")
        .map(|claimed| claimed.run.run_id);
    assert_eq!(
        claimed,
        Some(kept_run),
        "the deleted thread's run left the queue"
    );
}
