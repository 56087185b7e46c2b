//! Replaying a thread's history from any checkpoint reproduces the recorded later
//! states, for the deterministic example graphs.

mod common;

use common::*;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use service_graph::{HistoryOptions, RunContext, RunInput, RunnableConfig};
use service_types::StreamMode;

fn input(graph: &str, k: i64) -> Value {
    match graph {
        "echo" => json!({"messages": [{"type": "human", "content": format!("m{k}")}]}),
        _ => json!({"n": k}),
    }
}

/// `values` without message ids: a replayed node's messages are new ones, with fresh
/// ids, as with LangGraph's `add_messages`.
fn without_new_ids(mut values: Value) -> Value {
    for message in values["messages"].as_array_mut().into_iter().flatten() {
        if let Some(fields) = message.as_object_mut() {
            fields.remove("id");
        }
    }
    values
}

async fn check(graph_id: &str, inputs: Vec<i64>, pick: Index) {
    let graph = graph(graph_id).await;
    for k in &inputs {
        let outcome = run(graph.as_ref(), "t", RunInput::Values(input(graph_id, *k))).await;
        assert!(outcome.error.is_none());
    }
    let mut chain = graph
        .get_state_history(&RunnableConfig::for_thread("t"), HistoryOptions::default())
        .await
        .unwrap();
    chain.reverse();
    let i = pick.index(chain.len());
    let end = (i..chain.len())
        .find(|j| chain[*j].next.is_empty())
        .unwrap_or(chain.len() - 1);
    // The replay shows the state it starts from, then each later one.
    let expected: Vec<Value> = chain[i..=end.max(i)]
        .iter()
        .map(|s| s.values.clone())
        .collect();

    let mut options = options("t", &[StreamMode::Values]);
    options.config = chain[i].config.clone().unwrap().into();
    let replay = run_in(
        graph.as_ref(),
        RunInput::None,
        options,
        RunContext::default(),
    )
    .await;
    assert!(replay.error.is_none());
    assert_eq!(
        replay
            .of("values")
            .into_iter()
            .map(without_new_ids)
            .collect::<Vec<_>>(),
        expected
            .into_iter()
            .map(without_new_ids)
            .collect::<Vec<_>>(),
        "replay of {graph_id} from checkpoint {i}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn replaying_from_any_checkpoint_reproduces_the_later_states(
        graph_id in prop::sample::select(vec!["echo", "steps"]),
        inputs in prop::collection::vec(0i64..4, 1..4),
        pick in any::<Index>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(check(graph_id, inputs, pick));
    }
}
