//! SPEC "Namespace rules" 1-5, through `ItemsRepo::list_namespaces` and search.

use serde_json::json;
use service_store::{ErrorKind, ItemSearch, NamespaceQuery, PutItem};

use crate::harness::{Factory, Harness, assert_kind, ns, obj};

/// A store with items in a small namespace tree.
async fn tree(factory: &Factory) -> Harness {
    let h = Harness::new(factory).await;
    for path in [
        &["a"][..],
        &["a", "b"],
        &["a", "b", "c"],
        &["a", "x", "c"],
        &["b", "b"],
        &["users", "u1", "memories"],
        &["users", "u2", "memories"],
        &["users", "u2", "prefs"],
    ] {
        h.put(path, "k", json!({})).await;
    }
    h
}

async fn list(h: &Harness, query: NamespaceQuery) -> Vec<Vec<String>> {
    h.store
        .items()
        .list_namespaces(&query)
        .await
        .expect("list namespaces")
}

fn paths(paths: &[&[&str]]) -> Vec<Vec<String>> {
    paths.iter().map(|path| ns(path)).collect()
}

/// Rule 1: `*` stands for exactly one segment.
pub async fn namespace_wildcard_stands_for_exactly_one_segment(factory: Factory) {
    let h = tree(&factory).await;
    let query = NamespaceQuery {
        prefix: Some(ns(&["a", "*", "c"])),
        ..Default::default()
    };
    assert_eq!(
        list(&h, query).await,
        paths(&[&["a", "b", "c"], &["a", "x", "c"]])
    );
    let query = NamespaceQuery {
        suffix: Some(ns(&["*", "memories"])),
        ..Default::default()
    };
    assert_eq!(
        list(&h, query).await,
        paths(&[&["users", "u1", "memories"], &["users", "u2", "memories"]])
    );
}

/// Rule 1: the prefix anchors at the first segment, the suffix at the last.
pub async fn namespace_prefix_anchors_first_and_suffix_anchors_last(factory: Factory) {
    let h = tree(&factory).await;
    let query = NamespaceQuery {
        prefix: Some(ns(&["b"])),
        ..Default::default()
    };
    assert_eq!(list(&h, query).await, paths(&[&["b", "b"]]));
    let query = NamespaceQuery {
        suffix: Some(ns(&["b"])),
        ..Default::default()
    };
    assert_eq!(list(&h, query).await, paths(&[&["a", "b"], &["b", "b"]]));
    let query = NamespaceQuery {
        prefix: Some(ns(&["users"])),
        suffix: Some(ns(&["prefs"])),
        ..Default::default()
    };
    assert_eq!(list(&h, query).await, paths(&[&["users", "u2", "prefs"]]));
}

/// Rule 2: a pattern longer than the namespace never matches; a shorter one selects
/// the subtree.
pub async fn namespace_longer_pattern_never_matches_shorter_selects_subtree(factory: Factory) {
    let h = tree(&factory).await;
    let query = NamespaceQuery {
        prefix: Some(ns(&["a", "b", "c", "d"])),
        ..Default::default()
    };
    assert_eq!(list(&h, query).await, paths(&[]));
    let query = NamespaceQuery {
        suffix: Some(ns(&["x", "a", "b", "c"])),
        ..Default::default()
    };
    assert_eq!(list(&h, query).await, paths(&[]));
    let query = NamespaceQuery {
        prefix: Some(ns(&["a", "b"])),
        ..Default::default()
    };
    assert_eq!(
        list(&h, query).await,
        paths(&[&["a", "b"], &["a", "b", "c"]])
    );
}

/// Rule 3: max_depth truncates each match and de-duplicates before sorting and paging.
pub async fn namespace_max_depth_truncates_and_dedupes_before_paging(factory: Factory) {
    let h = tree(&factory).await;
    let query = NamespaceQuery {
        max_depth: Some(2),
        ..Default::default()
    };
    let all = paths(&[
        &["a"],
        &["a", "b"],
        &["a", "x"],
        &["b", "b"],
        &["users", "u1"],
        &["users", "u2"],
    ]);
    assert_eq!(list(&h, query).await, all);
    let query = NamespaceQuery {
        max_depth: Some(1),
        limit: Some(2),
        offset: 1,
        ..Default::default()
    };
    assert_eq!(list(&h, query).await, paths(&[&["b"], &["users"]]));
}

/// Rule 4: ascending element-wise order, shorter first on a shared prefix.
pub async fn namespace_results_sorted_elementwise_shorter_first(factory: Factory) {
    let h = Harness::new(&factory).await;
    for path in [
        &["b"][..],
        &["a", "b", "a"],
        &["a", "b"],
        &["a"],
        &["a", "a", "z"],
    ] {
        h.put(path, "k", json!({})).await;
    }
    let expected = paths(&[
        &["a"],
        &["a", "a", "z"],
        &["a", "b"],
        &["a", "b", "a"],
        &["b"],
    ]);
    assert_eq!(list(&h, NamespaceQuery::default()).await, expected);
    let query = NamespaceQuery {
        limit: Some(2),
        offset: 2,
        ..Default::default()
    };
    assert_eq!(list(&h, query).await, expected[2..4].to_vec());
}

/// Rule 5: an omitted prefix matches every namespace.
pub async fn namespace_omitted_prefix_matches_every_namespace(factory: Factory) {
    let h = tree(&factory).await;
    assert_eq!(list(&h, NamespaceQuery::default()).await.len(), 8);
}

/// Search's namespace prefix selects the subtree, with the same wildcard rule.
pub async fn namespace_search_prefix_selects_subtree(factory: Factory) {
    let h = tree(&factory).await;
    let search = |prefix: &[&str]| ItemSearch {
        namespace_prefix: ns(prefix),
        ..ItemSearch::default()
    };
    let hits = h
        .store
        .items()
        .search(&search(&["users"]))
        .await
        .expect("search");
    assert_eq!(hits.len(), 3);
    let hits = h
        .store
        .items()
        .search(&search(&["users", "*", "memories"]))
        .await
        .expect("search");
    assert_eq!(hits.len(), 2);
    let hits = h.store.items().search(&search(&[])).await.expect("search");
    assert_eq!(hits.len(), 8);
    assert!(hits.iter().all(|hit| hit.score.is_none()));
}

/// Writes need a non-empty namespace whose labels are non-empty and dot-free.
pub async fn namespace_empty_or_dotted_label_is_invalid(factory: Factory) {
    let h = Harness::new(&factory).await;
    for namespace in [ns(&[]), ns(&["a.b"]), ns(&["a", ""])] {
        let put = PutItem {
            namespace,
            key: "k".into(),
            value: obj(json!({})),
            ttl_minutes: None,
            vectors: Vec::new(),
        };
        assert_kind(h.store.items().put(put).await, ErrorKind::Invalid);
    }
}
