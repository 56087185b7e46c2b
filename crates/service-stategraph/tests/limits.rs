//! Recursion limit, cancellation, node failures with their cause chain.

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use serde_json::json;
use service_graph::{AgentGraph, GraphError, RunContext, RunnableConfig};
use service_stategraph::{CompiledGraph, NodeError, Reducer, START, StateGraph};
use service_types::{RunError, StreamMode};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn the_recursion_limit_stops_an_endless_loop() {
    let graph = StateGraph::new("loop")
        .channel("n", Reducer::LastValue, json!({}))
        .node("spin", |state, _| async move {
            Ok::<_, NodeError>(json!({"n": state["n"].as_i64().unwrap_or(0) + 1}))
        })
        .edge(START, "spin")
        .edge("spin", "spin")
        .compile(saver())
        .unwrap();
    let mut limited = options("t", &[]);
    limited.config.recursion_limit = Some(4);
    let outcome = run_with(&graph, values(json!({})), limited).await;
    assert!(
        matches!(outcome.error, Some(GraphError::RecursionLimit { limit: 4 })),
        "{:?}",
        outcome.error
    );
    assert_eq!(state(&graph, "t").await.values, json!({"n": 4}));
}

fn sleeper() -> CompiledGraph {
    StateGraph::new("sleeper")
        .channel("done", Reducer::LastValue, json!({}))
        .node("sleep", |_, _| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, NodeError>(json!({"done": true}))
        })
        .edge(START, "sleep")
        .compile(saver())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_a_running_node() {
    let graph = sleeper();
    let cancel = CancellationToken::new();
    let mut stream = graph
        .stream(
            values(json!({})),
            options("t", &[StreamMode::Tasks]),
            RunContext::new(cancel.clone()),
        )
        .await
        .unwrap();
    // The task-start frame is sent right before the node starts sleeping.
    let started = stream.next().await.unwrap().unwrap();
    assert_eq!(started.data()["name"], "sleep");
    cancel.cancel();
    let rest: Vec<_> = stream.collect().await;
    assert!(matches!(rest.last(), Some(Err(GraphError::Cancelled))));
    tokio::time::advance(Duration::from_secs(120)).await;
    assert_eq!(state(&graph, "t").await.values, json!({}));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_stream_stops_the_run() {
    let graph = sleeper();
    let mut stream = graph
        .stream(
            values(json!({})),
            options("t", &[StreamMode::Tasks]),
            RunContext::default(),
        )
        .await
        .unwrap();
    stream.next().await.unwrap().unwrap();
    drop(stream);
    tokio::time::advance(Duration::from_secs(120)).await;
    tokio::task::yield_now().await;
    assert_eq!(state(&graph, "t").await.values, json!({}));
}

fn exploder() -> CompiledGraph {
    StateGraph::new("exploder")
        .channel("x", Reducer::LastValue, json!({}))
        .node("explode", |_, _| async {
            let cause = RunError::new("RuntimeError", "root cause");
            Err::<serde_json::Value, NodeError>(
                RunError::new("ValueError", "boom").with_cause(cause).into(),
            )
        })
        .edge(START, "explode")
        .compile(saver())
        .unwrap()
}

#[tokio::test]
async fn a_node_failure_keeps_its_cause_chain_and_marks_the_task() {
    let graph = exploder();
    let outcome = run(&graph, "t", values(json!({"x": 1}))).await;
    let Some(GraphError::NodeFailed { node, error }) = outcome.error else {
        panic!("expected a node failure");
    };
    assert_eq!(node, "explode");
    assert_eq!(
        error.chain_summary(),
        "ValueError: boom; caused by RuntimeError: root cause"
    );
    let snapshot = state(&graph, "t").await;
    assert_eq!(snapshot.next, vec!["explode"]);
    let task_error: RunError =
        serde_json::from_str(snapshot.tasks[0].error.as_deref().unwrap()).unwrap();
    // The stack of where it failed travels with the run's error, never in the
    // checkpoint, which clients read whatever the stack setting.
    assert!(error.stack.is_some());
    assert_eq!(task_error, error.without_stacks());
}

#[tokio::test]
async fn a_failure_is_reported_in_the_tasks_stream() {
    let graph = exploder();
    let outcome = run_with(
        &graph,
        values(json!({})),
        options("t", &[StreamMode::Tasks]),
    )
    .await;
    let end = outcome.of("tasks").pop().unwrap();
    assert_eq!(
        end["error"],
        json!({"error": "ValueError", "message": "boom"})
    );
}

#[tokio::test]
async fn a_panicking_node_fails_the_run_instead_of_hanging_it() {
    let graph = StateGraph::new("panics")
        .channel("x", Reducer::LastValue, json!({}))
        .node("bad", |_, _| async {
            if true {
                panic!("kaput");
            }
            Ok::<_, NodeError>(json!({}))
        })
        .edge(START, "bad")
        .compile(saver())
        .unwrap();
    let outcome = run(&graph, "t", values(json!({}))).await;
    let Some(GraphError::NodeFailed { error, .. }) = outcome.error else {
        panic!("expected a node failure");
    };
    assert_eq!(error.message, "kaput");
}

#[tokio::test]
async fn deep_and_cyclic_error_sources_are_capped() {
    #[derive(Debug)]
    struct Loop;
    impl std::fmt::Display for Loop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("again")
        }
    }
    impl std::error::Error for Loop {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self)
        }
    }
    let mut deep = RunError::new("E0", "0");
    for i in 1..20 {
        deep = RunError::new(format!("E{i}"), i.to_string()).with_cause(deep);
    }
    let graph = StateGraph::new("errors")
        .channel("kind", Reducer::LastValue, json!({}))
        .node("fail", move |state, _| {
            let deep = deep.clone();
            async move {
                if state["kind"] == "loop" {
                    Err::<serde_json::Value, NodeError>(Loop.into())
                } else {
                    Err(deep.into())
                }
            }
        })
        .edge(START, "fail")
        .compile(saver())
        .unwrap();
    let failure = |outcome: Outcome| match outcome.error {
        Some(GraphError::NodeFailed { error, .. }) => *error,
        other => panic!("expected a node failure, got {other:?}"),
    };
    let deep = failure(run(&graph, "a", values(json!({"kind": "deep"}))).await);
    assert_eq!(deep.chain().count(), 1 + RunError::MAX_CAUSE_DEPTH);
    let cyclic = failure(run(&graph, "b", values(json!({"kind": "loop"}))).await);
    assert_eq!(cyclic.error, "Loop");
    assert_eq!(cyclic.chain().count(), 1);
}

#[tokio::test]
async fn a_run_without_a_thread_keeps_its_checkpoints_private() {
    let graph = exploder();
    let mut options = options("ignored", &[StreamMode::Values]);
    options.config = RunnableConfig::default();
    let outcome = run_with(&graph, values(json!({"x": 2})), options).await;
    assert_eq!(outcome.of("values"), vec![json!({"x": 2})]);
}
