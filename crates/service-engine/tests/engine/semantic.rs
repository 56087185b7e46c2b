//! SPEC "Store", semantic index: puts are embedded before the store is called, a
//! query ranks by the embedder's vector, and a failing embedder writes nothing.

use async_trait::async_trait;
use service_engine::ErrorKind;
use service_store::{Embedder, SemanticIndex, StoreError, StoreResult, WordHashEmbedder};
use service_types::{StorePut, StoreSearch};

use crate::support::*;

/// An embedder whose endpoint is down.
#[derive(Debug)]
struct Down;

#[async_trait]
impl Embedder for Down {
    fn dims(&self) -> usize {
        8
    }

    async fn embed(&self, _texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
        Err(StoreError::transient(
            "the embeddings endpoint http://127.0.0.1:9/v1/embeddings is unreachable",
        ))
    }
}

/// An engine on the in-memory store with a semantic index over `text` by `embedder`.
fn engine_with(embedder: Arc<dyn Embedder>) -> Engine {
    let index = SemanticIndex::new(embedder, vec!["text".into()], false);
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_800_000_000_000_000,
    )));
    let config = EngineConfig {
        store_index: Some(index.clone()),
        ..EngineConfig::default()
    };
    Engine::new(EngineParts {
        webhooks: None,
        store: memory_store(MemoryOptions::new(clock.clone()).with_index(index.spec())),
        graphs: Box::new(service_example_graphs::registry),
        checkpointer: Arc::new(InMemorySaver::new()),
        bus: MemoryBus::new(config.bus),
        clock,
        config,
    })
    .expect("example graphs")
}

fn put(key: &str, value: Value, index: Option<Value>) -> StorePut {
    StorePut {
        namespace: vec!["docs".into()],
        key: key.into(),
        value,
        index,
        ..StorePut::default()
    }
}

fn search(query: Option<&str>) -> StoreSearch {
    StoreSearch {
        namespace_prefix: vec!["docs".into()],
        query: query.map(str::to_owned),
        ..StoreSearch::default()
    }
}

async fn keys_and_scores(engine: &Engine, query: Option<&str>) -> Vec<(String, Option<f64>)> {
    let found = unscoped(engine)
        .items()
        .search(search(query))
        .await
        .expect("search");
    found
        .into_iter()
        .map(|found| (found.item.key, found.score))
        .collect()
}

#[tokio::test]
async fn a_put_is_embedded_and_a_query_ranks_by_it_best_first() {
    let engine = engine_with(Arc::new(WordHashEmbedder::new(64)));
    let items = unscoped(&engine).items();
    items
        .put(put("mat", json!({"text": "the cat sat on the mat"}), None))
        .await
        .unwrap();
    items
        .put(put("stocks", json!({"text": "stock prices fell"}), None))
        .await
        .unwrap();
    let found = keys_and_scores(&engine, Some("the cat on the mat")).await;
    assert_eq!(found[0].0, "mat");
    assert!(found.iter().all(|(_, score)| score.is_some()), "{found:?}");
    let plain = keys_and_scores(&engine, None).await;
    assert!(plain.iter().all(|(_, score)| score.is_none()), "{plain:?}");
    let empty = keys_and_scores(&engine, Some("")).await;
    assert_eq!(empty, plain, "an empty query is no query");
}

#[tokio::test]
async fn index_false_skips_and_a_list_of_paths_replaces_the_configured_fields() {
    let engine = engine_with(Arc::new(WordHashEmbedder::new(64)));
    let items = unscoped(&engine).items();
    let value = json!({"text": "stock prices", "title": "the cat sat on the mat"});
    items
        .put(put("title", value.clone(), Some(json!(["title"]))))
        .await
        .unwrap();
    items.put(put("text", value.clone(), None)).await.unwrap();
    items
        .put(put("none", value, Some(json!(false))))
        .await
        .unwrap();
    let found = keys_and_scores(&engine, Some("the cat sat on the mat")).await;
    let keys: Vec<&str> = found.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(keys, ["title", "text", "none"]);
    assert_eq!(
        found[2].1, None,
        "an item put with index: false has no score"
    );
    let refused = items
        .put(put("bad", json!({}), Some(json!("text"))))
        .await
        .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Unprocessable);
}

#[tokio::test]
async fn an_embedder_failure_fails_the_put_with_its_cause_and_writes_nothing() {
    let engine = engine_with(Arc::new(Down));
    let items = unscoped(&engine).items();
    let error = items
        .put(put("k", json!({"text": "hello"}), None))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Unavailable);
    assert_eq!(error.code, Some("embedding_failed"));
    assert!(
        error
            .message
            .contains("embedding failed: the embeddings endpoint"),
        "{}",
        error.message
    );
    let got = items.get(vec!["docs".into()], "k", None).await.unwrap();
    assert!(got.is_none(), "nothing was written");
    let query = unscoped(&engine)
        .items()
        .search(search(Some("hello")))
        .await;
    assert_eq!(query.unwrap_err().code, Some("embedding_failed"));
    items
        .put(put("skip", json!({"text": "hello"}), Some(json!(false))))
        .await
        .expect("index: false calls no embedder");
}

#[tokio::test]
async fn a_query_without_an_index_is_ignored_and_every_score_is_null() {
    let engine = harness(EngineConfig::default()).engine;
    let items = unscoped(&engine).items();
    items
        .put(put("a", json!({"text": "x"}), Some(json!(["text"]))))
        .await
        .unwrap();
    let found = keys_and_scores(&engine, Some("x")).await;
    assert_eq!(found, [("a".to_owned(), None)]);
}
