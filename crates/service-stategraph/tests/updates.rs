//! update_state through the reducers, as_node, bulk supersteps, forks.

mod common;

use common::*;
use serde_json::json;
use service_graph::{AgentGraph, GraphError, RunInput, RunnableConfig, StateUpdate};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};

/// START -> a -> b -> END appending to `log`, plus a last-value `note`.
fn pair() -> CompiledGraph {
    StateGraph::new("pair")
        .channel("log", Reducer::Append, json!({}))
        .channel("note", Reducer::LastValue, json!({}))
        .node("a", |_, _| async {
            Ok::<_, NodeError>(json!({"log": ["a"]}))
        })
        .node("b", |_, _| async {
            Ok::<_, NodeError>(json!({"log": ["b"]}))
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .compile(saver())
        .unwrap()
}

fn thread() -> RunnableConfig {
    RunnableConfig::for_thread("t")
}

#[tokio::test]
async fn update_state_goes_through_the_reducers() {
    let graph = pair();
    run(&graph, "t", values(json!({"log": ["in"], "note": "x"}))).await;
    graph
        .update_state(
            &thread(),
            json!({"log": ["edit"], "note": "y"}),
            Some("b".into()),
        )
        .await
        .unwrap();
    let snapshot = state(&graph, "t").await;
    assert_eq!(
        snapshot.values,
        json!({"log": ["in", "a", "b", "edit"], "note": "y"})
    );
    assert_eq!(snapshot.metadata.unwrap()["source"], "update");
}

#[tokio::test]
async fn update_state_as_node_schedules_that_nodes_successors() {
    let graph = pair();
    let config = graph
        .update_state(&thread(), json!({"log": ["x"]}), Some("a".into()))
        .await
        .unwrap();
    assert!(config.checkpoint_id.is_some());
    assert_eq!(state(&graph, "t").await.next, vec!["b"]);
    run(&graph, "t", RunInput::None).await;
    assert_eq!(state(&graph, "t").await.values["log"], json!(["x", "b"]));
}

#[tokio::test]
async fn update_state_with_an_unknown_node_is_invalid_input() {
    let graph = pair();
    let error = graph
        .update_state(&thread(), json!({}), Some("zzz".into()))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GraphError::InvalidInput(message) if message == "Node zzz does not exist"),
        "{error:?}"
    );
}

#[tokio::test]
async fn update_state_refuses_undeclared_keys() {
    let graph = pair();
    let error = graph
        .update_state(&thread(), json!({"nope": 1}), Some("a".into()))
        .await
        .unwrap_err();
    assert!(matches!(error, GraphError::InvalidInput(_)));
}

#[tokio::test]
async fn update_state_without_as_node_is_ambiguous_when_several_nodes_could_have_written() {
    let graph = pair();
    graph
        .update_state(&thread(), json!({"note": "fresh"}), None)
        .await
        .unwrap();
    graph
        .update_state(
            &thread(),
            json!({"note": "again"}),
            Some("__start__".into()),
        )
        .await
        .unwrap();
    let error = graph
        .update_state(&thread(), json!({"note": "?"}), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GraphError::InvalidInput(message) if message == "Ambiguous update, specify as_node"),
        "{error:?}"
    );
}

#[tokio::test]
async fn bulk_update_state_writes_one_checkpoint_per_superstep() {
    let graph = pair();
    let update = |values, as_node: &str| StateUpdate {
        values: Some(values),
        command: None,
        as_node: Some(as_node.into()),
    };
    graph
        .bulk_update_state(
            &thread(),
            vec![
                vec![update(json!({"log": ["in"]}), "__input__")],
                vec![update(json!({"log": ["s"]}), "__start__")],
                vec![
                    update(json!({"log": ["a"]}), "a"),
                    update(json!({"note": "n"}), "b"),
                ],
            ],
        )
        .await
        .unwrap();
    let history = history(&graph, "t").await;
    assert_eq!(history.len(), 3);
    assert_eq!(history[2].next, vec!["__start__"]);
    assert_eq!(history[1].next, vec!["a"]);
    assert_eq!(history[0].values, json!({"log": ["s", "a"], "note": "n"}));
    assert_eq!(history[0].next, vec!["b"]);
}

#[tokio::test]
async fn bulk_update_state_refuses_empty_supersteps() {
    let graph = pair();
    let error = graph
        .bulk_update_state(&thread(), vec![vec![]])
        .await
        .unwrap_err();
    assert!(matches!(error, GraphError::InvalidInput(_)));
}

#[tokio::test]
async fn a_run_from_an_old_checkpoint_forks_the_history() {
    let graph = pair();
    run(&graph, "t", values(json!({"log": ["in"]}))).await;
    let original = history(&graph, "t").await;
    let after_a = &original[1];
    assert_eq!(after_a.next, vec!["b"]);

    let mut fork = options("t", &[]);
    fork.config = RunnableConfig::for_thread("t").with_checkpoint_id(checkpoint_id(after_a));
    run_with(&graph, RunInput::None, fork).await;
    let forked = state(&graph, "t").await;
    assert_eq!(forked.values, original[0].values);
    assert_ne!(forked.config, original[0].config);
    // As in LangGraph, the branch starts with a fork checkpoint: a copy of the
    // addressed one, its child.
    let history = history(&graph, "t").await;
    assert_eq!(history.len(), original.len() + 2);
    let fork_point = &history[1];
    assert_eq!(forked.parent_config, fork_point.config);
    assert_eq!(fork_point.parent_config, after_a.config);
    assert_eq!(fork_point.metadata.as_ref().unwrap()["source"], "fork");
    assert_eq!(fork_point.values, after_a.values);
    assert_eq!(fork_point.next, after_a.next);
}

#[tokio::test]
async fn update_state_on_an_old_checkpoint_branches_from_it() {
    let graph = pair();
    run(&graph, "t", values(json!({"log": ["in"]}))).await;
    let first = history(&graph, "t").await.pop().unwrap();
    let config = RunnableConfig::for_thread("t").with_checkpoint_id(checkpoint_id(&first));
    let written = graph
        .update_state(&config, json!({"note": "branch"}), Some("__start__".into()))
        .await
        .unwrap();
    let branch = graph
        .get_state(&written.clone().into(), Default::default())
        .await
        .unwrap();
    assert_eq!(branch.parent_config, first.config);
    // The first checkpoint held the new thread's state: its list channel empty.
    assert_eq!(branch.values, json!({"log": [], "note": "branch"}));
}

#[tokio::test]
async fn an_unknown_checkpoint_is_not_found() {
    let graph = pair();
    let config = RunnableConfig::for_thread("t").with_checkpoint_id("missing");
    let error = graph
        .get_state(&config, Default::default())
        .await
        .unwrap_err();
    assert!(matches!(error, GraphError::NotFound(_)));
    let mut options = options("t", &[]);
    options.config = config;
    let outcome = run_with(&graph, RunInput::None, options).await;
    assert!(matches!(outcome.error, Some(GraphError::NotFound(_))));
}
