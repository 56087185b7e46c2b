//! LangGraph's store API inside a Python graph, through the bridge onto the server's
//! own store operations: filter operators, offsets, semantic queries with scores,
//! namespace listing, and pages past the routes' 1,000 bound all as the server does
//! them, complete. SERVICE_PYTHON as for tests/bridge.rs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use service_engine::{EngineConfig, long_term_store};
use service_graph::{
    Checkpointer, InMemorySaver, RunContext, RunInput, RunnableConfig, StreamOptions,
};
use service_python::{Bridge, BridgeOptions};
use service_store::{ManualClock, SemanticIndex, SystemClock, WordHashEmbedder};
use service_store_memory::{MemoryOptions, memory_store};
use service_types::{StreamMode, Timestamp};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_graph_gets_the_servers_store_complete_past_a_thousand_items() {
    let python = std::env::var("SERVICE_PYTHON").expect(
        "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)",
    );
    let graphs = BTreeMap::from([("probe".to_owned(), "./store_probe.py:graph".to_owned())]);
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/store_graph");
    let mut options = BridgeOptions::new(graphs, base);
    options.python = python.into();
    let bridge = Bridge::start(options).await.expect("the bridge starts");
    let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let probe = bridge.resolver(saver).load("probe").await.unwrap();

    let index = SemanticIndex::new(
        Arc::new(WordHashEmbedder::new(1024)),
        vec!["text".into()],
        false,
    );
    let store = memory_store(MemoryOptions::new(Arc::new(SystemClock)).with_index(index.spec()));
    let config = EngineConfig {
        store_index: Some(index),
        ..EngineConfig::default()
    };
    let long_term = long_term_store(store, &config);

    let mut report = Value::Null;
    for (thread, op) in [("fill", "fill"), ("report", "report")] {
        let ctx = RunContext::new(CancellationToken::new()).with_store(Arc::clone(&long_term));
        let options = StreamOptions {
            stream_mode: vec![StreamMode::Values],
            config: RunnableConfig::for_thread(thread),
            ..StreamOptions::default()
        };
        let mut stream = probe
            .stream(RunInput::Values(json!({"op": op})), options, ctx)
            .await
            .unwrap();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.unwrap();
            if chunk.mode() == "values" {
                report = chunk.data()["report"].clone();
            }
        }
    }

    assert_eq!(report["everything"], 1501, "every item, past one page");
    assert_eq!(report["late"], true, "a $gte filter, complete");
    assert_eq!(
        report["even_after_100"], 650,
        "an equality filter with an offset"
    );
    let ranked = report["ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 3);
    assert_eq!(
        ranked[0][0], "k7",
        "the semantic query ranks the cat first: {ranked:?}"
    );
    assert!(ranked[0][1].as_f64().unwrap() > ranked[1][1].as_f64().unwrap());
    assert_eq!(
        report["unindexed_last"], true,
        "index=False: no vector, ranked last"
    );
    assert_eq!(report["namespaces"], 1200, "every namespace, past one page");
    assert_eq!(report["roots"], json!([["docs"]]));
    assert_eq!(report["some"], 5);
    assert_eq!(
        report["got"],
        json!({"n": 7, "kind": "odd", "text": "the cat sat on the mat"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graphs_put_without_ttl_takes_the_default_and_ttl_none_never_expires() {
    let python = std::env::var("SERVICE_PYTHON").expect(
        "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)",
    );
    let graphs = BTreeMap::from([("probe".to_owned(), "./store_probe.py:graph".to_owned())]);
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/store_graph");
    let mut options = BridgeOptions::new(graphs, base);
    options.python = python.into();
    options.workers = 1;
    let bridge = Bridge::start(options).await.expect("the bridge starts");
    let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let probe = bridge.resolver(saver).load("probe").await.unwrap();

    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_750_000_000_000_000,
    )));
    let store = memory_store(MemoryOptions::new(clock.clone()));
    let config = EngineConfig {
        store_default_ttl_minutes: Some(5.0),
        store_refresh_on_read: false,
        ..EngineConfig::default()
    };
    let long_term = long_term_store(store.clone(), &config);
    let run = |op: &'static str| {
        let ctx = RunContext::new(CancellationToken::new()).with_store(Arc::clone(&long_term));
        let options = StreamOptions {
            stream_mode: vec![StreamMode::Values],
            config: RunnableConfig::for_thread(op),
            ..StreamOptions::default()
        };
        let probe = Arc::clone(&probe);
        async move {
            let mut stream = probe
                .stream(RunInput::Values(json!({"op": op})), options, ctx)
                .await
                .unwrap();
            while let Some(chunk) = stream.next().await {
                chunk.unwrap();
            }
        }
    };
    run("ttl").await;

    let live = |key: &'static str| {
        let store = store.clone();
        async move {
            let namespace = ["ttl".to_owned()];
            let item = store.items().get(&namespace, key, false).await.unwrap();
            item.is_some()
        }
    };
    for key in ["default", "never", "thirty", "never_sync"] {
        assert!(live(key).await, "{key} is stored");
    }
    clock.advance_minutes(4.0);
    // A graph's get without refresh_ttl: refresh_on_read is false, the expiry stays.
    run("read").await;
    clock.advance_minutes(2.0);
    assert!(!live("default").await, "no ttl: the 5-minute default");
    assert!(live("thirty").await, "its own 30 minutes");
    assert!(live("never").await, "ttl=None: never expires");
    clock.advance_minutes(60.0 * 24.0 * 365.0);
    assert!(!live("thirty").await);
    assert!(live("never").await, "ttl=None: never expires");
    assert!(live("never_sync").await, "the sync put too");
}
