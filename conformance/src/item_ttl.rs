//! Store item ttl (SPEC "Store" TTL, "TTL and schedules" 1), driven by the manual clock.

use serde_json::json;
use service_store::{ErrorKind, ItemSearch, NamespaceQuery, PutItem};

use crate::harness::{Factory, Harness, assert_kind, ns, obj};

async fn present(h: &Harness, key: &str, refresh: bool) -> bool {
    h.store
        .items()
        .get(&ns(&["t"]), key, refresh)
        .await
        .expect("get")
        .is_some()
}

/// An expired item reads as absent at once: get, search and namespace listing.
pub async fn item_ttl_expired_reads_as_absent_at_once(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put_with_ttl(&["t"], "k", json!({}), Some(10.0)).await;
    h.advance_minutes(9.9);
    assert!(present(&h, "k", false).await);
    h.advance_minutes(0.1);
    assert!(!present(&h, "k", false).await);
    assert!(
        h.store
            .items()
            .search(&ItemSearch::default())
            .await
            .expect("search")
            .is_empty()
    );
    assert!(
        h.store
            .items()
            .list_namespaces(&NamespaceQuery::default())
            .await
            .expect("list")
            .is_empty()
    );
}

/// With refresh_on_read, a get extends a live item's expiry by its own ttl.
pub async fn item_refresh_on_read_extends_expiry(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put_with_ttl(&["t"], "k", json!({}), Some(10.0)).await;
    h.advance_minutes(8.0);
    assert!(present(&h, "k", true).await);
    h.advance_minutes(8.0);
    assert!(present(&h, "k", false).await);
    h.advance_minutes(2.0);
    assert!(!present(&h, "k", true).await);
}

/// A get without refresh leaves the expiry where it was.
pub async fn item_get_without_refresh_keeps_expiry(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put_with_ttl(&["t"], "k", json!({}), Some(10.0)).await;
    h.advance_minutes(8.0);
    assert!(present(&h, "k", false).await);
    h.advance_minutes(2.0);
    assert!(!present(&h, "k", false).await);
}

/// A search with refresh extends the expiry of the items it returns.
pub async fn item_search_with_refresh_extends_expiry(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put_with_ttl(&["t"], "k", json!({}), Some(10.0)).await;
    h.advance_minutes(8.0);
    let search = ItemSearch {
        refresh_ttl: true,
        ..ItemSearch::default()
    };
    assert_eq!(
        h.store.items().search(&search).await.expect("search").len(),
        1
    );
    h.advance_minutes(8.0);
    assert!(present(&h, "k", false).await);
}

/// Writing again restarts the expiry; an item without ttl never expires.
pub async fn item_put_restarts_expiry_and_no_ttl_never_expires(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put_with_ttl(&["t"], "k", json!({}), Some(10.0)).await;
    h.put(&["t"], "forever", json!({})).await;
    h.advance_minutes(8.0);
    h.put_with_ttl(&["t"], "k", json!({"v": 2}), Some(10.0))
        .await;
    h.advance_minutes(8.0);
    assert!(present(&h, "k", false).await);
    h.advance_minutes(1e6);
    assert!(present(&h, "forever", false).await);
}

/// The sweeper removes expired items only and reports how many.
pub async fn item_sweep_removes_expired_only(factory: Factory) {
    let h = Harness::new(&factory).await;
    h.put_with_ttl(&["t"], "short", json!({}), Some(1.0)).await;
    h.put_with_ttl(&["t"], "long", json!({}), Some(100.0)).await;
    h.put(&["t"], "forever", json!({})).await;
    h.advance_minutes(2.0);
    assert_eq!(
        h.store.items().sweep_expired(h.now()).await.expect("sweep"),
        1
    );
    assert_eq!(
        h.store.items().sweep_expired(h.now()).await.expect("sweep"),
        0
    );
    assert!(present(&h, "long", false).await && present(&h, "forever", false).await);
}

/// A ttl must be a positive number of minutes, at most 100 years (a longer one would
/// overflow an expiry or a PostgreSQL interval).
pub async fn item_ttl_must_be_positive_and_at_most_100_years(factory: Factory) {
    let h = Harness::new(&factory).await;
    let put = |ttl_minutes| PutItem {
        namespace: ns(&["t"]),
        key: "k".into(),
        value: obj(json!({})),
        ttl_minutes: Some(ttl_minutes),
        vectors: Vec::new(),
    };
    for ttl in [
        -1.0,
        0.0,
        f64::NAN,
        service_types::MAX_TTL_MINUTES * 2.0,
        1e30,
    ] {
        assert_kind(h.store.items().put(put(ttl)).await, ErrorKind::Invalid);
    }
    h.store
        .items()
        .put(put(service_types::MAX_TTL_MINUTES))
        .await
        .expect("the longest ttl");
}
