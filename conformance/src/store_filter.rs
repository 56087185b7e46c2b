//! SPEC "Store filter rules" 1-9, through `ItemsRepo::search`.

use serde_json::{Value, json};
use service_store::{ErrorKind, ItemSearch, StoreFilter};

use crate::harness::{Factory, Harness, assert_kind, ns};

/// A store holding the filter fixtures under namespace `["f"]`.
async fn fixtures(factory: &Factory) -> Harness {
    let h = Harness::new(factory).await;
    h.put(
        &["f"],
        "five",
        json!({"n": 5, "s": "x", "b": true, "o": {"k": 1}, "arr": [1, 2]}),
    )
    .await;
    h.put(&["f"], "ten", json!({"n": 10, "s": "y"})).await;
    h.put(&["f"], "text", json!({"n": "7"})).await;
    h.put(&["f"], "null", json!({"n": null})).await;
    h.put(&["f"], "empty", json!({})).await;
    h
}

/// Keys matching `filter` under `["f"]`, sorted.
async fn keys(h: &Harness, filter: Value) -> Vec<String> {
    let search = ItemSearch {
        namespace_prefix: ns(&["f"]),
        filter: StoreFilter::parse(&filter).expect("valid filter"),
        ..ItemSearch::default()
    };
    let mut keys: Vec<String> = h
        .store
        .items()
        .search(&search)
        .await
        .expect("search")
        .into_iter()
        .map(|hit| hit.item.key)
        .collect();
    keys.sort();
    keys
}

fn sorted(keys: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = keys.iter().map(|key| (*key).to_owned()).collect();
    keys.sort();
    keys
}

/// Rule 1: only top-level keys; a dotted name is a literal key, not a path.
pub async fn filter_applies_to_top_level_keys_and_dotted_names_are_literal(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put(&["f"], "dotted", json!({"a.b": 1})).await;
    h.put(&["f"], "nested", json!({"a": {"b": 1}})).await;
    assert_eq!(keys(&h, json!({"a.b": 1})).await, sorted(&["dotted"]));
    assert_eq!(keys(&h, json!({"b": 1})).await, sorted(&[]));
}

/// Rule 2: keys are ANDed, several operators on one key are ANDed, a bare scalar is
/// equality.
pub async fn filter_keys_and_operators_are_anded_and_bare_scalar_is_equality(factory: Factory) {
    let h = fixtures(&factory).await;
    assert_eq!(keys(&h, json!({"s": "x"})).await, sorted(&["five"]));
    assert_eq!(keys(&h, json!({"n": 5, "s": "x"})).await, sorted(&["five"]));
    assert_eq!(keys(&h, json!({"n": 5, "s": "y"})).await, sorted(&[]));
    assert_eq!(
        keys(&h, json!({"n": {"$gt": 4, "$lt": 6}})).await,
        sorted(&["five"])
    );
    assert_eq!(
        keys(&h, json!({"n": {"$gt": 4, "$lt": 5}})).await,
        sorted(&[])
    );
}

/// Rule 3: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin; numbers compare by value.
pub async fn filter_supports_each_operator(factory: Factory) {
    let h = fixtures(&factory).await;
    assert_eq!(keys(&h, json!({"n": {"$eq": 10}})).await, sorted(&["ten"]));
    assert_eq!(
        keys(&h, json!({"n": {"$eq": 5.0}})).await,
        sorted(&["five"])
    );
    assert_eq!(
        keys(&h, json!({"n": {"$ne": 10}})).await,
        sorted(&["five", "text", "null", "empty"])
    );
    assert_eq!(keys(&h, json!({"n": {"$gt": 5}})).await, sorted(&["ten"]));
    assert_eq!(
        keys(&h, json!({"n": {"$gte": 5}})).await,
        sorted(&["five", "ten"])
    );
    assert_eq!(keys(&h, json!({"n": {"$lt": 10}})).await, sorted(&["five"]));
    assert_eq!(
        keys(&h, json!({"n": {"$lte": 10}})).await,
        sorted(&["five", "ten"])
    );
    assert_eq!(
        keys(&h, json!({"n": {"$in": [10, "7"]}})).await,
        sorted(&["ten", "text"])
    );
    assert_eq!(
        keys(&h, json!({"n": {"$nin": [10, "7"]}})).await,
        sorted(&["five", "null", "empty"])
    );
    assert_eq!(keys(&h, json!({"s": {"$in": []}})).await, sorted(&[]));
    // Equality is not containment: an array holding the operand is not equal to it.
    assert_eq!(keys(&h, json!({"arr": 1})).await, sorted(&[]));
    assert_eq!(keys(&h, json!({"arr": {"$eq": 2}})).await, sorted(&[]));
}

/// Rule 4: ordering operators compare numbers only on both sides.
pub async fn filter_ordering_ops_never_match_strings(factory: Factory) {
    let h = fixtures(&factory).await;
    // "text" holds the string "7", "null" a null, "empty" no key: none match.
    assert_eq!(
        keys(&h, json!({"n": {"$gt": 0}})).await,
        sorted(&["five", "ten"])
    );
    assert_eq!(keys(&h, json!({"n": {"$lt": "9"}})).await, sorted(&[]));
    assert_eq!(keys(&h, json!({"s": {"$gte": "a"}})).await, sorted(&[]));
    assert_eq!(keys(&h, json!({"b": {"$gte": false}})).await, sorted(&[]));
    assert_eq!(keys(&h, json!({"n": {"$lte": null}})).await, sorted(&[]));
    assert_eq!(keys(&h, json!({"o": {"$gt": 0}})).await, sorted(&[]));
    assert_eq!(keys(&h, json!({"arr": {"$gt": 0}})).await, sorted(&[]));
}

/// Rule 5: an absent key matches $ne and $nin only.
pub async fn filter_absent_key_matches_only_ne_and_nin(factory: Factory) {
    let h = fixtures(&factory).await;
    let all = sorted(&["five", "ten", "text", "null", "empty"]);
    assert_eq!(keys(&h, json!({"missing": {"$ne": 1}})).await, all);
    assert_eq!(keys(&h, json!({"missing": {"$nin": [1]}})).await, all);
    for filter in [
        json!({"missing": 1}),
        json!({"missing": {"$eq": 1}}),
        json!({"missing": {"$in": [1]}}),
        json!({"missing": {"$gt": 0}}),
        json!({"missing": {"$gte": 0}}),
        json!({"missing": {"$lt": 0}}),
        json!({"missing": {"$lte": 0}}),
    ] {
        assert_eq!(keys(&h, filter.clone()).await, sorted(&[]), "{filter}");
    }
}

/// Rule 6: a present JSON null is distinct from an absent key.
pub async fn filter_present_null_is_distinct_from_absent(factory: Factory) {
    let h = fixtures(&factory).await;
    assert_eq!(keys(&h, json!({"n": null})).await, sorted(&["null"]));
    assert_eq!(
        keys(&h, json!({"n": {"$eq": null}})).await,
        sorted(&["null"])
    );
    assert_eq!(
        keys(&h, json!({"n": {"$ne": null}})).await,
        sorted(&["five", "ten", "text", "empty"])
    );
    assert_eq!(
        keys(&h, json!({"n": {"$in": [null]}})).await,
        sorted(&["null"])
    );
}

/// Rule 7: an empty operator object matches everything, absent keys included.
pub async fn filter_empty_operator_object_matches_everything(factory: Factory) {
    let h = fixtures(&factory).await;
    assert_eq!(
        keys(&h, json!({"n": {}})).await,
        sorted(&["five", "ten", "text", "null", "empty"])
    );
    assert_eq!(
        keys(&h, json!({})).await,
        sorted(&["five", "ten", "text", "null", "empty"])
    );
}

/// Rule 8: an unknown operator or a non-scalar operand is invalid (HTTP 400).
pub async fn filter_unknown_operator_or_non_scalar_operand_is_invalid(_factory: Factory) {
    for filter in [
        json!({"n": {"$regex": "x"}}),
        json!({"n": {"k": 1}}),
        json!({"n": {"$eq": [1]}}),
        json!({"n": {"$gt": {"a": 1}}}),
        json!({"n": {"$in": 1}}),
        json!({"n": {"$in": [[1]]}}),
        json!({"n": {"$nin": [{"a": 1}]}}),
        json!({"n": [1]}),
        json!([1]),
    ] {
        assert_kind(StoreFilter::parse(&filter), ErrorKind::Invalid);
    }
}

/// Rule 9: the filter is applied before paging.
pub async fn filter_applies_before_paging(factory: Factory) {
    let h = Harness::new(&factory).await;
    for i in 0..10 {
        h.put(&["f"], &format!("k{i}"), json!({"even": i % 2 == 0}))
            .await;
    }
    let page = |offset| ItemSearch {
        namespace_prefix: ns(&["f"]),
        filter: StoreFilter::parse(&json!({"even": true})).expect("valid"),
        limit: Some(3),
        offset,
        ..ItemSearch::default()
    };
    let first = h.store.items().search(&page(0)).await.expect("search");
    let second = h.store.items().search(&page(3)).await.expect("search");
    assert_eq!(first.len(), 3);
    assert_eq!(second.len(), 2);
    assert!(
        first
            .iter()
            .chain(&second)
            .all(|hit| hit.item.value["even"] == json!(true))
    );
}
