//! SPEC "Limits": page and query bounds.

use serde_json::json;
use service_store::{
    ActiveRunsQuery, AssistantFilter, AssistantQuery, CronQuery, ErrorKind, ItemSearch,
    NamespaceQuery, NewAssistant, RunListQuery, ThreadFilter, ThreadQuery,
};
use service_types::{Config, IfExists, Metadata};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind};

async fn assistants(h: &Harness, count: usize) {
    for i in 0..count {
        let new = NewAssistant {
            assistant_id: Uuid::now_v7(),
            graph_id: "agent".into(),
            config: Config::default(),
            context: Metadata::new(),
            metadata: Metadata::new(),
            name: format!("a{i}"),
            description: None,
        };
        h.store
            .assistants()
            .create(new, IfExists::Raise)
            .await
            .expect("create assistant");
    }
}

/// A search `limit` above 1000 is rejected; 1000 is accepted.
pub async fn limits_search_limit_above_1000_is_rejected(factory: Factory) {
    let h = Harness::new(&factory).await;
    let s = &h.store;
    assert_kind(
        s.threads()
            .search(&ThreadQuery {
                limit: Some(1001),
                ..Default::default()
            })
            .await,
        ErrorKind::Invalid,
    );
    assert_kind(
        s.assistants()
            .search(&AssistantQuery {
                limit: Some(1001),
                ..Default::default()
            })
            .await,
        ErrorKind::Invalid,
    );
    assert_kind(
        s.crons()
            .search(&CronQuery {
                limit: Some(1001),
                ..Default::default()
            })
            .await,
        ErrorKind::Invalid,
    );
    assert_kind(
        s.items()
            .search(&ItemSearch {
                limit: Some(1001),
                ..Default::default()
            })
            .await,
        ErrorKind::Invalid,
    );
    assert!(
        s.threads()
            .search(&ThreadQuery {
                limit: Some(1000),
                ..Default::default()
            })
            .await
            .is_ok()
    );
}

/// An omitted limit returns the first SERVICE_MAX_PAGE_SIZE rows.
pub async fn limits_omitted_limit_returns_max_page_size(factory: Factory) {
    let h = Harness::with_max_page_size(&factory, 3).await;
    for i in 0..5 {
        h.thread().await;
        h.put(&["n"], &format!("k{i}"), json!({})).await;
    }
    assistants(&h, 5).await;
    assert_eq!(
        h.store
            .threads()
            .search(&ThreadQuery::default())
            .await
            .expect("search")
            .len(),
        3
    );
    assert_eq!(
        h.store
            .items()
            .search(&ItemSearch::default())
            .await
            .expect("search")
            .len(),
        3
    );
    let page = h
        .store
        .assistants()
        .search(&AssistantQuery::default())
        .await
        .expect("search");
    assert_eq!((page.items.len(), page.total), (3, 5));
}

/// A lower max page size silently clamps client limits; paging with offset gets the rest.
pub async fn limits_max_page_size_clamps_client_limits(factory: Factory) {
    let h = Harness::with_max_page_size(&factory, 3).await;
    for _ in 0..5 {
        h.thread().await;
    }
    let page = |offset| ThreadQuery {
        limit: Some(10),
        offset,
        ..Default::default()
    };
    assert_eq!(
        h.store
            .threads()
            .search(&page(0))
            .await
            .expect("search")
            .len(),
        3
    );
    assert_eq!(
        h.store
            .threads()
            .search(&page(3))
            .await
            .expect("search")
            .len(),
        2
    );
}

/// Assistant and thread counts are not bounded by the page size.
pub async fn limits_counts_are_not_bounded(factory: Factory) {
    let h = Harness::with_max_page_size(&factory, 2).await;
    for _ in 0..5 {
        h.thread().await;
    }
    assistants(&h, 4).await;
    assert_eq!(
        h.store
            .threads()
            .count(&ThreadFilter::default())
            .await
            .expect("count"),
        5
    );
    assert_eq!(
        h.store
            .assistants()
            .count(&AssistantFilter::default())
            .await
            .expect("count"),
        4
    );
}

/// Runs listed by thread are not bounded by the page size in the driver.
pub async fn limits_run_list_is_not_bounded_by_page_size(factory: Factory) {
    let h = Harness::with_max_page_size(&factory, 2).await;
    let thread = h.thread().await;
    for _ in 0..5 {
        h.run_on(thread.thread_id).await;
    }
    let runs = h
        .store
        .runs()
        .list(thread.thread_id, &RunListQuery::default())
        .await
        .expect("list");
    assert_eq!(runs.len(), 5);
}

/// A run-list limit above 1000 is clamped to 1000, not rejected.
pub async fn limits_run_list_limit_above_1000_is_clamped(factory: Factory) {
    let h = Harness::new(&factory).await;
    let thread = h.thread().await;
    for _ in 0..1001 {
        h.run_on(thread.thread_id).await;
    }
    let query = RunListQuery {
        limit: Some(5000),
        ..Default::default()
    };
    assert_eq!(
        h.store
            .runs()
            .list(thread.thread_id, &query)
            .await
            .expect("list")
            .len(),
        1000
    );
}

/// A namespace-list limit above 1000 is clamped to 1000, not rejected.
pub async fn limits_namespace_list_limit_above_1000_is_clamped(factory: Factory) {
    let h = Harness::new(&factory).await;
    for i in 0..1001 {
        h.put(&["n", &format!("{i:04}")], "k", json!({})).await;
    }
    let query = NamespaceQuery {
        limit: Some(5000),
        ..Default::default()
    };
    assert_eq!(
        h.store
            .items()
            .list_namespaces(&query)
            .await
            .expect("list")
            .len(),
        1000
    );
}

/// The namespace list also obeys SERVICE_MAX_PAGE_SIZE.
pub async fn limits_namespace_list_obeys_max_page_size(factory: Factory) {
    let h = Harness::with_max_page_size(&factory, 2).await;
    for i in 0..4 {
        h.put(&["n", &i.to_string()], "k", json!({})).await;
    }
    let query = NamespaceQuery {
        limit: Some(10),
        ..Default::default()
    };
    assert_eq!(
        h.store
            .items()
            .list_namespaces(&query)
            .await
            .expect("list")
            .len(),
        2
    );
}

/// Active runs across threads are bounded by the page size.
pub async fn limits_active_runs_are_bounded(factory: Factory) {
    let h = Harness::with_max_page_size(&factory, 3).await;
    for _ in 0..5 {
        let thread = h.thread().await;
        h.run_on(thread.thread_id).await;
    }
    let query = ActiveRunsQuery {
        limit: Some(100),
        ..Default::default()
    };
    assert_eq!(
        h.store.runs().active(&query).await.expect("active").len(),
        3
    );
}
