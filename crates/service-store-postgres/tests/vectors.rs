//! The semantic index's setup on PostgreSQL (pgvector, on `PGVECTOR_TEST_URL`): made
//! only when configured, checked at every boot, HNSW pinned and built on demand.

mod support;

use std::sync::Arc;

use serde_json::json;
use service_store::{
    FieldVector, IndexFields, IndexSpec, ItemSearch, PutItem, SemanticIndex, StoreFilter,
    SystemClock, WordHashEmbedder,
};
use service_store_postgres::{PgOptions, PostgresStore};
use tokio_postgres::NoTls;

/// A schema of this test's own on the pgvector server, dropped at the end.
struct Schema(String);

impl Schema {
    fn new() -> Self {
        Self(support::unique_schema())
    }

    fn options(&self, index: Option<IndexSpec>) -> PgOptions {
        PgOptions {
            index,
            ..support::options_on(&support::pgvector_url(), &self.0)
        }
    }

    async fn connect(&self, index: Option<IndexSpec>) -> Result<PostgresStore, String> {
        PostgresStore::connect(self.options(index), Arc::new(SystemClock))
            .await
            .map_err(|error| error.to_string())
    }

    /// One value read from the server, in this schema.
    async fn read<T: for<'a> tokio_postgres::types::FromSql<'a>>(&self, sql: &str) -> Option<T> {
        let (client, connection) = tokio_postgres::connect(&support::pgvector_url(), NoTls)
            .await
            .expect("pgvector server");
        let task = tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path = {}", self.0))
            .await
            .expect("search path");
        let row = client.query_opt(sql, &[]).await.expect("query");
        drop(client);
        let _ = task.await;
        row.map(|row| row.get(0))
    }

    async fn drop_it(self) {
        let _ = support::admin_on(
            &support::pgvector_url(),
            &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0),
        )
        .await;
    }
}

fn spec(dims: usize, hnsw: bool) -> IndexSpec {
    IndexSpec { dims, hnsw }
}

const TABLE: &str = "SELECT to_regclass('store_vectors')::text";
const PIN: &str = "SELECT atttypmod FROM pg_attribute
    WHERE attrelid = 'store_vectors'::regclass AND attname = 'embedding'";
const HNSW: &str = "SELECT to_regclass('store_vectors_hnsw')::text";

#[tokio::test]
async fn the_vectors_table_is_made_only_when_an_index_is_configured() {
    let schema = Schema::new();
    schema.connect(None).await.expect("boot without index");
    assert_eq!(schema.read::<Option<String>>(TABLE).await.flatten(), None);
    schema
        .connect(Some(spec(4, false)))
        .await
        .expect("boot with index");
    assert_eq!(
        schema
            .read::<Option<String>>(TABLE)
            .await
            .flatten()
            .as_deref(),
        Some("store_vectors")
    );
    assert_eq!(schema.read::<i32>(PIN).await, Some(-1), "exact: not pinned");
    schema.drop_it().await;
}

#[tokio::test]
async fn a_boot_with_other_dims_than_the_stored_vectors_fails() {
    let schema = Schema::new();
    let store = schema.connect(Some(spec(4, false))).await.expect("boot");
    let put = PutItem {
        namespace: vec!["n".into()],
        key: "k".into(),
        value: service_conformance::harness::obj(json!({"text": "x"})),
        ttl_minutes: None,
        vectors: vec![FieldVector {
            field: "text".into(),
            vector: vec![1.0, 0.0, 0.0, 0.0],
        }],
    };
    store.store().items().put(put).await.expect("put");
    drop(store);
    let error = schema.connect(Some(spec(8, false))).await.unwrap_err();
    assert!(
        error.contains("store.index.dims is 8") && error.contains("vectors of 4 dimensions"),
        "{error}"
    );
    schema
        .connect(Some(spec(4, false)))
        .await
        .expect("the same dims boot");
    schema.drop_it().await;
}

#[tokio::test]
async fn hnsw_pins_the_column_and_builds_its_index_and_off_drops_the_index_not_the_pin() {
    let schema = Schema::new();
    schema
        .connect(Some(spec(4, true)))
        .await
        .expect("boot with hnsw");
    assert_eq!(schema.read::<i32>(PIN).await, Some(4));
    assert_eq!(
        schema
            .read::<Option<String>>(HNSW)
            .await
            .flatten()
            .as_deref(),
        Some("store_vectors_hnsw")
    );
    schema
        .connect(Some(spec(4, false)))
        .await
        .expect("boot without hnsw");
    assert_eq!(schema.read::<i32>(PIN).await, Some(4), "still pinned");
    assert_eq!(
        schema.read::<Option<String>>(HNSW).await.flatten(),
        None,
        "exact again"
    );
    schema.drop_it().await;
}

#[tokio::test]
async fn an_hnsw_search_ranks_the_nearest_items_under_its_prefix_and_filter() {
    let schema = Schema::new();
    let index = SemanticIndex::new(
        Arc::new(WordHashEmbedder::new(64)),
        vec!["text".into()],
        true,
    );
    let store = schema
        .connect(Some(index.spec()))
        .await
        .expect("boot with hnsw")
        .store();
    let words = [
        "cat", "dog", "bird", "fish", "stock", "price", "market", "rug",
    ];
    for n in 0..40usize {
        let text = format!(
            "{} {} {}",
            words[n % 8],
            words[(n / 8) % 8],
            words[(n * 3) % 8]
        );
        let kind = if n % 2 == 0 { "even" } else { "odd" };
        let value = service_conformance::harness::obj(json!({"text": text, "kind": kind}));
        let which = if n == 0 {
            IndexFields::Skip
        } else {
            IndexFields::Configured
        };
        let vectors = index.vectors(&value, &which).await.expect("embed");
        let space = if n % 5 == 0 { "other" } else { "pets" };
        let put = PutItem {
            namespace: vec![space.into()],
            key: format!("k{n}"),
            value,
            ttl_minutes: None,
            vectors,
        };
        store.items().put(put).await.expect("put");
    }
    let search = ItemSearch {
        namespace_prefix: vec!["pets".into()],
        filter: StoreFilter::from_object(&service_conformance::harness::obj(
            json!({"kind": "odd"}),
        ))
        .expect("filter"),
        query: Some(index.query("cat rug").await.expect("query")),
        limit: Some(5),
        ..ItemSearch::default()
    };
    let found = store.items().search(&search).await.expect("search");
    assert_eq!(found.len(), 5, "{found:?}");
    for item in &found {
        assert_eq!(item.item.namespace, ["pets"]);
        assert_eq!(item.item.value["kind"], "odd");
        assert!(item.score.is_some());
    }
    let scores: Vec<f64> = found.iter().filter_map(|item| item.score).collect();
    assert!(
        scores.windows(2).all(|pair| pair[0] >= pair[1]),
        "{scores:?}"
    );
    drop(store);
    schema.drop_it().await;
}
