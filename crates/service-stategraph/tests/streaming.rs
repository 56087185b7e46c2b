//! Stream modes: only requested modes are emitted; custom, tasks, checkpoints,
//! debug and events payload shapes; graph drawing and schemas.

mod common;

use common::*;
use serde_json::json;
use service_graph::{AgentGraph, RunContext, RunInput, StreamOptions};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::StreamMode;

/// START -> count (writes custom) -> END or back to count, up to `n`.
fn counter() -> CompiledGraph {
    StateGraph::new("counter")
        .channel("count", Reducer::LastValue, json!({"type": "integer"}))
        .channel("n", Reducer::LastValue, json!({"type": "integer"}))
        .input_keys(&["n"])
        .node("count", |state, ctx| async move {
            let k = state["count"].as_i64().unwrap_or(0) + 1;
            ctx.writer().write(json!({"k": k}));
            Ok::<_, NodeError>(json!({"count": k}))
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
        .compile(saver())
        .unwrap()
}

#[tokio::test]
async fn only_requested_modes_are_emitted() {
    let outcome = run_with(
        &counter(),
        values(json!({"n": 2})),
        options("t", &[StreamMode::Custom]),
    )
    .await;
    assert!(outcome.frames.iter().all(|(name, _)| name == "custom"));
    assert_eq!(outcome.of("custom"), vec![json!({"k": 1}), json!({"k": 2})]);
}

#[tokio::test]
async fn a_named_custom_write_is_a_custom_chunk_of_its_own_channel() {
    let graph = StateGraph::new("named")
        .channel("done", Reducer::LastValue, json!({"type": "boolean"}))
        .node("work", |_state, ctx| async move {
            ctx.write(json!({"plain": true}));
            ctx.write_named("progress", json!({"pct": 100}));
            Ok::<_, NodeError>(json!({"done": true}))
        })
        .edge(START, "work")
        .edge("work", END)
        .compile(saver())
        .unwrap();
    let custom = run_with(
        &graph,
        values(json!({})),
        options("t", &[StreamMode::Custom]),
    )
    .await;
    assert_eq!(custom.of("custom"), vec![json!({"plain": true})]);
    assert_eq!(custom.of("custom:progress"), vec![json!({"pct": 100})]);
    let values_only = run_with(
        &graph,
        values(json!({})),
        options("t", &[StreamMode::Values]),
    )
    .await;
    assert!(
        values_only.of("custom:progress").is_empty(),
        "custom was not asked for"
    );
}

#[tokio::test]
async fn values_is_the_default_mode() {
    let outcome = run_with(&counter(), values(json!({"n": 1})), options("t", &[])).await;
    assert!(outcome.frames.iter().all(|(name, _)| name == "values"));
    assert_eq!(outcome.last_values(), json!({"n": 1, "count": 1}));
}

#[tokio::test]
async fn tasks_frames_start_and_end_each_node_run() {
    let outcome = run_with(
        &counter(),
        values(json!({"n": 1})),
        options("t", &[StreamMode::Tasks]),
    )
    .await;
    let tasks = outcome.of("tasks");
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["name"], "count");
    assert_eq!(tasks[0]["triggers"], json!(["branch:to:count"]));
    assert_eq!(tasks[1]["id"], tasks[0]["id"]);
    assert_eq!(tasks[1]["result"], json!({"count": 1}));
    assert_eq!(tasks[1]["error"], json!(null));
}

#[tokio::test]
async fn checkpoints_and_debug_frames_follow_every_checkpoint() {
    let modes = [StreamMode::Checkpoints, StreamMode::Debug];
    let outcome = run_with(&counter(), values(json!({"n": 1})), options("t", &modes)).await;
    let checkpoints = outcome.of("checkpoints");
    assert_eq!(checkpoints.len(), 3);
    assert_eq!(checkpoints[2]["values"], json!({"n": 1, "count": 1}));
    assert_eq!(checkpoints[2]["parent_config"], checkpoints[1]["config"]);
    assert_eq!(checkpoints[2]["config"]["configurable"]["thread_id"], "t");
    let kinds: Vec<_> = outcome
        .of("debug")
        .iter()
        .map(|d| d["type"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![
            json!("checkpoint"),
            json!("checkpoint"),
            json!("task"),
            json!("task_result"),
            json!("checkpoint")
        ]
    );
    assert!(outcome.of("debug")[0]["payload"]["checkpoint"]["checkpoint_id"].is_string());
}

#[tokio::test]
async fn stream_events_adds_chain_events() {
    let graph = counter();
    let stream = graph
        .stream_events(
            values(json!({"n": 1})),
            options("t", &[]),
            RunContext::default(),
        )
        .await
        .unwrap();
    let frames: Vec<_> = futures::StreamExt::collect::<Vec<_>>(stream).await;
    let events: Vec<_> = frames
        .into_iter()
        .filter_map(Result::ok)
        .filter(|chunk| chunk.mode() == "events")
        .map(|chunk| (chunk.data()["event"].clone(), chunk.data()["name"].clone()))
        .collect();
    assert_eq!(
        events.first(),
        Some(&(json!("on_chain_start"), json!("counter")))
    );
    assert_eq!(
        events.last(),
        Some(&(json!("on_chain_end"), json!("counter")))
    );
    assert!(events.contains(&(json!("on_chain_end"), json!("count"))));
}

#[tokio::test]
async fn invoke_returns_the_final_values() {
    let output = counter()
        .invoke(
            values(json!({"n": 3})),
            options("t", &[]),
            RunContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(output, json!({"n": 3, "count": 3}));
    let stateless = counter()
        .invoke(
            values(json!({"n": 1})),
            StreamOptions::default(),
            RunContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(stateless, json!({"n": 1, "count": 1}));
    let nothing = counter()
        .invoke(
            RunInput::None,
            StreamOptions::default(),
            RunContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(nothing, json!({}));
}

#[tokio::test]
async fn graph_drawing_lists_nodes_and_edges_with_a_bare_end_node() {
    let drawing = counter().get_graph(0).await.unwrap();
    let ids: Vec<_> = drawing["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].clone())
        .collect();
    assert_eq!(
        ids,
        vec![json!("__start__"), json!("count"), json!("__end__")]
    );
    assert_eq!(drawing["nodes"][2], json!({"id": "__end__"}));
    assert!(
        drawing["edges"]
            .as_array()
            .unwrap()
            .contains(&json!({"source": "count", "target": "__end__", "conditional": true}))
    );
    assert_eq!(counter().get_subgraphs(None, false).await.unwrap(), vec![]);
}

#[tokio::test]
async fn schemas_come_from_the_channels() {
    let schema = counter().schema();
    assert_eq!(
        schema.state_schema.unwrap()["properties"]["count"],
        json!({"type": "integer"})
    );
    assert_eq!(
        schema.input_schema.unwrap()["properties"],
        json!({"n": {"type": "integer"}})
    );
}

#[test]
fn a_graph_without_an_entry_or_with_unknown_nodes_does_not_compile() {
    let no_entry = StateGraph::new("g")
        .node("a", |_, _| async { Ok::<_, NodeError>(json!({})) })
        .compile(saver());
    assert!(no_entry.is_err());
    let unknown = StateGraph::new("g").edge(START, "ghost").compile(saver());
    assert!(unknown.is_err());
}

/// A run whose nodes never wait still gives other tasks turns: on a one-thread
/// runtime, its consumer reads frames while the run is still going, instead of only
/// after the last superstep, and a task spawned beside the consumer runs while the
/// run is still going too (the consumer's task drives the run and must return to the
/// scheduler between turns).
#[tokio::test(flavor = "current_thread")]
async fn a_run_of_nodes_that_never_wait_gives_other_tasks_turns() {
    let graph = counter();
    let mut options = options("t", &[StreamMode::Custom]);
    let steps: u32 = 2_000;
    options.config.recursion_limit = Some(steps + 1);
    let mut stream = graph
        .stream(
            RunInput::Values(json!({"n": steps})),
            options,
            RunContext::default(),
        )
        .await
        .expect("stream starts");
    let first = futures::StreamExt::next(&mut stream)
        .await
        .expect("a frame")
        .expect("no error");
    assert_eq!(*first.data(), json!({"k": 1}));
    assert!(
        state_count(&graph).await < i64::from(steps),
        "the run had finished before its first frame was read"
    );
    let other = graph.clone();
    let other_task_saw_the_run_going =
        tokio::spawn(async move { state_count(&other).await < i64::from(steps) });
    while futures::StreamExt::next(&mut stream).await.is_some() {}
    assert!(
        other_task_saw_the_run_going.await.unwrap(),
        "the other task only ran after the run had finished"
    );
    assert_eq!(state_count(&graph).await, i64::from(steps));
}

async fn state_count(graph: &CompiledGraph) -> i64 {
    state(graph, "t").await.values["count"]
        .as_i64()
        .unwrap_or_default()
}
