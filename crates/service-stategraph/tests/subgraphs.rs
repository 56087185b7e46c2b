//! A compiled graph used as a node: checkpoints under its own namespace, namespaced
//! streaming, nested state, interrupts resumed from the parent, listing and drawing.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use service_graph::{
    AgentGraph, Checkpointer, RunnableConfig, StateOptions, StateSnapshot, StreamOptions,
};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::StreamMode;

/// `team`: research the topic, then (when `ask`) interrupt for approval.
fn team(saver: &Arc<dyn Checkpointer>, ask: bool) -> CompiledGraph {
    StateGraph::new("team")
        .channel("topic", Reducer::LastValue, json!({"type": "string"}))
        .channel("notes", Reducer::Append, json!({"type": "array"}))
        .channel("approved", Reducer::LastValue, json!({"type": "boolean"}))
        .node("research", |state, _| async move {
            let topic = state["topic"].as_str().unwrap_or_default().to_owned();
            Ok::<_, NodeError>(json!({"notes": [format!("research {topic}")]}))
        })
        .node("approve", move |_, ctx| async move {
            let approved = if ask {
                ctx.interrupt(json!({"question": "approve?"}))?
            } else {
                json!(true)
            };
            Ok::<_, NodeError>(json!({"approved": approved, "notes": ["approved"]}))
        })
        .edge(START, "research")
        .edge("research", "approve")
        .edge("approve", END)
        .compile(Arc::clone(saver))
        .unwrap()
}

/// `report`: plan -> team (the subgraph) -> finish.
fn report(saver: &Arc<dyn Checkpointer>, ask: bool) -> CompiledGraph {
    StateGraph::new("report")
        .channel("topic", Reducer::LastValue, json!({"type": "string"}))
        .channel("notes", Reducer::Append, json!({"type": "array"}))
        .channel("approved", Reducer::LastValue, json!({"type": "boolean"}))
        .channel("summary", Reducer::LastValue, json!({"type": "string"}))
        .node("plan", |_, _| async {
            Ok::<_, NodeError>(json!({"notes": ["plan"]}))
        })
        .subgraph("team", &team(saver, ask))
        .node("finish", |state, _| async move {
            let notes: Vec<&str> = state["notes"]
                .as_array()
                .map(|notes| notes.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Ok::<_, NodeError>(json!({"summary": notes.join(", ")}))
        })
        .edge(START, "plan")
        .edge("plan", "team")
        .edge("team", "finish")
        .edge("finish", END)
        .compile(Arc::clone(saver))
        .unwrap()
}

/// The checkpoint of `thread`'s history where `team` was next, and that task's id.
async fn team_task(graph: &CompiledGraph, thread: &str) -> (StateSnapshot, String) {
    let snapshot = history(graph, thread)
        .await
        .into_iter()
        .find(|snapshot| snapshot.next == ["team"])
        .expect("a checkpoint before team ran");
    let id = snapshot.tasks[0].id.clone();
    (snapshot, id)
}

#[tokio::test]
async fn a_subgraph_runs_as_one_node_on_checkpoints_of_its_own_namespace() {
    let saver = saver();
    let graph = report(&saver, false);
    let outcome = run(&graph, "t", values(json!({"topic": "rust"}))).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let notes = json!(["plan", "research rust", "approved"]);
    assert_eq!(
        outcome.last_values(),
        json!({"topic": "rust", "notes": notes, "approved": true,
               "summary": "plan, research rust, approved"}),
        "the child's additions are appended once"
    );
    assert!(
        outcome
            .of("updates")
            .contains(&json!({"team": {"notes": ["research rust", "approved"], "approved": true}})),
        "the parent reports the subgraph as one node: {:?}",
        outcome.of("updates")
    );
    let (before_team, task_id) = team_task(&graph, "t").await;
    let child = before_team.tasks[0]
        .checkpoint
        .clone()
        .expect("the subgraph task names its checkpoints");
    assert_eq!(child.checkpoint_ns, format!("team:{task_id}"));
    let child_state = graph
        .get_state(&RunnableConfig::from(child), StateOptions::default())
        .await
        .unwrap();
    assert_eq!(child_state.values["notes"], notes.clone());
    assert_eq!(
        child_state.config.unwrap().checkpoint_ns,
        format!("team:{task_id}")
    );
    let root = history(&graph, "t").await;
    assert!(
        root.iter()
            .all(|s| s.config.as_ref().unwrap().checkpoint_ns.is_empty()),
        "the thread's history holds only its own checkpoints"
    );
}

#[tokio::test]
async fn stream_subgraphs_sends_the_childs_frames_named_mode_bar_namespace() {
    let saver = saver();
    let graph = report(&saver, false);
    let modes = [StreamMode::Updates, StreamMode::Values];
    let plain = run_with(&graph, values(json!({"topic": "a"})), options("t1", &modes)).await;
    assert!(plain.frames.iter().all(|(name, _)| !name.contains('|')));
    let nested = StreamOptions {
        subgraphs: true,
        ..options("t2", &modes)
    };
    let outcome = run_with(&graph, values(json!({"topic": "b"})), nested).await;
    let (_, task_id) = team_task(&graph, "t2").await;
    let updates = outcome.of(&format!("updates|team:{task_id}"));
    assert_eq!(
        updates,
        vec![
            json!({"research": {"notes": ["research b"]}}),
            json!({"approve": {"approved": true, "notes": ["approved"]}}),
        ]
    );
    let inner_values = outcome.of(&format!("values|team:{task_id}"));
    assert_eq!(
        inner_values.last().map(|values| values["approved"].clone()),
        Some(json!(true))
    );
    assert_eq!(
        outcome.last_values()["summary"],
        "plan, research b, approved"
    );
}

#[tokio::test]
async fn the_event_stream_holds_the_subgraphs_node_events_under_its_task() {
    let saver = saver();
    let graph = report(&saver, false);
    let outcome = run_with(
        &graph,
        values(json!({"topic": "e"})),
        options("t", &[StreamMode::Events]),
    )
    .await;
    let events = outcome.of("events");
    let run_id = events[0]["run_id"].clone();
    let (_, task_id) = team_task(&graph, "t").await;
    let research = events
        .iter()
        .find(|e| e["event"] == "on_chain_start" && e["name"] == "research")
        .expect("the subgraph's node events, without stream_subgraphs");
    assert_eq!(research["parent_ids"], json!([run_id, task_id]));
    assert_eq!(
        research["metadata"]["langgraph_checkpoint_ns"],
        format!("team:{task_id}")
    );
    let starts = events
        .iter()
        .filter(|e| e["event"] == "on_chain_start" && e["parent_ids"] == json!([]))
        .count();
    assert_eq!(starts, 1, "one run start: the subgraph's is its task's");
}

#[tokio::test]
async fn an_interrupt_in_a_subgraph_pauses_the_parent_and_is_resumed_from_it() {
    let saver = saver();
    let graph = report(&saver, true);
    run(&graph, "t", values(json!({"topic": "x"}))).await;
    let paused = state(&graph, "t").await;
    assert_eq!(paused.next, ["team"]);
    let interrupts = paused.interrupts();
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0].value, json!({"question": "approve?"}));

    let nested = graph
        .get_state(
            &RunnableConfig::for_thread("t"),
            StateOptions { subgraphs: true },
        )
        .await
        .unwrap();
    let inner = nested.tasks[0].state.as_ref().expect("the child's state");
    assert_eq!(inner.next, ["approve"]);
    assert_eq!(inner.values["notes"], json!(["plan", "research x"]));
    assert_eq!(
        inner.interrupts()[0].id,
        interrupts[0].id,
        "the parent reports the child's interrupt"
    );
    assert!(paused.tasks[0].state.is_none(), "nested only when asked");

    let resumed = run(&graph, "t", command(json!({"resume": false}))).await;
    assert!(resumed.error.is_none(), "{:?}", resumed.error);
    let done = state(&graph, "t").await;
    assert!(!done.is_paused());
    assert_eq!(done.values["approved"], json!(false));
    assert_eq!(
        done.values["notes"],
        json!(["plan", "research x", "approved"]),
        "the child resumed at its pause: research ran once"
    );
}

#[tokio::test]
async fn a_paused_subgraphs_state_is_updated_through_its_namespace() {
    let saver = saver();
    let graph = report(&saver, true);
    run(&graph, "t", values(json!({"topic": "x"}))).await;
    let paused = state(&graph, "t").await;
    let child = paused.tasks[0]
        .checkpoint
        .clone()
        .expect("the child's checkpoints");
    let written = graph
        .update_state(
            &RunnableConfig::from(child.clone()),
            json!({"notes": ["edited"]}),
            Some("research".into()),
        )
        .await
        .unwrap();
    assert_eq!(written.checkpoint_ns, child.checkpoint_ns);
    let unknown = RunnableConfig::from(service_graph::CheckpointConfig {
        checkpoint_ns: "nowhere:1".into(),
        ..child
    });
    let refused = graph.update_state(&unknown, json!({}), None).await;
    assert!(matches!(
        refused,
        Err(service_graph::GraphError::NotFound(_))
    ));
    run(&graph, "t", command(json!({"resume": true}))).await;
    let done = state(&graph, "t").await;
    assert_eq!(
        done.values["notes"],
        json!(["plan", "research x", "edited", "approved"])
    );
    assert_eq!(
        done.values["approved"],
        json!(true),
        "the answer reached the pause"
    );
}

#[tokio::test]
async fn resume_by_interrupt_id_reaches_the_childs_interrupt() {
    let saver = saver();
    let graph = report(&saver, true);
    run(&graph, "t", values(json!({"topic": "x"}))).await;
    let id = state(&graph, "t").await.interrupts()[0].id.clone();
    run(&graph, "t", command(json!({"resume": {id: true}}))).await;
    assert_eq!(state(&graph, "t").await.values["approved"], json!(true));
}

#[tokio::test]
async fn a_failing_subgraph_node_fails_the_parent_with_the_childs_error() {
    let saver = saver();
    let broken = StateGraph::new("broken")
        .channel("topic", Reducer::LastValue, json!({}))
        .node("explode", |_, _| async {
            Err::<Value, _>(NodeError::failed(service_types::RunError::new(
                "ValueError",
                "boom",
            )))
        })
        .edge(START, "explode")
        .edge("explode", END)
        .compile(Arc::clone(&saver))
        .unwrap();
    let graph = StateGraph::new("parent")
        .channel("topic", Reducer::LastValue, json!({}))
        .subgraph("inner", &broken)
        .edge(START, "inner")
        .edge("inner", END)
        .compile(Arc::clone(&saver))
        .unwrap();
    let outcome = run(&graph, "t", values(json!({"topic": "x"}))).await;
    let Some(service_graph::GraphError::NodeFailed { node, error }) = outcome.error else {
        panic!("a node failure, not {:?}", outcome.error);
    };
    assert_eq!(
        (node.as_str(), error.error.as_str()),
        ("inner", "ValueError")
    );
    assert_eq!(error.message, "boom");
    let failed = state(&graph, "t").await;
    assert_eq!(failed.next, ["inner"]);
    assert!(failed.tasks[0].error.as_deref().unwrap().contains("boom"));
}

#[tokio::test]
async fn two_interrupts_in_a_subgraph_are_answered_one_at_a_time_from_the_parent() {
    let saver = saver();
    let side = |name: &'static str| {
        move |_: Value, ctx: service_stategraph::NodeContext| async move {
            let answer = ctx.interrupt(json!({"side": name}))?;
            Ok::<_, NodeError>(json!({"answers": [format!("{name}={answer}")]}))
        }
    };
    let twins = StateGraph::new("twins")
        .channel("answers", Reducer::Append, json!({}))
        .node("left", side("left"))
        .node("right", side("right"))
        .edge(START, "left")
        .edge(START, "right")
        .edge("left", END)
        .edge("right", END)
        .compile(Arc::clone(&saver))
        .unwrap();
    let graph = StateGraph::new("parent")
        .channel("answers", Reducer::Append, json!({}))
        .subgraph("pair", &twins)
        .edge(START, "pair")
        .edge("pair", END)
        .compile(Arc::clone(&saver))
        .unwrap();
    run(&graph, "t", values(json!({}))).await;
    let pending = state(&graph, "t").await.interrupts();
    assert_eq!(pending.len(), 2);
    let left = pending
        .iter()
        .find(|i| i.value == json!({"side": "left"}))
        .unwrap();
    run(
        &graph,
        "t",
        command(json!({"resume": {left.id.clone(): 1}})),
    )
    .await;
    let still = state(&graph, "t").await.interrupts();
    assert_eq!(still.len(), 1, "the other side still waits");
    assert_eq!(still[0].value, json!({"side": "right"}));
    run(
        &graph,
        "t",
        command(json!({"resume": {still[0].id.clone(): 2}})),
    )
    .await;
    let done = state(&graph, "t").await;
    assert!(!done.is_paused());
    assert_eq!(done.values["answers"], json!(["left=1", "right=2"]));
}

/// `outer`: one node `inner`, the report graph (which holds `team`).
fn outer(saver: &Arc<dyn Checkpointer>) -> CompiledGraph {
    StateGraph::new("outer")
        .channel("topic", Reducer::LastValue, json!({"type": "string"}))
        .subgraph("inner", &report(saver, false))
        .edge(START, "inner")
        .edge("inner", END)
        .compile(Arc::clone(saver))
        .unwrap()
}

#[tokio::test]
async fn subgraphs_are_listed_by_namespace_and_recursively() {
    let saver = saver();
    let graph = outer(&saver);
    let names = |listed: Vec<(String, service_types::GraphSchema)>| {
        listed.into_iter().map(|(name, _)| name).collect::<Vec<_>>()
    };
    let direct = graph.get_subgraphs(None, false).await.unwrap();
    assert_eq!(
        direct[0].1.state_schema.as_ref().unwrap()["title"],
        "reportState"
    );
    assert_eq!(names(direct), ["inner"]);
    let all = graph.get_subgraphs(None, true).await.unwrap();
    assert_eq!(names(all), ["inner", "inner|team"]);
    let one = graph
        .get_subgraphs(Some("inner|team".into()), false)
        .await
        .unwrap();
    assert_eq!(names(one), ["inner|team"]);
    let none = graph
        .get_subgraphs(Some("other".into()), true)
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[tokio::test]
async fn xray_draws_the_subgraphs_nodes_in_place_of_the_node() {
    let saver = saver();
    let graph = report(&saver, false);
    let ids = |drawing: &Value| {
        drawing["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|node| node["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let edges = |drawing: &Value| {
        drawing["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{}->{}",
                    e["source"].as_str().unwrap(),
                    e["target"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let flat = graph.get_graph(0).await.unwrap();
    assert_eq!(
        ids(&flat),
        ["__start__", "plan", "team", "finish", "__end__"]
    );
    let xray = graph.get_graph(1).await.unwrap();
    assert_eq!(
        ids(&xray),
        [
            "__start__",
            "plan",
            "team:research",
            "team:approve",
            "finish",
            "__end__"
        ]
    );
    assert_eq!(
        edges(&xray),
        [
            "__start__->plan",
            "plan->team:research",
            "team:approve->finish",
            "finish->__end__",
            "team:research->team:approve",
        ]
    );
    let deep = outer(&saver).get_graph(u32::MAX).await.unwrap();
    assert!(ids(&deep).contains(&"inner:team:approve".to_owned()));
}
