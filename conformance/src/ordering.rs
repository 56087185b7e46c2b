//! Ordering and ties: equal sort keys break by id, so pages are stable.

use serde_json::json;
use service_store::filter::StoreFilter;
use service_store::{
    ActiveRunsQuery, AssistantQuery, AssistantSortBy, CronQuery, CronSortBy, ItemSearch,
    NewAssistant, NewCron, RunListQuery, ThreadQuery, ThreadSortBy,
};
use service_types::{Config, IfExists, Metadata, SortOrder};
use uuid::Uuid;

use crate::harness::{Factory, Harness};

fn sorted_ids(mut ids: Vec<Uuid>, order: SortOrder) -> Vec<Uuid> {
    ids.sort();
    if order == SortOrder::Desc {
        ids.reverse();
    }
    ids
}

/// Runs of a thread list newest first; equal created_at breaks by run_id descending.
pub async fn ordering_run_list_newest_first_ties_by_run_id_desc(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await;
    let mut tied = Vec::new();
    for _ in 0..3 {
        tied.push(h.run_on(thread.thread_id).await.run_id);
    }
    h.advance_minutes(1.0);
    let newest = h.run_on(thread.thread_id).await.run_id;
    let listed: Vec<Uuid> = h
        .store
        .runs()
        .list(thread.thread_id, &RunListQuery::default())
        .await
        .expect("list")
        .into_iter()
        .map(|run| run.run_id)
        .collect();
    let mut expected = vec![newest];
    expected.extend(sorted_ids(tied, SortOrder::Desc));
    assert_eq!(listed, expected);
}

/// The latest run is one row: newest created_at, ties by run_id descending.
pub async fn ordering_latest_run_ties_by_run_id_desc(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await;
    assert_eq!(
        h.store
            .runs()
            .latest(thread.thread_id)
            .await
            .expect("latest"),
        None
    );
    let mut tied = Vec::new();
    for _ in 0..3 {
        tied.push(h.run_on(thread.thread_id).await.run_id);
    }
    let latest = h
        .store
        .runs()
        .latest(thread.thread_id)
        .await
        .expect("latest")
        .expect("a run");
    assert_eq!(Some(latest.run_id), tied.iter().max().copied());
}

/// Queue order (claims and active runs): oldest first, ties by run_id ascending.
pub async fn ordering_queue_oldest_first_ties_by_run_id_asc(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mut tied = Vec::new();
    for _ in 0..3 {
        let thread = h.thread().await;
        tied.push(h.run_on(thread.thread_id).await.run_id);
    }
    let expected = sorted_ids(tied, SortOrder::Asc);
    let active: Vec<Uuid> = h
        .store
        .runs()
        .active(&ActiveRunsQuery::default())
        .await
        .expect("active")
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(active, expected);
    for want in expected {
        let claimed = h
            .store
            .runs()
            .claim_next(h.now())
            .await
            .expect("claim")
            .expect("a run");
        assert_eq!(claimed.run.run_id, want);
    }
}

/// Thread search with equal sort keys breaks ties by thread_id in the sort direction.
pub async fn ordering_thread_search_ties_by_thread_id(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(h.thread().await.thread_id);
    }
    for order in [SortOrder::Asc, SortOrder::Desc] {
        for sort_by in [
            ThreadSortBy::CreatedAt,
            ThreadSortBy::UpdatedAt,
            ThreadSortBy::Status,
        ] {
            let query = ThreadQuery {
                sort_by,
                sort_order: order,
                ..Default::default()
            };
            let found: Vec<Uuid> = h
                .store
                .threads()
                .search(&query)
                .await
                .expect("search")
                .into_iter()
                .map(|t| t.thread_id)
                .collect();
            assert_eq!(
                found,
                sorted_ids(ids.clone(), order),
                "{sort_by:?} {order:?}"
            );
        }
    }
}

/// Assistant search with equal sort keys breaks ties by assistant_id.
pub async fn ordering_assistant_search_ties_by_assistant_id(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        let new = NewAssistant {
            assistant_id: Uuid::new_v4(),
            graph_id: "agent".into(),
            config: Config::default(),
            context: Metadata::new(),
            metadata: Metadata::new(),
            name: "same".into(),
            description: None,
        };
        ids.push(
            h.store
                .assistants()
                .create(new, IfExists::Raise)
                .await
                .expect("create")
                .assistant_id,
        );
    }
    for order in [SortOrder::Asc, SortOrder::Desc] {
        for sort_by in [
            AssistantSortBy::Name,
            AssistantSortBy::CreatedAt,
            AssistantSortBy::GraphId,
        ] {
            let query = AssistantQuery {
                sort_by,
                sort_order: order,
                ..Default::default()
            };
            let page = h.store.assistants().search(&query).await.expect("search");
            let found: Vec<Uuid> = page.items.into_iter().map(|a| a.assistant_id).collect();
            assert_eq!(
                found,
                sorted_ids(ids.clone(), order),
                "{sort_by:?} {order:?}"
            );
        }
    }
}

/// Cron search with equal sort keys breaks ties by cron_id; absent end times sort last.
pub async fn ordering_cron_search_ties_by_cron_id(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let new = NewCron {
            cron_id: Uuid::new_v4(),
            assistant_id: None,
            thread_id: None,
            user_id: None,
            schedule: "0 * * * *".into(),
            timezone: None,
            end_time: None,
            payload: json!({}),
            metadata: Metadata::new(),
            on_run_completed: None,
            enabled: true,
        };
        ids.push(h.store.crons().create(new).await.expect("create").cron_id);
    }
    for order in [SortOrder::Asc, SortOrder::Desc] {
        for sort_by in [
            CronSortBy::CreatedAt,
            CronSortBy::NextRunDate,
            CronSortBy::EndTime,
        ] {
            let query = CronQuery {
                sort_by,
                sort_order: order,
                ..Default::default()
            };
            let found: Vec<Uuid> = h
                .store
                .crons()
                .search(&query)
                .await
                .expect("search")
                .into_iter()
                .map(|c| c.cron_id)
                .collect();
            assert_eq!(
                found,
                sorted_ids(ids.clone(), order),
                "{sort_by:?} {order:?}"
            );
        }
    }
}

/// Item search: newest update first, ties by namespace then key ascending.
pub async fn ordering_item_search_newest_first_ties_by_namespace_then_key(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put(&["b"], "a", json!({})).await;
    h.put(&["a"], "b", json!({})).await;
    h.put(&["a"], "a", json!({})).await;
    h.advance_minutes(1.0);
    h.put(&["z"], "z", json!({})).await;
    let hits = h
        .store
        .items()
        .search(&ItemSearch::default())
        .await
        .expect("search");
    let found: Vec<(String, String)> = hits
        .into_iter()
        .map(|hit| (hit.item.namespace.join("/"), hit.item.key))
        .collect();
    let expected = [("z", "z"), ("a", "a"), ("a", "b"), ("b", "a")];
    assert_eq!(
        found,
        expected.map(|(n, k)| (n.to_owned(), k.to_owned())).to_vec()
    );
}

/// Item search with an equality filter: the same order, page by page across items
/// updated at one instant; a number matches its equal written otherwise, a string
/// with characters JSON escapes matches itself, a long string too, and an item whose
/// value changed matches its new value only.
pub async fn ordering_item_search_by_equality_pages_ties_by_namespace_then_key(factory: Factory) {
    let h = Harness::new(&factory).await;
    for (namespace, key) in [("b", "a"), ("a", "c"), ("a", "a"), ("c", "b"), ("a", "b")] {
        h.put(&[namespace], key, json!({"g": 1, "other": namespace}))
            .await;
    }
    h.put(&["a"], "x", json!({"g": 2})).await;
    h.put(&["a"], "moved", json!({"g": 1})).await;
    h.advance_minutes(1.0);
    h.put(&["z"], "z", json!({"g": 1.0})).await;
    h.put(&["a"], "moved", json!({"g": 2})).await;
    let page = |filter: serde_json::Value, offset: usize| {
        let search = ItemSearch {
            filter: StoreFilter::parse(&filter).expect("valid filter"),
            limit: Some(2),
            offset,
            ..ItemSearch::default()
        };
        let h = &h;
        async move {
            h.store
                .items()
                .search(&search)
                .await
                .expect("search")
                .into_iter()
                .map(|hit| format!("{}/{}", hit.item.namespace.join("."), hit.item.key))
                .collect::<Vec<_>>()
        }
    };
    let mut found = Vec::new();
    for offset in [0, 2, 4, 6] {
        found.extend(page(json!({"g": 1}), offset).await);
    }
    assert_eq!(found, ["z/z", "a/a", "a/b", "a/c", "b/a", "c/b"]);
    assert_eq!(page(json!({"g": 2}), 0).await, ["a/moved", "a/x"]);
    assert_eq!(
        page(json!({"g": 1, "other": "a"}), 0).await,
        ["a/a", "a/b"],
        "the other conditions still hold"
    );

    let escaped = "quote \" backslash \\ newline \n tab \t bell \u{7}";
    let long = "x".repeat(300);
    h.put(&["s"], "escaped", json!({"s": escaped})).await;
    h.put(&["s"], "long", json!({"s": long})).await;
    assert_eq!(page(json!({"s": escaped}), 0).await, ["s/escaped"]);
    assert_eq!(page(json!({"s": long}), 0).await, ["s/long"]);
}
