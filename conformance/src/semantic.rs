//! SPEC "Store": semantic search with `store.index`. Items are embedded by the shared
//! [`SemanticIndex`] with the deterministic [`WordHashEmbedder`], so every driver
//! sees the same vectors; a rule checks what the driver does with them: exact cosine
//! ranking over the candidates the prefix and filter leave, scores, paging, and that
//! a put replaces (and a delete removes) an item's vectors.

use std::sync::Arc;

use serde_json::{Value, json};
use service_store::semantic::cosine_similarity;
use service_store::{
    ErrorKind, FieldVector, IndexFields, ItemSearch, PutItem, SemanticIndex, StoreFilter,
    WordHashEmbedder,
};
use service_types::SearchItem;

use crate::harness::{Factory, Harness, assert_kind, ns, obj};

/// Dimensions of the test vectors.
pub const DIMS: usize = 64;

/// The index every rule embeds with: the `text` field, by default.
pub fn test_index() -> SemanticIndex {
    SemanticIndex::new(
        Arc::new(WordHashEmbedder::new(DIMS)),
        vec!["text".into()],
        false,
    )
}

/// A fresh store with the test index; it must say it ranks by vectors.
async fn harness(factory: &Factory) -> (Harness, SemanticIndex) {
    let index = test_index();
    let h = Harness::with_index(factory, index.spec()).await;
    assert!(
        h.store.capabilities().semantic_search,
        "a store built with an index reports semantic_search"
    );
    (h, index)
}

/// Embeds `value` as `fields` says and puts it; the clock moves a minute first so
/// recency order is the order of the puts.
async fn put(
    h: &Harness,
    index: &SemanticIndex,
    namespace: &[&str],
    key: &str,
    value: Value,
    fields: IndexFields,
) {
    h.advance_minutes(1.0);
    let value = obj(value);
    let vectors = index.vectors(&value, &fields).await.expect("embed");
    let item = PutItem {
        namespace: ns(namespace),
        key: key.to_owned(),
        value,
        ttl_minutes: None,
        vectors,
    };
    h.store.items().put(item).await.expect("put item");
}

/// A search under `prefix` with `filter`, ranked by `query` when given.
async fn search(
    h: &Harness,
    index: &SemanticIndex,
    prefix: &[&str],
    query: Option<&str>,
    filter: Value,
    page: (usize, usize),
) -> Vec<SearchItem> {
    let query = match query {
        Some(text) => Some(index.query(text).await.expect("embed query")),
        None => None,
    };
    let search = ItemSearch {
        namespace_prefix: ns(prefix),
        filter: StoreFilter::from_object(&obj(filter)).expect("filter"),
        query,
        limit: Some(page.0),
        offset: page.1,
        refresh_ttl: false,
    };
    h.store.items().search(&search).await.expect("search")
}

fn keys(found: &[SearchItem]) -> Vec<&str> {
    found.iter().map(|found| found.item.key.as_str()).collect()
}

/// The similarity the rules expect: the best over the texts' vectors.
fn expected(query: &str, texts: &[&str]) -> f64 {
    let embedder = WordHashEmbedder::new(DIMS);
    let query = embedder.vector(query);
    texts
        .iter()
        .map(|text| cosine_similarity(&embedder.vector(text), &query))
        .fold(f64::NEG_INFINITY, f64::max)
}

fn assert_close(found: Option<f64>, want: f64) {
    let found = found.expect("a scored item");
    assert!(
        (found - want).abs() < 1e-5,
        "score {found}, expected {want}"
    );
}

const MAT: &str = "the cat sat on the mat";
const DOG: &str = "a cat chased a dog";
const STOCKS: &str = "stock prices fell sharply";

/// The best match first, whatever the recency order.
pub async fn semantic_query_ranks_by_cosine_similarity_best_first(factory: Factory) {
    let (h, index) = harness(&factory).await;
    for (key, text) in [("mat", MAT), ("dog", DOG), ("stocks", STOCKS)] {
        put(
            &h,
            &index,
            &["m"],
            key,
            json!({"text": text}),
            IndexFields::Configured,
        )
        .await;
    }
    let found = search(
        &h,
        &index,
        &["m"],
        Some("cat on the mat"),
        json!({}),
        (10, 0),
    )
    .await;
    assert_eq!(keys(&found), ["mat", "dog", "stocks"]);
    let plain = search(&h, &index, &["m"], None, json!({}), (10, 0)).await;
    assert_eq!(
        keys(&plain),
        ["stocks", "dog", "mat"],
        "no query: newest first"
    );
}

/// `score` is the cosine similarity of the best vector; no query, no score.
pub async fn semantic_score_is_cosine_similarity_and_null_without_query(factory: Factory) {
    let (h, index) = harness(&factory).await;
    put(
        &h,
        &index,
        &["m"],
        "same",
        json!({"text": MAT}),
        IndexFields::Configured,
    )
    .await;
    let both = IndexFields::Paths(vec!["text".into(), "title".into()]);
    put(
        &h,
        &index,
        &["m"],
        "two",
        json!({"text": STOCKS, "title": DOG}),
        both,
    )
    .await;
    let found = search(&h, &index, &["m"], Some(MAT), json!({}), (10, 0)).await;
    assert_eq!(keys(&found), ["same", "two"]);
    assert_close(found[0].score, 1.0);
    assert_close(found[1].score, expected(MAT, &[STOCKS, DOG]));
    let plain = search(&h, &index, &["m"], None, json!({}), (10, 0)).await;
    assert!(plain.iter().all(|found| found.score.is_none()), "{plain:?}");
}

/// The filter narrows the candidates; limit and offset page the ranked list.
pub async fn semantic_filter_and_paging_apply_to_the_ranked_candidates(factory: Factory) {
    let (h, index) = harness(&factory).await;
    let texts = [
        ("a", "cat", "pet"),
        ("b", "cat cat dog", "pet"),
        ("c", "cat", "wild"),
        ("d", "dog bird", "pet"),
        ("e", "cat bird fish", "pet"),
    ];
    for (key, text, kind) in texts {
        let value = json!({"text": text, "kind": kind});
        put(&h, &index, &["z"], key, value, IndexFields::Configured).await;
    }
    let all = search(
        &h,
        &index,
        &["z"],
        Some("cat"),
        json!({"kind": "pet"}),
        (10, 0),
    )
    .await;
    assert_eq!(keys(&all), ["a", "b", "e", "d"]);
    let first = search(
        &h,
        &index,
        &["z"],
        Some("cat"),
        json!({"kind": "pet"}),
        (2, 0),
    )
    .await;
    let second = search(
        &h,
        &index,
        &["z"],
        Some("cat"),
        json!({"kind": "pet"}),
        (2, 2),
    )
    .await;
    assert_eq!(keys(&first), ["a", "b"]);
    assert_eq!(keys(&second), ["e", "d"]);
    let none = search(
        &h,
        &index,
        &["z"],
        Some("cat"),
        json!({"kind": "x"}),
        (10, 0),
    )
    .await;
    assert!(none.is_empty());
}

/// Only items under the prefix are ranked.
pub async fn semantic_namespace_prefix_bounds_the_candidates(factory: Factory) {
    let (h, index) = harness(&factory).await;
    put(
        &h,
        &index,
        &["a", "x"],
        "in",
        json!({"text": DOG}),
        IndexFields::Configured,
    )
    .await;
    put(
        &h,
        &index,
        &["b", "x"],
        "out",
        json!({"text": MAT}),
        IndexFields::Configured,
    )
    .await;
    put(
        &h,
        &index,
        &["a"],
        "top",
        json!({"text": STOCKS}),
        IndexFields::Configured,
    )
    .await;
    let found = search(&h, &index, &["a"], Some(MAT), json!({}), (10, 0)).await;
    assert_eq!(keys(&found), ["in", "top"]);
    let found = search(&h, &index, &["*", "x"], Some(MAT), json!({}), (10, 0)).await;
    assert_eq!(keys(&found), ["out", "in"]);
}

/// A vector or query of other dims than the index's is `Invalid` and writes nothing.
pub async fn semantic_vectors_of_other_dims_are_invalid_and_write_nothing(factory: Factory) {
    let (h, index) = harness(&factory).await;
    let put = PutItem {
        namespace: ns(&["d"]),
        key: "k".into(),
        value: obj(json!({"text": "x"})),
        ttl_minutes: None,
        vectors: vec![FieldVector {
            field: "text".into(),
            vector: vec![1.0; DIMS + 1],
        }],
    };
    assert_kind(h.store.items().put(put).await, ErrorKind::Invalid);
    let got = h.store.items().get(&ns(&["d"]), "k", false).await;
    assert!(got.expect("get").is_none(), "nothing was written");
    let search = ItemSearch {
        query: Some(vec![1.0; DIMS - 1]),
        ..ItemSearch::default()
    };
    assert_kind(h.store.items().search(&search).await, ErrorKind::Invalid);
    let found = self::search(&h, &index, &["d"], Some("x"), json!({}), (10, 0)).await;
    assert!(found.is_empty());
}

/// A put replaces every vector of the item: what the old value said no longer ranks.
pub async fn semantic_update_replaces_the_items_vectors(factory: Factory) {
    let (h, index) = harness(&factory).await;
    let both = IndexFields::Paths(vec!["text".into(), "title".into()]);
    put(
        &h,
        &index,
        &["u"],
        "k",
        json!({"text": DOG, "title": MAT}),
        both,
    )
    .await;
    put(
        &h,
        &index,
        &["u"],
        "other",
        json!({"text": DOG}),
        IndexFields::Configured,
    )
    .await;
    let found = search(&h, &index, &["u"], Some(MAT), json!({}), (10, 0)).await;
    assert_eq!(keys(&found), ["k", "other"]);
    assert_close(found[0].score, 1.0);
    put(
        &h,
        &index,
        &["u"],
        "k",
        json!({"text": STOCKS, "title": MAT}),
        IndexFields::Configured,
    )
    .await;
    let found = search(&h, &index, &["u"], Some(MAT), json!({}), (10, 0)).await;
    assert_eq!(keys(&found), ["other", "k"], "the title's vector is gone");
    assert_close(found[1].score, expected(MAT, &[STOCKS]));
}

/// A deleted item's vectors go with it: put again unindexed, it has no score.
pub async fn semantic_delete_removes_the_vectors(factory: Factory) {
    let (h, index) = harness(&factory).await;
    put(
        &h,
        &index,
        &["r"],
        "k",
        json!({"text": MAT}),
        IndexFields::Configured,
    )
    .await;
    h.store
        .items()
        .delete(&ns(&["r"]), "k")
        .await
        .expect("delete");
    let found = search(&h, &index, &["r"], Some(MAT), json!({}), (10, 0)).await;
    assert!(found.is_empty());
    put(
        &h,
        &index,
        &["r"],
        "k",
        json!({"text": MAT}),
        IndexFields::Skip,
    )
    .await;
    let found = search(&h, &index, &["r"], Some(MAT), json!({}), (10, 0)).await;
    assert_eq!(keys(&found), ["k"]);
    assert_eq!(found[0].score, None);
}

/// An item without vectors (`index: false`) comes after every scored one, unscored,
/// even when it is newer and its text would match best.
pub async fn semantic_unindexed_items_follow_every_scored_one(factory: Factory) {
    let (h, index) = harness(&factory).await;
    put(
        &h,
        &index,
        &["n"],
        "far",
        json!({"text": STOCKS}),
        IndexFields::Configured,
    )
    .await;
    put(
        &h,
        &index,
        &["n"],
        "old",
        json!({"text": MAT}),
        IndexFields::Skip,
    )
    .await;
    put(
        &h,
        &index,
        &["n"],
        "new",
        json!({"text": MAT}),
        IndexFields::Skip,
    )
    .await;
    let found = search(&h, &index, &["n"], Some(MAT), json!({}), (10, 0)).await;
    assert_eq!(keys(&found), ["far", "new", "old"]);
    assert!(found[0].score.is_some());
    assert_eq!((found[1].score, found[2].score), (None, None));
    let last = search(&h, &index, &["n"], Some(MAT), json!({}), (1, 2)).await;
    assert_eq!(
        keys(&last),
        ["old"],
        "paging runs over scored then unscored"
    );
}

/// A store built without an index says so and refuses vectors and queries.
pub async fn semantic_a_store_without_an_index_refuses_vectors(factory: Factory) {
    let h = Harness::new(&factory).await;
    assert!(!h.store.capabilities().semantic_search);
    let put = PutItem {
        namespace: ns(&["d"]),
        key: "k".into(),
        value: obj(json!({})),
        ttl_minutes: None,
        vectors: vec![FieldVector {
            field: "$".into(),
            vector: vec![1.0; DIMS],
        }],
    };
    assert_kind(h.store.items().put(put).await, ErrorKind::Unsupported);
    let search = ItemSearch {
        query: Some(vec![1.0; DIMS]),
        ..ItemSearch::default()
    };
    assert_kind(
        h.store.items().search(&search).await,
        ErrorKind::Unsupported,
    );
}

/// For a driver declared `without: [semantic_search]`: it ignores the index it is
/// asked for and says it has none.
pub async fn store_has_no_semantic_search(factory: Factory) {
    let h = Harness::with_index(&factory, test_index().spec()).await;
    assert!(!h.store.capabilities().semantic_search);
}

/// Every page of a ranking with many equal scores, items of two vectors, a filter,
/// expired items and unindexed ones is the page of the whole ranked list: best
/// score first, ties newest first, unscored last. (A driver reading only the best
/// vectors first must keep every tie of the last one it reads.)
pub async fn semantic_pages_of_tied_scores_follow_the_whole_ranking(factory: Factory) {
    let (h, index) = harness(&factory).await;
    let two = IndexFields::Paths(vec!["text".into(), "title".into()]);
    // (key, expected score or None, still live and a pet): put oldest first.
    let mut model: Vec<(String, Option<f64>, usize)> = Vec::new();
    for i in 0..60_usize {
        let (text, title, fields) = match i % 4 {
            0 => ("cat", None, IndexFields::Configured),
            1 => ("dog", Some("cat"), two.clone()),
            2 => ("cat dog", None, IndexFields::Configured),
            _ => ("dog bird", None, IndexFields::Configured),
        };
        let unindexed = i % 7 == 6;
        let fields = if unindexed { IndexFields::Skip } else { fields };
        let pet = i % 9 != 5;
        let expires = i % 10 == 3;
        let mut value = json!({"text": text, "kind": if pet { "pet" } else { "wild" }});
        if let Some(title) = title {
            value["title"] = json!(title);
        }
        h.advance_minutes(1.0);
        let value = obj(value);
        let vectors = index.vectors(&value, &fields).await.expect("embed");
        let key = format!("k{i:02}");
        let item = PutItem {
            namespace: ns(&["t", "x"]),
            key: key.clone(),
            value,
            ttl_minutes: expires.then_some(2.0),
            vectors,
        };
        h.store.items().put(item).await.expect("put item");
        if pet && !expires {
            let texts: Vec<&str> = std::iter::once(text).chain(title).collect();
            let score = (!unindexed).then(|| expected("cat", &texts));
            model.push((key, score, i));
        }
    }
    h.advance_minutes(5.0);
    // Best score first, unscored last; equal scores newest (the later put) first.
    model.sort_by(|a, b| match (a.1, b.1) {
        (Some(x), Some(y)) => y.total_cmp(&x).then(b.2.cmp(&a.2)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => b.2.cmp(&a.2),
    });
    let ranked: Vec<&str> = model.iter().map(|(key, _, _)| key.as_str()).collect();
    for limit in [1, 2, 3, 5, 8] {
        for offset in [0, 1, 4, 9, 15, 24, 30, 38, 45] {
            let found = search(
                &h,
                &index,
                &["t"],
                Some("cat"),
                json!({"kind": "pet"}),
                (limit, offset),
            )
            .await;
            let want: Vec<&str> = ranked.iter().skip(offset).take(limit).copied().collect();
            assert_eq!(keys(&found), want, "limit {limit}, offset {offset}");
            for (found, (_, score, _)) in found.iter().zip(model.iter().skip(offset)) {
                match score {
                    Some(score) => assert_close(found.score, *score),
                    None => assert_eq!(found.score, None),
                }
            }
        }
    }
}
