//! When a run's checkpoints are written (the run option `durability`): behind the run
//! by default (`async`), several queued supersteps in one saver call, all stored before
//! the run ends; before each next superstep with `sync`; a write that fails fails the
//! run.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use futures::StreamExt;
use serde_json::json;
use service_graph::checkpoint::{HookedSaver, SaverHooks};
use service_graph::{AgentGraph, Checkpointer, GraphError, RunContext};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::{Durability, StreamMode};
use tokio::sync::Semaphore;

/// Records how many steps each `put_steps` call carried; a call waits for a permit of
/// `gate` (none until the test adds them) or fails with `fail`.
struct StepCalls {
    calls: Mutex<Vec<usize>>,
    gate: Semaphore,
    fail: Option<&'static str>,
}

#[async_trait]
impl SaverHooks for StepCalls {
    async fn putting_steps(&self, steps: usize) -> Result<(), GraphError> {
        let _permit = self.gate.acquire().await.unwrap();
        self.calls.lock().unwrap().push(steps);
        match self.fail {
            Some(message) => Err(GraphError::checkpointer(message)),
            None => Ok(()),
        }
    }
}

/// The in-memory saver behind [`StepCalls`].
type Recording = HookedSaver<StepCalls>;

fn recording(permits: usize, fail: Option<&'static str>) -> Arc<Recording> {
    Arc::new(HookedSaver::new(StepCalls {
        calls: Mutex::new(Vec::new()),
        gate: Semaphore::new(permits),
        fail,
    }))
}

/// A saver whose calls are never held and never fail.
fn open_recording() -> Arc<Recording> {
    recording(Semaphore::MAX_PERMITS, None)
}

/// The steps of each `put_steps` call so far.
fn calls(saver: &Recording) -> Vec<usize> {
    saver.hooks.calls.lock().unwrap().clone()
}

/// START -> count -> count ... until `count` reaches the input's `n`.
fn counter(saver: Arc<Recording>) -> CompiledGraph {
    StateGraph::new("counter")
        .channel("count", Reducer::LastValue, json!({"type": "integer"}))
        .channel("n", Reducer::LastValue, json!({"type": "integer"}))
        .node("count", |state, _ctx| async move {
            Ok::<_, NodeError>(json!({"count": state["count"].as_i64().unwrap_or(0) + 1}))
        })
        .edge(START, "count")
        .conditional_edges(
            "count",
            |state| {
                if state["count"].as_i64() < state["n"].as_i64() {
                    "count"
                } else {
                    END
                }
            },
            &["count", END],
        )
        .compile(saver)
        .unwrap()
}

fn with_durability(durability: Durability) -> service_graph::StreamOptions {
    service_graph::StreamOptions {
        durability,
        ..options("t", &[StreamMode::Values])
    }
}

/// A counter run to `n` with `durability` on a fresh recording saver, which must
/// succeed: the saver and the graph, to look at what was stored.
async fn counted(n: i64, durability: Durability) -> (Arc<Recording>, CompiledGraph) {
    let saver = open_recording();
    let graph = counter(Arc::clone(&saver));
    let outcome = run_with(&graph, values(json!({"n": n})), with_durability(durability)).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    (saver, graph)
}

/// The thread's checkpoints after the run: 1 input + 1 `__start__` + one per count, each
/// the parent of the next.
async fn assert_every_step_stored(graph: &CompiledGraph, n: usize) {
    let history = history(graph, "t").await;
    assert_eq!(history.len(), n + 2);
    for pair in history.windows(2) {
        assert_eq!(pair[0].parent_config, pair[1].config);
    }
    assert_eq!(history[0].values, json!({"count": n, "n": n}));
}

#[tokio::test]
async fn by_default_supersteps_run_ahead_of_their_checkpoints_which_all_land_before_the_end() {
    let saver = recording(0, None);
    let graph = counter(Arc::clone(&saver));
    let mut stream = graph
        .stream(
            values(json!({"n": 10})),
            options("t", &[StreamMode::Values]),
            RunContext::default(),
        )
        .await
        .unwrap();
    // Every superstep runs while no checkpoint of the loop can be stored: a run that
    // waited for its checkpoints would stop at the first (the guard turns that into a
    // failure instead of a hang).
    let last = json!({"count": 10, "n": 10});
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(frame) = stream.next().await {
            if frame.unwrap().data().into_owned() == last {
                break;
            }
        }
    })
    .await
    .expect("every superstep ran while its checkpoints waited");
    assert!(calls(&saver).len() <= 1, "{:?}", calls(&saver));
    saver.hooks.gate.add_permits(Semaphore::MAX_PERMITS);
    while let Some(frame) = stream.next().await {
        frame.unwrap();
    }
    let calls = calls(&saver);
    assert_eq!(calls.iter().sum::<usize>(), 12, "{calls:?}");
    assert!(calls.len() <= 2, "queued steps go together: {calls:?}");
    assert_every_step_stored(&graph, 10).await;
}

#[tokio::test]
async fn sync_durability_stores_each_checkpoint_before_the_next_superstep() {
    let (saver, graph) = counted(5, Durability::Sync).await;
    // The input checkpoint and `__start__`'s together, then one per count.
    assert_eq!(calls(&saver), vec![2, 1, 1, 1, 1, 1]);
    assert_every_step_stored(&graph, 5).await;
}

#[tokio::test]
async fn exit_durability_keeps_every_checkpoint() {
    let (_, graph) = counted(5, Durability::Exit).await;
    assert_every_step_stored(&graph, 5).await;
}

#[tokio::test]
async fn a_checkpoint_that_cannot_be_stored_fails_the_run() {
    let saver = recording(Semaphore::MAX_PERMITS, Some("disk full"));
    let graph = counter(Arc::clone(&saver));
    let outcome = run(&graph, "t", values(json!({"n": 5}))).await;
    match outcome.error {
        Some(GraphError::Checkpointer { message, .. }) => assert_eq!(message, "disk full"),
        other => panic!("the run fails with the saver's error, not {other:?}"),
    }
    assert!(history(&graph, "t").await.is_empty());
}

#[tokio::test]
async fn a_short_run_is_stored_in_one_write() {
    let (saver, graph) = counted(1, Durability::Async).await;
    // The input checkpoint waited for the first superstep's.
    assert_eq!(calls(&saver), vec![3]);
    assert_every_step_stored(&graph, 1).await;
}

#[tokio::test(start_paused = true)]
async fn the_input_is_stored_without_waiting_for_a_slow_first_node() {
    let saver = open_recording();
    let graph = StateGraph::new("slow")
        .channel("n", Reducer::LastValue, json!({"type": "integer"}))
        .node("slow", |_state, _ctx| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, NodeError>(json!({"n": 2}))
        })
        .edge(START, "slow")
        .edge("slow", END)
        .compile(Arc::clone(&saver) as Arc<dyn Checkpointer>)
        .unwrap();
    let running = tokio::spawn({
        let graph = graph.clone();
        async move { run(&graph, "t", values(json!({"n": 1}))).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(calls(&saver), vec![2], "the input, while the node runs");
    assert_eq!(history(&graph, "t").await.len(), 2);
    let outcome = running.await.unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(calls(&saver), vec![2, 1]);
}
