//! Command from nodes (update + goto) and as run input (update, goto).

mod common;

use common::*;
use serde_json::json;
use service_stategraph::{Command, CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::StreamMode;

/// START -> router, which jumps with a Command to `left` or `right`.
fn router() -> CompiledGraph {
    StateGraph::new("router")
        .channel("side", Reducer::LastValue, json!({}))
        .channel("seen", Reducer::Append, json!({}))
        .node("router", |state, _| async move {
            let target = state["side"].as_str().unwrap_or("left").to_owned();
            Ok::<_, NodeError>(Command::goto(target).with_update(json!({"seen": ["router"]})))
        })
        .node("left", |_, _| async {
            Ok::<_, NodeError>(json!({"seen": ["left"]}))
        })
        .node("right", |_, _| async {
            Ok::<_, NodeError>(json!({"seen": ["right"]}))
        })
        .edge(START, "router")
        .edge("left", END)
        .edge("right", END)
        .compile(saver())
        .unwrap()
}

#[tokio::test]
async fn a_node_command_updates_state_and_goes_to_its_target() {
    let graph = router();
    let outcome = run(&graph, "t", values(json!({"side": "right"}))).await;
    assert!(outcome.error.is_none());
    assert_eq!(
        state(&graph, "t").await.values["seen"],
        json!(["router", "right"])
    );
    assert_eq!(
        outcome.of("updates")[0],
        json!({"router": {"seen": ["router"]}})
    );
}

#[tokio::test]
async fn a_command_goto_to_an_unknown_node_fails_the_node() {
    let graph = router();
    let outcome = run(&graph, "t", values(json!({"side": "nowhere"}))).await;
    match outcome.error {
        Some(service_graph::GraphError::NodeFailed { node, error }) => {
            assert_eq!(node, "router");
            assert_eq!(error.message, "Node nowhere does not exist");
        }
        other => panic!("expected a node failure, got {other:?}"),
    }
}

#[tokio::test]
async fn an_input_command_goto_starts_at_that_node() {
    let graph = router();
    run(
        &graph,
        "t",
        command(json!({"goto": "left", "update": {"side": "x"}})),
    )
    .await;
    assert_eq!(
        state(&graph, "t").await.values,
        json!({"side": "x", "seen": ["left"]})
    );
}

#[tokio::test]
async fn an_input_command_update_applies_before_continuing_a_pause() {
    let graph = router();
    let mut paused = options("t", &[StreamMode::Values]);
    paused.interrupt_before = before(&["router"]);
    run_with(&graph, values(json!({"side": "left"})), paused).await;
    assert_eq!(state(&graph, "t").await.next, vec!["router"]);
    run(&graph, "t", command(json!({"update": [["side", "right"]]}))).await;
    assert_eq!(
        state(&graph, "t").await.values["seen"],
        json!(["router", "right"])
    );
}
