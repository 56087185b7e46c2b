//! One checkpoint per superstep, parent links, metadata and history paging.

mod common;

use common::*;
use serde_json::{Value, json};
use service_graph::{AgentGraph, HistoryOptions, RunInput, RunnableConfig};
use service_stategraph::{CompiledGraph, END, NodeError, Reducer, START, StateGraph};
use service_types::StreamMode;

/// START -> a -> b -> END, each appending its name to `log`.
fn chain() -> CompiledGraph {
    StateGraph::new("chain")
        .channel("log", Reducer::Append, json!({"type": "array"}))
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
        .expect("valid graph")
}

#[tokio::test]
async fn each_superstep_writes_one_checkpoint_linked_to_its_parent() {
    let graph = chain();
    let outcome = run(&graph, "t", values(json!({"log": ["in"]}))).await;
    assert!(outcome.error.is_none());
    let history = history(&graph, "t").await;
    let steps: Vec<i64> = history
        .iter()
        .map(|s| {
            s.metadata
                .as_ref()
                .and_then(|m| m["step"].as_i64())
                .unwrap_or(99)
        })
        .collect();
    assert_eq!(steps, vec![2, 1, 0, -1]);
    let sources: Vec<Value> = history
        .iter()
        .map(|s| s.metadata.clone().unwrap_or_default()["source"].clone())
        .collect();
    assert_eq!(
        sources,
        vec![json!("loop"), json!("loop"), json!("loop"), json!("input")]
    );
    for pair in history.windows(2) {
        assert_eq!(pair[0].parent_config, pair[1].config);
    }
    assert_eq!(history[3].parent_config, None);
    assert_eq!(history[3].next, vec!["__start__"]);
    assert_eq!(history[2].next, vec!["a"]);
    assert_eq!(
        history[1].metadata.as_ref().unwrap()["writes"],
        json!({"a": {"log": ["a"]}})
    );
    assert_eq!(history[0].values, json!({"log": ["in", "a", "b"]}));
    assert!(history[0].next.is_empty());
}

#[tokio::test]
async fn values_frames_start_with_the_input_state() {
    let graph = chain();
    let outcome = run(&graph, "t", values(json!({"log": ["in"]}))).await;
    assert_eq!(
        outcome.of("values"),
        vec![
            json!({"log": ["in"]}),
            json!({"log": ["in", "a"]}),
            json!({"log": ["in", "a", "b"]})
        ]
    );
    assert_eq!(
        outcome.of("updates"),
        vec![json!({"a": {"log": ["a"]}}), json!({"b": {"log": ["b"]}})]
    );
}

#[tokio::test]
async fn history_pages_newest_first_with_limit_and_before() {
    let graph = chain();
    run(&graph, "t", values(json!({}))).await;
    let all = history(&graph, "t").await;
    let config = RunnableConfig::for_thread("t");
    let page = |limit, before: Option<String>| {
        let graph = &graph;
        let config = &config;
        async move {
            graph
                .get_state_history(
                    config,
                    HistoryOptions {
                        limit: Some(limit),
                        before,
                        filter: None,
                    },
                )
                .await
                .unwrap()
        }
    };
    let first = page(2, None).await;
    assert_eq!(first, all[..2].to_vec());
    let second = page(2, Some(checkpoint_id(&first[1]))).await;
    assert_eq!(second, all[2..4].to_vec());
}

#[tokio::test]
async fn history_filters_on_metadata() {
    let graph = chain();
    run(&graph, "t", values(json!({}))).await;
    let filter = json!({"source": "input"}).as_object().cloned();
    let inputs = graph
        .get_state_history(
            &RunnableConfig::for_thread("t"),
            HistoryOptions {
                filter,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(inputs.len(), 1);
}

#[tokio::test]
async fn run_metadata_extras_are_merged_into_every_checkpoint() {
    let graph = chain();
    let mut options = options("t", &[]);
    options.metadata = json!({"run_id": "r1", "graph_id": "chain"})
        .as_object()
        .cloned()
        .unwrap();
    run_with(&graph, values(json!({})), options).await;
    assert!(
        history(&graph, "t")
            .await
            .iter()
            .all(|s| s.metadata.as_ref().unwrap()["run_id"] == "r1")
    );
}

#[tokio::test]
async fn a_new_run_continues_the_thread_state() {
    let graph = chain();
    run(&graph, "t", values(json!({"log": ["1"]}))).await;
    run(&graph, "t", values(json!({"log": ["2"]}))).await;
    assert_eq!(
        state(&graph, "t").await.values,
        json!({"log": ["1", "a", "b", "2", "a", "b"]})
    );
}

#[tokio::test]
async fn an_empty_thread_has_the_empty_snapshot() {
    let snapshot = state(&chain(), "nobody").await;
    assert_eq!(snapshot.values, json!({}));
    assert!(snapshot.next.is_empty() && snapshot.config.is_none());
}

/// What `get_state` returns, as far as the engine reads a handed-over state.
fn seen(
    snapshot: &service_graph::StateSnapshot,
) -> (
    Value,
    Vec<String>,
    Vec<service_graph::TaskSnapshot>,
    Option<service_graph::CheckpointConfig>,
) {
    (
        snapshot.values.clone(),
        snapshot.next.clone(),
        snapshot.tasks.clone(),
        snapshot.config.clone(),
    )
}

/// A run that ends or pauses before a node hands over the state it ended in, the same
/// as `get_state` reads back; one paused on an interrupt or failed hands over nothing
/// (the interrupt's task writes are recorded after its checkpoint was written).
#[tokio::test]
async fn a_run_hands_over_the_state_it_ended_in_unless_task_writes_followed() {
    let modes = [StreamMode::Values];
    let graph = chain();
    let (outcome, handed) =
        run_handing_over(&graph, values(json!({"log": ["in"]})), options("t", &modes)).await;
    assert!(outcome.error.is_none());
    let handed = handed.expect("a finished run hands over its state");
    assert_eq!(seen(&handed), seen(&state(&graph, "t").await));
    assert_eq!(handed.values, json!({"log": ["in", "a", "b"]}));

    let mut paused = options("p", &modes);
    paused.interrupt_before = before(&["b"]);
    let (_, handed) = run_handing_over(&graph, values(json!({"log": []})), paused).await;
    let handed = handed.expect("a run paused before a node hands over its state");
    assert_eq!(handed.next, vec!["b"]);
    assert_eq!(seen(&handed), seen(&state(&graph, "p").await));

    // Started from an earlier checkpoint with nothing left to run: the run writes a
    // fork of it (as LangGraph does), which becomes the thread's state.
    let finished_first = state(&graph, "t").await;
    run(&graph, "t", values(json!({"log": ["again"]}))).await;
    let mut from_earlier = options("t", &modes);
    from_earlier.config =
        RunnableConfig::for_thread("t").with_checkpoint_id(checkpoint_id(&finished_first));
    let (outcome, handed) = run_handing_over(&graph, RunInput::None, from_earlier).await;
    assert!(outcome.error.is_none());
    assert_eq!(outcome.of("values"), vec![finished_first.values.clone()]);
    let handed = handed.expect("the fork is the thread's state");
    let now = state(&graph, "t").await;
    assert_eq!(seen(&handed), seen(&now));
    assert_eq!(now.values, finished_first.values);
    assert_eq!(now.metadata.unwrap()["source"], "fork");
    assert_eq!(now.parent_config, finished_first.config);

    // Kept under a checkpoint namespace: not what the thread's `get_state` returns.
    let mut namespaced = options("n", &modes);
    namespaced
        .config
        .configurable
        .insert("checkpoint_ns".into(), json!("child"));
    let (outcome, handed) = run_handing_over(&graph, values(json!({"log": []})), namespaced).await;
    assert!(outcome.error.is_none());
    assert!(handed.is_none(), "a namespace's state is not the thread's");

    let asker = StateGraph::new("asker")
        .channel("answer", Reducer::LastValue, json!({}))
        .node("ask", |_, ctx| async move {
            let answer = ctx.interrupt(json!("approve?"))?;
            Ok::<_, NodeError>(json!({"answer": answer}))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .compile(saver())
        .expect("valid graph");
    let (_, handed) = run_handing_over(&asker, values(json!({})), options("i", &modes)).await;
    assert!(
        handed.is_none(),
        "an interrupt's writes follow its checkpoint"
    );
    assert_eq!(state(&asker, "i").await.tasks[0].interrupts.len(), 1);

    let failing = StateGraph::new("failing")
        .channel("log", Reducer::Append, json!({}))
        .node("boom", |_, _| async {
            Err::<Value, _>(NodeError::failed(service_types::RunError::new(
                "ValueError",
                "boom",
            )))
        })
        .edge(START, "boom")
        .edge("boom", END)
        .compile(saver())
        .expect("valid graph");
    let (outcome, handed) =
        run_handing_over(&failing, values(json!({})), options("f", &modes)).await;
    assert!(outcome.error.is_some());
    assert!(handed.is_none());
}

/// An input a reducer refuses fails the run: the input checkpoint is stored with the
/// `__start__` task's output recorded, and nothing follows it.
#[tokio::test]
async fn an_input_a_reducer_refuses_fails_the_start_task() {
    let positive: service_stategraph::ReducerFn =
        std::sync::Arc::new(|current, update| match update.as_i64() {
            Some(n) if n > 0 => Ok(json!(current.as_i64().unwrap_or(0) + n)),
            _ => Err(format!("{update} is not positive")),
        });
    let graph = StateGraph::new("sum")
        .channel("n", Reducer::Custom(positive), json!({}))
        .node("a", |_, _| async { Ok::<_, NodeError>(json!({"n": 1})) })
        .edge(START, "a")
        .edge("a", END)
        .compile(saver())
        .expect("valid graph");
    let outcome = run(&graph, "ok", values(json!({"n": 2}))).await;
    assert!(outcome.error.is_none());
    assert_eq!(state(&graph, "ok").await.values, json!({"n": 3}));

    let outcome = run(&graph, "t", values(json!({"n": -1}))).await;
    assert!(
        outcome
            .error
            .as_ref()
            .is_some_and(|error| error.to_string().contains("not positive")),
        "{:?}",
        outcome.error
    );
    let history = history(&graph, "t").await;
    assert_eq!(history.len(), 1, "only the input checkpoint");
    assert_eq!(history[0].next, vec![START]);
    assert_eq!(history[0].tasks[0].result, Some(json!({"n": -1})));
}
