//! Assistants and their versions (SPEC "Assistant", "Versioning" 2).

use serde_json::json;
use service_store::containment::Enforced;
use service_store::{
    AssistantFilter, AssistantPatch, AssistantQuery, ErrorKind, NewAssistant, VersionQuery,
};
use service_types::{Assistant, Config, IfExists};
use uuid::Uuid;

use crate::harness::{Factory, Harness, assert_kind, obj};

fn new_assistant(graph_id: &str, name: &str, metadata: serde_json::Value) -> NewAssistant {
    NewAssistant {
        assistant_id: Uuid::now_v7(),
        graph_id: graph_id.into(),
        config: Config::default(),
        context: obj(json!({"c": 1})),
        metadata: obj(metadata),
        name: name.into(),
        description: Some("d".into()),
    }
}

async fn create(h: &Harness, new: NewAssistant) -> Assistant {
    h.store
        .assistants()
        .create(new, IfExists::Raise)
        .await
        .expect("create assistant")
}

async fn versions(h: &Harness, id: Uuid) -> Vec<i64> {
    let listed = h
        .store
        .assistants()
        .versions(id, &VersionQuery::default())
        .await
        .expect("versions");
    listed.into_iter().map(|v| v.version).collect()
}

/// Create makes version 1 whose snapshot equals the live row.
pub async fn assistant_create_is_version_one_with_snapshot(factory: Factory) {
    let h = Harness::new(&factory).await;
    let created = create(&h, new_assistant("agent", "a", json!({"k": "v"}))).await;
    assert_eq!(created.version, 1);
    let listed = h
        .store
        .assistants()
        .versions(created.assistant_id, &VersionQuery::default())
        .await
        .expect("versions");
    assert_eq!(listed, vec![created.snapshot()]);
    assert_eq!(
        h.store
            .assistants()
            .get(created.assistant_id)
            .await
            .expect("get"),
        Some(created)
    );
}

/// An existing id conflicts with `raise` and is returned unchanged with `do_nothing`.
pub async fn assistant_create_existing_conflicts_or_returns_existing(factory: Factory) {
    let h = Harness::new(&factory).await;
    let first = new_assistant("agent", "a", json!({}));
    let created = create(&h, first.clone()).await;
    let again = NewAssistant {
        name: "other".into(),
        ..first
    };
    assert_kind(
        h.store
            .assistants()
            .create(again.clone(), IfExists::Raise)
            .await,
        ErrorKind::Conflict,
    );
    let kept = h
        .store
        .assistants()
        .create(again, IfExists::DoNothing)
        .await
        .expect("do nothing");
    assert_eq!(kept, created);
}

/// Update mints max+1 (not current+1), activates it and appends a snapshot; metadata
/// merges, other fields replace.
pub async fn assistant_update_mints_max_plus_one(factory: Factory) {
    let h = Harness::new(&factory).await;
    let id = create(&h, new_assistant("agent", "a", json!({"keep": 1})))
        .await
        .assistant_id;
    let patch = AssistantPatch {
        name: Some("b".into()),
        metadata: Some(obj(json!({"add": 2}))),
        ..Default::default()
    };
    h.advance_minutes(1.0);
    let v2 = h
        .store
        .assistants()
        .update(id, patch)
        .await
        .expect("update");
    assert_eq!((v2.version, v2.name.as_str()), (2, "b"));
    assert_eq!(v2.metadata, obj(json!({"keep": 1, "add": 2})));
    assert_eq!(v2.updated_at, h.now());
    h.store
        .assistants()
        .set_latest(id, 1)
        .await
        .expect("set latest");
    let v3 = h
        .store
        .assistants()
        .update(id, AssistantPatch::default())
        .await
        .expect("update");
    assert_eq!((v3.version, v3.name.as_str()), (3, "a"));
    assert_eq!(versions(&h, id).await, vec![3, 2, 1]);
}

/// Set-latest re-activates an existing version without minting one.
pub async fn assistant_set_latest_reactivates_without_new_snapshot(factory: Factory) {
    let h = Harness::new(&factory).await;
    let v1 = create(&h, new_assistant("agent", "a", json!({}))).await;
    let id = v1.assistant_id;
    h.store
        .assistants()
        .update(
            id,
            AssistantPatch {
                name: Some("b".into()),
                ..Default::default()
            },
        )
        .await
        .expect("update");
    h.advance_minutes(1.0);
    let active = h
        .store
        .assistants()
        .set_latest(id, 1)
        .await
        .expect("set latest");
    assert_eq!((active.version, active.name.as_str()), (1, "a"));
    assert_eq!(active.updated_at, h.now());
    assert_eq!(versions(&h, id).await, vec![2, 1]);
    let stored = h
        .store
        .assistants()
        .versions(id, &VersionQuery::default())
        .await
        .expect("versions");
    assert_eq!(stored[1], v1.snapshot(), "version snapshots are immutable");
}

/// Set-latest to a missing version is NotFound with the contract's text.
pub async fn assistant_set_latest_unknown_version_is_not_found(factory: Factory) {
    let h = Harness::new(&factory).await;
    let id = create(&h, new_assistant("agent", "a", json!({})))
        .await
        .assistant_id;
    let error = h
        .store
        .assistants()
        .set_latest(id, 7)
        .await
        .expect_err("unknown version");
    assert_eq!(error.kind, ErrorKind::NotFound);
    assert_eq!(
        error.message,
        format!("Version 7 not found for assistant {id}")
    );
}

/// Versions list newest first, filter by metadata containment and page.
pub async fn assistant_versions_newest_first_filter_and_page(factory: Factory) {
    let h = Harness::new(&factory).await;
    let id = create(&h, new_assistant("agent", "a", json!({"tag": "x"})))
        .await
        .assistant_id;
    for tag in ["y", "x"] {
        let patch = AssistantPatch {
            metadata: Some(obj(json!({"tag": tag}))),
            ..Default::default()
        };
        h.store
            .assistants()
            .update(id, patch)
            .await
            .expect("update");
    }
    let query = VersionQuery {
        metadata: Some(obj(json!({"tag": "x"}))),
        ..Default::default()
    };
    let listed = h
        .store
        .assistants()
        .versions(id, &query)
        .await
        .expect("versions");
    assert_eq!(
        listed.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![3, 1]
    );
    let query = VersionQuery {
        limit: Some(1),
        offset: 1,
        ..Default::default()
    };
    let listed = h
        .store
        .assistants()
        .versions(id, &query)
        .await
        .expect("versions");
    assert_eq!(
        listed.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![2]
    );
}

/// Delete removes the assistant and its versions; unknown ids are NotFound.
pub async fn assistant_delete_removes_versions(factory: Factory) {
    let h = Harness::new(&factory).await;
    let id = create(&h, new_assistant("agent", "a", json!({})))
        .await
        .assistant_id;
    h.store
        .assistants()
        .update(id, AssistantPatch::default())
        .await
        .expect("update");
    h.store.assistants().delete(id).await.expect("delete");
    assert_eq!(h.store.assistants().get(id).await.expect("get"), None);
    assert_kind(
        h.store
            .assistants()
            .versions(id, &VersionQuery::default())
            .await,
        ErrorKind::NotFound,
    );
    assert_kind(h.store.assistants().delete(id).await, ErrorKind::NotFound);
    assert_kind(
        h.store
            .assistants()
            .update(id, AssistantPatch::default())
            .await,
        ErrorKind::NotFound,
    );
}

/// Search filters by graph id, metadata containment and case-insensitive name
/// substring, and reports the unpaginated total; count agrees.
pub async fn assistant_search_filters_and_reports_total(factory: Factory) {
    let h = Harness::new(&factory).await;
    create(
        &h,
        new_assistant("agent", "Weather Bot", json!({"team": "a", "tier": 1})),
    )
    .await;
    create(&h, new_assistant("agent", "news bot", json!({"team": "b"}))).await;
    create(
        &h,
        new_assistant("other", "Weather two", json!({"team": "a"})),
    )
    .await;
    let cases = [
        (
            AssistantFilter {
                graph_id: Some("agent".into()),
                ..Default::default()
            },
            2,
        ),
        (
            AssistantFilter {
                metadata: Some(obj(json!({"team": "a"}))),
                ..Default::default()
            },
            2,
        ),
        (
            AssistantFilter {
                name: Some("WEATHER".into()),
                ..Default::default()
            },
            2,
        ),
        (
            AssistantFilter {
                name: Some("bot".into()),
                graph_id: Some("agent".into()),
                ..Default::default()
            },
            2,
        ),
        (
            AssistantFilter {
                metadata: Some(obj(json!({"team": "a", "tier": 1}))),
                ..Default::default()
            },
            1,
        ),
    ];
    for (filter, expected) in cases {
        let query = AssistantQuery {
            filter: filter.clone(),
            limit: Some(1),
            ..Default::default()
        };
        let page = h.store.assistants().search(&query).await.expect("search");
        assert_eq!((page.items.len(), page.total), (1, expected), "{filter:?}");
        assert_eq!(
            h.store.assistants().count(&filter).await.expect("count"),
            expected
        );
    }
}

/// An enforced filter narrows search, its total and count; an alternative admits
/// shared assistants (the system ones) besides the caller's own.
pub async fn assistant_search_and_count_within_enforced_metadata(factory: Factory) {
    let h = Harness::new(&factory).await;
    let mine = create(&h, new_assistant("agent", "mine", json!({"owner": "me"}))).await;
    create(&h, new_assistant("agent", "yours", json!({"owner": "you"}))).await;
    let system = create(
        &h,
        new_assistant("agent", "system", json!({"created_by": "system"})),
    )
    .await;
    let filter = AssistantFilter {
        enforced: Some(Enforced(vec![
            obj(json!({"owner": "me"})),
            obj(json!({"created_by": "system"})),
        ])),
        ..Default::default()
    };
    let query = AssistantQuery {
        filter: filter.clone(),
        ..Default::default()
    };
    let page = h.store.assistants().search(&query).await.expect("search");
    let mut found: Vec<Uuid> = page.items.iter().map(|a| a.assistant_id).collect();
    found.sort();
    let mut expected = vec![mine.assistant_id, system.assistant_id];
    expected.sort();
    assert_eq!(found, expected);
    assert_eq!(page.total, 2);
    assert_eq!(h.store.assistants().count(&filter).await.expect("count"), 2);
    let own_only = AssistantFilter {
        metadata: Some(obj(json!({"created_by": "system"}))),
        enforced: Some(Enforced::metadata(obj(json!({"owner": "me"})))),
        ..Default::default()
    };
    assert_eq!(
        h.store.assistants().count(&own_only).await.expect("count"),
        0
    );
}
