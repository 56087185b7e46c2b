//! interrupt() inside nodes, resume by id, interrupt_before / interrupt_after.

mod common;

use common::*;
use serde_json::{Value, json};
use service_graph::{GraphError, NodeSelection};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::StreamMode;

/// START -> ask (interrupts, stores the answer) -> END.
fn asker() -> CompiledGraph {
    StateGraph::new("asker")
        .channel("answer", Reducer::LastValue, json!({}))
        .node("ask", |_, ctx| async move {
            let answer = ctx.interrupt(json!({"question": "approve?"}))?;
            Ok::<_, NodeError>(json!({"answer": answer}))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .compile(saver())
        .unwrap()
}

/// START -> left, right in parallel; each interrupts and appends its answer.
fn twins() -> CompiledGraph {
    let side = |name: &'static str| {
        move |_: Value, ctx: service_stategraph::NodeContext| async move {
            let answer = ctx.interrupt(json!({"side": name}))?;
            Ok::<_, NodeError>(json!({"answers": [format!("{name}={answer}")]}))
        }
    };
    StateGraph::new("twins")
        .channel("answers", Reducer::Append, json!({}))
        .node("left", side("left"))
        .node("right", side("right"))
        .edge(START, "left")
        .edge(START, "right")
        .edge("left", END)
        .edge("right", END)
        .compile(saver())
        .unwrap()
}

fn interrupt_ids(snapshot: &service_graph::StateSnapshot) -> Vec<String> {
    snapshot.interrupts().into_iter().map(|i| i.id).collect()
}

#[tokio::test]
async fn interrupt_pauses_with_the_interrupt_frames_and_a_pending_task() {
    let graph = asker();
    let outcome = run(&graph, "t", values(json!({}))).await;
    assert!(outcome.error.is_none());
    let paused = state(&graph, "t").await;
    assert_eq!(paused.next, vec!["ask"]);
    assert_eq!(paused.tasks.len(), 1);
    let interrupt = &paused.tasks[0].interrupts[0];
    assert_eq!(interrupt.value, json!({"question": "approve?"}));
    assert_eq!(interrupt.id.len(), 32);
    let expected =
        json!([{"value": {"question": "approve?"}, "id": interrupt.id, "response_schema": null}]);
    assert_eq!(
        outcome.of("updates").last(),
        Some(&json!({"__interrupt__": expected}))
    );
    assert_eq!(outcome.last_values()["__interrupt__"], expected);
}

#[tokio::test]
async fn resume_hands_the_value_to_the_interrupt_and_finishes() {
    let graph = asker();
    run(&graph, "t", values(json!({}))).await;
    let outcome = run(&graph, "t", command(json!({"resume": "yes"}))).await;
    assert!(outcome.error.is_none());
    assert_eq!(outcome.last_values(), json!({"answer": "yes"}));
    let done = state(&graph, "t").await;
    assert!(done.next.is_empty() && !done.is_paused());
}

/// As LangGraph's: an input that writes no state key shows no empty state, and a
/// resumed run first shows the state it resumes.
#[tokio::test]
async fn values_frames_skip_an_input_of_no_state_key_and_start_a_resume_with_its_state() {
    let graph = asker();
    let paused = run(&graph, "t", values(json!({"unknown": 1}))).await;
    let frames = paused.of("values");
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert!(frames[0].get("__interrupt__").is_some());

    let resumed = run(&graph, "t", command(json!({"resume": "yes"}))).await;
    assert_eq!(
        resumed.of("values"),
        vec![json!({}), json!({"answer": "yes"})]
    );
}

#[tokio::test]
async fn resume_by_interrupt_id_map() {
    let graph = asker();
    run(&graph, "t", values(json!({}))).await;
    let id = interrupt_ids(&state(&graph, "t").await).remove(0);
    run(&graph, "t", command(json!({"resume": {id: {"ok": true}}}))).await;
    assert_eq!(
        state(&graph, "t").await.values,
        json!({"answer": {"ok": true}})
    );
}

#[tokio::test]
async fn two_interrupts_in_one_step_are_resumed_by_id() {
    let graph = twins();
    run(&graph, "t", values(json!({}))).await;
    let paused = state(&graph, "t").await;
    assert_eq!(paused.next, vec!["left", "right"]);
    let ids = interrupt_ids(&paused);
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);

    // Resuming only one: the other pauses again under the same id.
    run(
        &graph,
        "t",
        command(json!({"resume": {ids[0].clone(): "L"}})),
    )
    .await;
    let half = state(&graph, "t").await;
    assert_eq!(interrupt_ids(&half), vec![ids[1].clone()]);
    assert_eq!(
        half.tasks[0].result,
        Some(json!({"answers": ["left=\"L\""]}))
    );

    run(
        &graph,
        "t",
        command(json!({"resume": {ids[1].clone(): "R"}})),
    )
    .await;
    let done = state(&graph, "t").await;
    assert!(done.next.is_empty());
    assert_eq!(
        done.values,
        json!({"answers": ["left=\"L\"", "right=\"R\""]})
    );
}

#[tokio::test]
async fn a_scalar_resume_is_refused_when_several_interrupts_are_pending() {
    let graph = twins();
    run(&graph, "t", values(json!({}))).await;
    let outcome = run(&graph, "t", command(json!({"resume": "x"}))).await;
    assert!(matches!(outcome.error, Some(GraphError::InvalidInput(_))));
}

#[tokio::test]
async fn sequential_interrupts_in_one_node_each_get_their_own_resume() {
    let graph = StateGraph::new("two-questions")
        .channel("answers", Reducer::LastValue, json!({}))
        .node("ask", |_, ctx| async move {
            let first = ctx.interrupt(json!("first?"))?;
            let second = ctx.interrupt(json!("second?"))?;
            Ok::<_, NodeError>(json!({"answers": [first, second]}))
        })
        .edge(START, "ask")
        .compile(saver())
        .unwrap();
    run(&graph, "t", values(json!({}))).await;
    run(&graph, "t", command(json!({"resume": 1}))).await;
    let second = state(&graph, "t").await;
    assert_eq!(second.interrupts()[0].value, json!("second?"));
    run(&graph, "t", command(json!({"resume": 2}))).await;
    assert_eq!(state(&graph, "t").await.values, json!({"answers": [1, 2]}));
}

/// START -> a -> b -> END, counting visits.
fn pair() -> CompiledGraph {
    StateGraph::new("pair")
        .channel("seen", Reducer::Append, json!({}))
        .node("a", |_, _| async {
            Ok::<_, NodeError>(json!({"seen": ["a"]}))
        })
        .node("b", |_, _| async {
            Ok::<_, NodeError>(json!({"seen": ["b"]}))
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .compile(saver())
        .unwrap()
}

#[tokio::test]
async fn interrupt_before_pauses_and_a_run_without_input_continues() {
    let graph = pair();
    let mut paused = options("t", &[StreamMode::Values]);
    paused.interrupt_before = before(&["b"]);
    run_with(&graph, values(json!({})), paused.clone()).await;
    let snapshot = state(&graph, "t").await;
    assert_eq!(snapshot.next, vec!["b"]);
    assert_eq!(snapshot.values, json!({"seen": ["a"]}));
    // Continuing with the same interrupt_before does not pause again on the same node.
    run_with(&graph, service_graph::RunInput::None, paused).await;
    assert_eq!(state(&graph, "t").await.values, json!({"seen": ["a", "b"]}));
}

#[tokio::test]
async fn interrupt_before_all_skips_the_start_step() {
    let graph = pair();
    let mut paused = options("t", &[]);
    paused.interrupt_before = Some(NodeSelection::All);
    run_with(&graph, values(json!({})), paused).await;
    assert_eq!(state(&graph, "t").await.next, vec!["a"]);
}

#[tokio::test]
async fn interrupt_after_pauses_once_the_node_ran() {
    let graph = pair();
    let mut paused = options("t", &[]);
    paused.interrupt_after = before(&["a"]);
    run_with(&graph, values(json!({})), paused).await;
    let snapshot = state(&graph, "t").await;
    assert_eq!(snapshot.values, json!({"seen": ["a"]}));
    assert_eq!(snapshot.next, vec!["b"]);
}
