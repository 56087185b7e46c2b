//! The Node bridge against real Node workers running the JS reference graphs
//! (`examples/js-graphs`, TypeScript, their pinned packages installed there by
//! scripts/test). The interpreter is SERVICE_NODE, default `node`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use service_graph::{
    AgentGraph, Checkpointer, Chunk, GraphError, GraphResolver, InMemorySaver, LongTermStore,
    RunContext, RunInput, RunnableConfig, StateOptions, StreamOptions,
};
use service_node::{Bridge, NodeOptions};
use service_types::StreamMode;
use tokio_util::sync::CancellationToken;

fn reference() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/js-graphs");
    assert!(
        dir.join("node_modules/@langchain/langgraph").is_dir(),
        "run `npm ci` in examples/js-graphs first (scripts/test does)"
    );
    dir
}

fn node_options(graphs: BTreeMap<String, String>, base: PathBuf) -> NodeOptions {
    let mut options = NodeOptions::new(graphs, base);
    if let Ok(node) = std::env::var("SERVICE_NODE") {
        options.node = node.into();
    }
    options
}

async fn bridge(
    graphs: &[(&str, &str)],
    workers: usize,
) -> (Bridge, Arc<dyn GraphResolver>, Arc<dyn Checkpointer>) {
    let graphs: BTreeMap<String, String> = graphs
        .iter()
        .map(|(id, spec)| ((*id).to_owned(), (*spec).to_owned()))
        .collect();
    let mut options = node_options(graphs, reference());
    options.workers = workers;
    let bridge = service_node::start(options)
        .await
        .expect("the bridge starts");
    let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let resolver = bridge.resolver(Arc::clone(&saver));
    (bridge, resolver, saver)
}

fn options(thread: &str, modes: &[StreamMode]) -> StreamOptions {
    StreamOptions {
        stream_mode: modes.to_vec(),
        config: RunnableConfig::for_thread(thread),
        ..StreamOptions::default()
    }
}

/// The store the engine gives runs, over an in-memory store.
fn long_term() -> Arc<dyn LongTermStore> {
    service_engine::long_term_store(
        service_store_memory::memory_store(service_store_memory::MemoryOptions::new(Arc::new(
            service_store::SystemClock,
        ))),
        &service_engine::EngineConfig::default(),
    )
}

fn context() -> RunContext {
    RunContext::new(CancellationToken::new()).with_store(long_term())
}

async fn run(
    graph: &dyn AgentGraph,
    input: RunInput,
    options: StreamOptions,
    ctx: RunContext,
) -> Result<Vec<Chunk>, GraphError> {
    let mut stream = graph.stream(input, options, ctx).await?;
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk?);
    }
    Ok(chunks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_values_and_keeps_its_state_in_the_servers_saver() {
    let (_bridge, graphs, saver) = bridge(&[("echo", "./graphs.ts:echo")], 1).await;
    let echo = graphs.load("echo").await.unwrap();
    let input = RunInput::Values(json!({"messages": [{"type": "human", "content": "hi"}]}));
    let chunks = run(
        echo.as_ref(),
        input,
        options("t1", &[StreamMode::Values, StreamMode::Updates]),
        context(),
    )
    .await
    .unwrap();
    let last_values = chunks.iter().rev().find(|c| c.mode() == "values").unwrap();
    assert_eq!(last_values.data()["messages"][1]["content"], "echo: hi");
    assert!(chunks.iter().any(|c| c.mode() == "updates"));
    // The checkpoints are the server's: the saver holds them, and the state reads back.
    let stored = saver
        .get_tuple(&service_graph::CheckpointConfig::new("t1", None))
        .await
        .unwrap()
        .expect("a checkpoint in the server's saver");
    assert_eq!(stored.metadata.get("step"), Some(&json!(1)));
    let state = echo
        .get_state(&RunnableConfig::for_thread("t1"), StateOptions::default())
        .await
        .unwrap();
    assert_eq!(state.values["messages"][1]["content"], "echo: hi");
    assert!(state.next.is_empty());
    assert_eq!(
        state.config.unwrap().checkpoint_id,
        stored.config.checkpoint_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_pauses_the_run_and_a_command_resumes_it() {
    let (_bridge, graphs, _saver) = bridge(&[("approval", "./graphs.ts:approval")], 1).await;
    let approval = graphs.load("approval").await.unwrap();
    let input = RunInput::Values(json!({"topic": "bridges"}));
    let chunks = run(
        approval.as_ref(),
        input,
        options("t2", &[StreamMode::Updates]),
        context(),
    )
    .await
    .unwrap();
    let interrupt = chunks
        .iter()
        .find_map(|c| c.data().get("__interrupt__").cloned())
        .expect("an __interrupt__ update");
    assert_eq!(interrupt[0]["value"]["question"], "approve?");
    let config = RunnableConfig::for_thread("t2");
    let paused = approval
        .get_state(&config, StateOptions::default())
        .await
        .unwrap();
    assert_eq!(paused.next, ["review"]);
    assert_eq!(paused.interrupts()[0].value["draft"], "draft for bridges");
    let resume = RunInput::Command(json!({"resume": true}));
    run(
        approval.as_ref(),
        resume,
        options("t2", &[StreamMode::Values]),
        context(),
    )
    .await
    .unwrap();
    let done = approval
        .get_state(&config, StateOptions::default())
        .await
        .unwrap();
    assert_eq!(done.values["status"], "approved");
    assert!(done.next.is_empty());
    let history = approval
        .get_state_history(&config, service_graph::HistoryOptions::default())
        .await
        .unwrap();
    assert!(history.len() >= 4, "{}", history.len());
    assert_eq!(history[0].values, done.values);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thrown_error_is_the_runs_error_with_name_message_stack_and_cause() {
    let (_bridge, graphs, _saver) = bridge(&[("fail", "./graphs.ts:fail")], 1).await;
    let fail = graphs.load("fail").await.unwrap();
    let error = run(
        fail.as_ref(),
        RunInput::Values(json!({})),
        options("t3", &[]),
        context(),
    )
    .await
    .unwrap_err()
    .to_run_error();
    assert_eq!(error.error, "ValueError");
    assert_eq!(error.message, "boom");
    assert!(
        error
            .stack
            .as_deref()
            .unwrap_or_default()
            .contains("graphs.ts")
    );
    let cause = error.cause.expect("the cause");
    assert_eq!(
        (cause.error.as_str(), cause.message.as_str()),
        ("RuntimeError", "root cause")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_frames_store_calls_and_state_updates_go_through_the_server() {
    let (_bridge, graphs, _saver) = bridge(
        &[
            ("steps", "./graphs.ts:steps"),
            ("memory", "./graphs.ts:memory"),
        ],
        1,
    )
    .await;
    let steps = graphs.load("steps").await.unwrap();
    let chunks = run(
        steps.as_ref(),
        RunInput::Values(json!({"n": 2})),
        options("t4", &[StreamMode::Custom]),
        context(),
    )
    .await
    .unwrap();
    let custom: Vec<Value> = chunks.iter().map(|c| c.data().into_owned()).collect();
    assert_eq!(custom, [json!({"step": 1}), json!({"step": 2})]);
    let config = RunnableConfig::for_thread("t4");
    steps
        .update_state(&config, json!({"count": 10}), Some("step".into()))
        .await
        .unwrap();
    let state = steps
        .get_state(&config, StateOptions::default())
        .await
        .unwrap();
    assert_eq!(state.values["count"], 10);
    let unknown = steps
        .update_state(&config, json!({}), Some("nope".into()))
        .await;
    assert!(
        matches!(unknown, Err(GraphError::InvalidInput(_))),
        "{unknown:?}"
    );

    let memory = graphs.load("memory").await.unwrap();
    let store = long_term();
    for key in ["a", "b"] {
        let ctx = RunContext::new(CancellationToken::new()).with_store(store.clone());
        let input = RunInput::Values(json!({"user": "u1", "key": key, "text": "hello"}));
        run(
            memory.as_ref(),
            input,
            options(&format!("m-{key}"), &[]),
            ctx,
        )
        .await
        .unwrap();
    }
    let namespace = ["memories".to_owned(), "u1".to_owned()];
    let item = store.get(&namespace, "b", None).await.unwrap().unwrap();
    assert_eq!(item.value.get("text"), Some(&json!("hello")));
    let state = memory
        .get_state(&RunnableConfig::for_thread("m-b"), StateOptions::default())
        .await
        .unwrap();
    assert_eq!(state.values["count"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_aborts_the_js_run() {
    let (_bridge, graphs, _saver) = bridge(&[("slow", "./graphs.ts:slow")], 1).await;
    let slow = graphs.load("slow").await.unwrap();
    let cancel = CancellationToken::new();
    let ctx = RunContext::new(cancel.clone());
    let mut stream = slow
        .stream(
            RunInput::Values(json!({"delay_ms": 60000})),
            options("t5", &[]),
            ctx,
        )
        .await
        .unwrap();
    let _first = stream.next().await;
    cancel.cancel();
    let mut ended = None;
    while let Some(item) = stream.next().await {
        if let Err(error) = item {
            ended = Some(error);
        }
    }
    assert!(matches!(ended, Some(GraphError::Cancelled)), "{ended:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_that_fails_to_load_is_a_load_failure_and_the_others_serve() {
    let (bridge, graphs, _saver) = bridge(
        &[
            ("echo", "./graphs.ts:echo"),
            ("broken", "./graphs.ts:no_such_graph"),
            ("missing", "./nowhere.ts:graph"),
        ],
        1,
    )
    .await;
    assert_eq!(bridge.failures().len(), 2);
    assert!(
        bridge.failures()["broken"]
            .message
            .contains("no export \"no_such_graph\""),
        "{:?}",
        bridge.failures()["broken"]
    );
    let Err(GraphError::LoadFailed { reason, .. }) = graphs.load("missing").await else {
        panic!("a load failure")
    };
    assert!(reason.contains("nowhere.ts"), "{reason}");
    assert!(graphs.load("echo").await.is_ok());
    assert_eq!(graphs.graph_ids(), ["broken", "echo", "missing"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_fails_that_run_and_a_new_worker_serves_the_next() {
    let (bridge, graphs, _saver) = bridge(
        &[("slow", "./graphs.ts:slow"), ("echo", "./graphs.ts:echo")],
        1,
    )
    .await;
    let slow = graphs.load("slow").await.unwrap();
    let mut stream = slow
        .stream(
            RunInput::Values(json!({"delay_ms": 60000})),
            options("t6", &[]),
            context(),
        )
        .await
        .unwrap();
    let _first = stream.next().await;
    let pid = bridge.worker_pids()[0];
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    let mut error = None;
    while let Some(item) = stream.next().await {
        if let Err(failure) = item {
            error = Some(failure.to_run_error());
        }
    }
    let error = error.expect("the run fails");
    assert_eq!(error.error, "WorkerExited");
    assert!(
        error.message.contains(&pid.to_string()),
        "{}",
        error.message
    );
    // A new worker takes its place.
    let echo = graphs.load("echo").await.unwrap();
    let mut attempts = 0;
    loop {
        let input = RunInput::Values(json!({"messages": [{"type": "human", "content": "again"}]}));
        match run(echo.as_ref(), input, options("t7", &[]), context()).await {
            Ok(chunks) => {
                assert_eq!(
                    chunks.last().unwrap().data()["messages"][1]["content"],
                    "echo: again"
                );
                break;
            }
            Err(error) if attempts < 100 => {
                assert_eq!(error.to_run_error().error, "WorkerUnavailable");
                attempts += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(error) => panic!("no new worker: {error}"),
        }
    }
    assert_ne!(bridge.worker_pids(), [pid]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_node_or_langgraph_is_a_boot_error_naming_what_to_do() {
    let graphs: BTreeMap<String, String> =
        [("echo".to_owned(), "./graphs.ts:echo".to_owned())].into();
    let mut options = node_options(graphs.clone(), reference());
    options.node = "/nonexistent/node".into();
    let error = service_node::start(options).await.unwrap_err().to_string();
    assert!(
        error.contains("/nonexistent/node") && error.contains("SERVICE_NODE"),
        "{error}"
    );

    // A project without node_modules.
    let bare = std::env::temp_dir().join(format!("node-bridge-bare-{}", std::process::id()));
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::copy(reference().join("graphs.ts"), bare.join("graphs.ts")).unwrap();
    let error = service_node::start(node_options(graphs.clone(), bare.clone()))
        .await
        .unwrap_err()
        .to_string();
    std::fs::remove_dir_all(&bare).unwrap();
    assert!(
        error.contains("@langchain/langgraph is not installed"),
        "{error}"
    );

    let mut options = node_options(graphs, reference());
    options.node_version = Some("99".into());
    let error = service_node::start(options).await.unwrap_err().to_string();
    assert!(error.contains("node_version 99"), "{error}");
}

/// An `Annotation.Root` state has no runtime schema: its schemas list the channels'
/// keys, typed where the reducer or default shows it, as the JS CLI lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotation_states_have_schemas_of_their_channels() {
    let (_bridge, graphs, _saver) = bridge(
        &[
            ("slow", "./graphs.ts:slow"),
            ("steps", "./graphs.ts:steps"),
            ("echo", "./graphs.ts:echo"),
        ],
        1,
    )
    .await;
    let slow = graphs.schemas("slow").await.unwrap();
    let state = slow.state_schema.expect("a state schema");
    assert_eq!(state["type"], "object");
    assert_eq!(
        state["properties"],
        json!({"delay_ms": {}, "done": {}}),
        "LastValue channels: any value"
    );
    assert_eq!(slow.input_schema.as_ref(), Some(&state));
    assert_eq!(slow.output_schema.as_ref(), Some(&state));

    let steps = graphs.schemas("steps").await.unwrap().state_schema.unwrap();
    let keys: Vec<&String> = steps["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["count", "log", "n"]);
    assert_eq!(
        steps["properties"]["log"]["type"], "array",
        "a list reducer's default"
    );

    let echo = graphs.schemas("echo").await.unwrap().input_schema.unwrap();
    assert_eq!(echo["properties"]["messages"]["type"], "array");
}

/// A JS graph's checkpoints carry the run's keys, as the Python bridge's do, so a
/// rollback finds (and deletes) them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_carry_the_runs_keys() {
    let (_bridge, graphs, saver) = bridge(&[("slow", "./graphs.ts:slow")], 1).await;
    let slow = graphs.load("slow").await.unwrap();
    let mut options = options("t-keys", &[StreamMode::Values]);
    options.metadata = json!({"run_id": "r-1", "assistant_id": "a-1"})
        .as_object()
        .unwrap()
        .clone();
    run(
        slow.as_ref(),
        RunInput::Values(json!({"delay_ms": 1})),
        options,
        context(),
    )
    .await
    .unwrap();
    let stored = saver
        .list(
            &service_graph::CheckpointConfig::new("t-keys", None),
            service_graph::CheckpointListOptions::default(),
        )
        .await
        .unwrap();
    assert!(stored.len() >= 2, "{stored:?}");
    for checkpoint in &stored {
        assert_eq!(checkpoint.metadata["run_id"], "r-1");
        assert_eq!(checkpoint.metadata["assistant_id"], "a-1");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_graphs_directory_is_a_boot_error_naming_the_directory() {
    let graphs: BTreeMap<String, String> =
        [("echo".to_owned(), "./graphs.ts:echo".to_owned())].into();
    let missing = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("no-such-directory");
    let error = service_node::start(node_options(graphs, missing.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!(
            "Node graphs: the graphs directory {} does not exist",
            missing.display()
        )
    );
}
