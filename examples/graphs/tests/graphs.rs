//! The example graphs behave as the server's users and end-to-end tests rely on.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};
use service_engine::{EngineConfig, long_term_store};
use service_graph::{
    GraphError, GraphResolver, HistoryOptions, InMemorySaver, NodeSelection, RunContext, RunInput,
    RunnableConfig, StateUpdate,
};
use service_store::SystemClock;
use service_store_memory::{MemoryOptions, memory_store};
use service_types::{RunError, StreamMode};
use tokio_util::sync::CancellationToken;

fn human(content: &str) -> Value {
    json!({"messages": [{"type": "human", "content": content}]})
}

#[tokio::test]
async fn the_registry_serves_the_eight_graph_ids_with_schemas() {
    let registry = service_example_graphs::registry(Arc::new(InMemorySaver::new())).unwrap();
    assert_eq!(registry.graph_ids().len(), 8);
    for id in service_example_graphs::GRAPH_IDS {
        assert!(registry.load(id).await.is_ok(), "{id} loads");
        assert_eq!(
            registry.schemas(id).await.unwrap().graph_id.as_deref(),
            Some(id)
        );
    }
    let echo = registry.schemas("echo").await.unwrap();
    assert!(
        echo.input_schema.unwrap()["properties"]
            .get("messages")
            .is_some()
    );
}

#[tokio::test]
async fn echo_appends_an_ai_message_echoing_the_last_content() {
    let echo = graph("echo").await;
    let outcome = run(echo.as_ref(), "t", RunInput::Values(human("hi"))).await;
    assert!(outcome.error.is_none());
    let messages = outcome.last_values()["messages"].clone();
    let kinds: Vec<_> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["type"].clone(), m["content"].clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (json!("human"), json!("hi")),
            (json!("ai"), json!("echo: hi"))
        ]
    );
    assert_eq!(
        outcome.of("updates"),
        vec![json!({"echo": {"messages": [{"type": "ai", "content": "echo: hi"}]}})]
    );
}

#[tokio::test]
async fn echo_reads_content_blocks_and_gives_every_message_an_id() {
    let echo = graph("echo").await;
    let input = json!({"messages": [{"id": "m1", "type": "human", "content": [{"type": "text", "text": "hello"}]}]});
    let outcome = run(echo.as_ref(), "t", RunInput::Values(input)).await;
    let messages = outcome.last_values()["messages"].clone();
    assert_eq!(messages[0]["id"], "m1");
    assert_eq!(messages[1]["content"], "echo: hello");
    let answer_id = messages[1]["id"].as_str().unwrap().to_owned();
    assert!(!answer_id.is_empty());
    // The stored state keeps the ids: a later turn does not renumber them.
    let again = run(echo.as_ref(), "t", RunInput::Values(human("again"))).await;
    assert_eq!(again.last_values()["messages"][1]["id"], answer_id.as_str());
}

#[tokio::test]
async fn echo_messages_with_a_known_id_replace_and_remove_messages_delete() {
    let echo = graph("echo").await;
    let thread = RunnableConfig::for_thread("t");
    run(echo.as_ref(), "t", RunInput::Values(human("one"))).await;
    let messages = state(echo.as_ref(), "t").await.values["messages"].clone();
    let (first, answer) = (messages[0]["id"].clone(), messages[1]["id"].clone());
    let edit = json!({"messages": [
        {"id": first, "type": "human", "content": "uno"},
        {"type": "remove", "id": answer}
    ]});
    echo.update_state(&thread, edit, None).await.unwrap();
    let messages = state(echo.as_ref(), "t").await.values["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 1);
    assert_eq!(messages[0]["id"], first);
    assert_eq!(messages[0]["content"], "uno");

    let unknown = json!({"messages": [{"type": "remove", "id": "nope"}]});
    let error = echo.update_state(&thread, unknown, None).await.unwrap_err();
    assert!(error.to_string().contains("nope"), "{error}");
}

#[tokio::test]
async fn echo_supports_history_update_state_supersteps_and_forks() {
    let echo = graph("echo").await;
    let thread = RunnableConfig::for_thread("t");
    run(echo.as_ref(), "t", RunInput::Values(human("one"))).await;
    let history = echo
        .get_state_history(&thread, HistoryOptions::default())
        .await
        .unwrap();
    assert_eq!(history.len(), 3);

    echo.update_state(&thread, human("edited"), None)
        .await
        .unwrap();
    let messages = state(echo.as_ref(), "t").await.values["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 3);

    let fork = history.last().unwrap().config.clone().unwrap();
    let mut options = options("t", &[StreamMode::Values]);
    options.config = fork.into();
    let replay = run_in(
        echo.as_ref(),
        RunInput::None,
        options,
        RunContext::default(),
    )
    .await;
    // The input's message keeps its id (it was stored with it); the replayed node's
    // answer is a new message (as in LangGraph): compare the rest.
    assert_eq!(
        replay.last_values()["messages"][0]["id"],
        history[0].values["messages"][0]["id"]
    );
    let without_ids = |values: &Value| {
        let mut values = values.clone();
        for message in values["messages"].as_array_mut().unwrap() {
            message.as_object_mut().unwrap().remove("id");
        }
        values
    };
    assert_eq!(
        without_ids(&replay.last_values()),
        without_ids(&history[0].values)
    );

    let update = |content: &str| StateUpdate {
        values: Some(human(content)),
        command: None,
        as_node: Some("echo".into()),
    };
    let fresh = RunnableConfig::for_thread("s");
    echo.bulk_update_state(&fresh, vec![vec![update("one")], vec![update("two")]])
        .await
        .unwrap();
    let contents: Vec<_> = state(echo.as_ref(), "s").await.values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(contents, vec![json!("one"), json!("two")]);
    assert!(state(echo.as_ref(), "s").await.next.is_empty());
}

#[tokio::test]
async fn echo_supports_invoke_and_the_events_mode() {
    let echo = graph("echo").await;
    let output = echo
        .invoke(
            RunInput::Values(human("x")),
            options("t", &[]),
            RunContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(output["messages"][1]["content"], "echo: x");
    let stream = echo
        .stream_events(
            RunInput::Values(human("y")),
            options("u", &[StreamMode::Values]),
            RunContext::default(),
        )
        .await
        .unwrap();
    let chunks: Vec<_> = stream.collect().await;
    assert!(
        chunks
            .iter()
            .flatten()
            .any(|chunk| chunk.mode() == "events")
    );
}

#[tokio::test]
async fn steps_counts_to_n_writing_custom_frames() {
    let steps = graph("steps").await;
    let outcome = run(steps.as_ref(), "t", RunInput::Values(json!({}))).await;
    assert_eq!(
        outcome.of("custom"),
        vec![json!({"step": 1}), json!({"step": 2}), json!({"step": 3})]
    );
    let values = outcome.last_values();
    assert_eq!(values["count"], 3);
    assert_eq!(values["log"], json!(["step 1", "step 2", "step 3"]));
    let two = run(steps.as_ref(), "u", RunInput::Values(json!({"n": 2}))).await;
    assert_eq!(two.last_values()["count"], 2);
}

#[tokio::test]
async fn steps_graph_json_has_node_step() {
    let drawing = graph("steps").await.get_graph(0).await.unwrap();
    assert!(
        drawing["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|node| node["id"] == "step")
    );
}

#[tokio::test]
async fn steps_honours_interrupt_before_and_a_command_update() {
    let steps = graph("steps").await;
    let mut paused = options("t", &[StreamMode::Values]);
    paused.interrupt_before = Some(NodeSelection::Nodes(vec!["step".into()]));
    run_in(
        steps.as_ref(),
        RunInput::Values(json!({"n": 3})),
        paused,
        RunContext::default(),
    )
    .await;
    let snapshot = state(steps.as_ref(), "t").await;
    assert_eq!(snapshot.next, vec!["step"]);
    let resumed = run(
        steps.as_ref(),
        "t",
        RunInput::Command(json!({"update": {"count": 2}})),
    )
    .await;
    assert_eq!(resumed.last_values()["count"], 3);
    assert_eq!(resumed.last_values()["log"], json!(["step 3"]));
}

#[tokio::test]
async fn steps_update_state_as_step_appends_to_the_log() {
    let steps = graph("steps").await;
    run(steps.as_ref(), "t", RunInput::Values(json!({"n": 1}))).await;
    let thread = RunnableConfig::for_thread("t");
    steps
        .update_state(
            &thread,
            json!({"count": 10, "log": ["manual"]}),
            Some("step".into()),
        )
        .await
        .unwrap();
    let snapshot = state(steps.as_ref(), "t").await;
    assert_eq!(snapshot.values["log"], json!(["step 1", "manual"]));
    assert_eq!(snapshot.values["count"], 10);
    assert!(snapshot.next.is_empty());
}

#[tokio::test]
async fn approval_pauses_at_review_and_resume_decides_the_status() {
    let approval = graph("approval").await;
    let paused = run(
        approval.as_ref(),
        "t",
        RunInput::Values(json!({"topic": "cats"})),
    )
    .await;
    let last = paused.last_values();
    assert_eq!(last["draft"], "draft for cats");
    let request = &last["__interrupt__"][0]["value"];
    assert_eq!(request["question"], "approve?");
    assert_eq!(request["draft"], "draft for cats");
    assert_eq!(
        request["action_requests"],
        json!([{"name": "publish", "args": {"draft": "draft for cats"}, "description": "Publish this draft?"}])
    );
    assert_eq!(
        request["review_configs"],
        json!([{"action_name": "publish", "allowed_decisions": ["approve", "edit", "reject"]}])
    );
    let snapshot = state(approval.as_ref(), "t").await;
    assert_eq!(snapshot.next, vec!["review"]);
    assert_eq!(snapshot.tasks.len(), 1);
    assert_eq!(snapshot.tasks[0].name, "review");
    assert_eq!(snapshot.tasks[0].interrupts.len(), 1);

    let approved = run(
        approval.as_ref(),
        "t",
        RunInput::Command(json!({"resume": true})),
    )
    .await;
    assert_eq!(approved.last_values()["status"], "approved");
    assert!(state(approval.as_ref(), "t").await.next.is_empty());

    run(
        approval.as_ref(),
        "u",
        RunInput::Values(json!({"topic": "dogs"})),
    )
    .await;
    let rejected = run(
        approval.as_ref(),
        "u",
        RunInput::Command(json!({"resume": false})),
    )
    .await;
    assert_eq!(rejected.last_values()["status"], "rejected");
}

/// Resumes a paused `approval` run on `thread` with `answer`; its last values.
async fn decide(approval: &dyn service_graph::AgentGraph, thread: &str, answer: Value) -> Value {
    let input =
        json!({"messages": [{"type": "human", "content": [{"type": "text", "text": "cats"}]}]});
    run(approval, thread, RunInput::Values(input)).await;
    run(
        approval,
        thread,
        RunInput::Command(json!({"resume": answer})),
    )
    .await
    .last_values()
}

#[tokio::test]
async fn approval_reads_the_topic_from_messages_and_answers_hitl_decisions() {
    let approval = graph("approval").await;
    let approved = decide(
        approval.as_ref(),
        "a",
        json!({"decisions": [{"type": "approve"}]}),
    )
    .await;
    assert_eq!(approved["draft"], "draft for cats");
    assert_eq!(approved["status"], "approved");
    let replies: Vec<_> = approved["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["type"].clone(), m["content"].clone()))
        .collect();
    assert_eq!(replies[1], (json!("ai"), json!("approved: draft for cats")));

    let edit = json!({"decisions": [{"type": "edit", "edited_action": {"name": "publish", "args": {"draft": "better"}}}]});
    let edited = decide(approval.as_ref(), "e", edit).await;
    assert_eq!(
        (edited["status"].clone(), edited["draft"].clone()),
        (json!("approved"), json!("better"))
    );
    assert_eq!(edited["messages"][1]["content"], "approved: better");

    let reject = json!({"decisions": [{"type": "reject", "message": "no"}]});
    let rejected = decide(approval.as_ref(), "r", reject).await;
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(
        rejected["messages"][1]["content"],
        "rejected: draft for cats"
    );
}

#[tokio::test]
async fn fail_reports_boom_caused_by_root_cause_and_echo_can_follow() {
    let saver = Arc::new(InMemorySaver::new());
    let registry = service_example_graphs::registry(saver).unwrap();
    let fail = registry.load("fail").await.unwrap();
    let outcome = run(fail.as_ref(), "t", RunInput::Values(human("hi"))).await;
    let Some(error) = outcome.error else {
        panic!("fail must fail")
    };
    let run_error = error.to_run_error();
    assert_eq!(run_error.message, "boom");
    assert_eq!(run_error.error, "ValueError");
    assert_eq!(
        run_error.cause.as_ref().map(|c| c.message.as_str()),
        Some("root cause")
    );
    let snapshot = state(fail.as_ref(), "t").await;
    assert_eq!(snapshot.next, vec!["explode"]);
    let task_error: RunError =
        serde_json::from_str(snapshot.tasks[0].error.as_deref().unwrap()).unwrap();
    // The task keeps the error without the stack the run's error may carry.
    let without_stack = RunError {
        stack: None,
        ..run_error
    };
    assert_eq!(task_error, without_stack);

    let echo = registry.load("echo").await.unwrap();
    let later = run(echo.as_ref(), "t", RunInput::Values(human("again"))).await;
    assert!(later.error.is_none());
    assert_eq!(later.last_values()["messages"][2]["content"], "echo: again");
}

#[tokio::test(start_paused = true)]
async fn slow_waits_delay_ms_then_is_done() {
    let slow = graph("slow").await;
    let outcome = run(
        slow.as_ref(),
        "t",
        RunInput::Values(json!({"delay_ms": 50})),
    )
    .await;
    assert_eq!(outcome.last_values()["done"], true);
}

#[tokio::test(start_paused = true)]
async fn slow_is_cancellable_mid_wait() {
    let slow = graph("slow").await;
    let cancel = CancellationToken::new();
    let mut stream = slow
        .stream(
            RunInput::Values(json!({})),
            options("t", &[StreamMode::Tasks]),
            RunContext::new(cancel.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap().data()["name"],
        "sleep"
    );
    cancel.cancel();
    let rest: Vec<_> = stream.collect().await;
    assert!(matches!(rest.last(), Some(Err(GraphError::Cancelled))));
    tokio::time::advance(Duration::from_secs(5)).await;
    assert!(state(slow.as_ref(), "t").await.values.get("done").is_none());
}

#[tokio::test]
async fn reply_writes_a_reply_declaration_and_remembers_state() {
    let reply = graph("reply").await;
    let outcome = run(reply.as_ref(), "t", RunInput::Values(json!({"text": "hi"}))).await;
    assert_eq!(
        outcome.of("custom"),
        vec![json!({"reply": {"text": "reply to hi"}})]
    );
    assert_eq!(
        outcome.of("updates"),
        vec![json!({"reply": {"replied": true}})]
    );
    let snapshot = state(reply.as_ref(), "t").await;
    assert_eq!(snapshot.values, json!({"text": "hi", "replied": true}));
    assert!(snapshot.next.is_empty() && snapshot.tasks.is_empty());
}

#[tokio::test]
async fn reply_lacks_every_optional_capability() {
    let reply = graph("reply").await;
    let thread = RunnableConfig::for_thread("t");
    let capability = |error: GraphError| match error {
        GraphError::CapabilityMissing { capability } => capability,
        other => panic!("expected capability missing, got {other:?}"),
    };
    assert_eq!(
        capability(
            reply
                .get_state_history(&thread, HistoryOptions::default())
                .await
                .unwrap_err()
        ),
        "getStateHistory"
    );
    assert_eq!(
        capability(
            reply
                .update_state(&thread, json!({}), None)
                .await
                .unwrap_err()
        ),
        "updateState"
    );
    assert_eq!(
        capability(reply.bulk_update_state(&thread, vec![]).await.unwrap_err()),
        "bulkUpdateState"
    );
    let events = reply
        .stream_events(RunInput::None, options("t", &[]), RunContext::default())
        .await;
    assert_eq!(capability(events.err().unwrap()), "streamEvents");
    let invoke = reply
        .invoke(RunInput::None, options("t", &[]), RunContext::default())
        .await;
    assert_eq!(capability(invoke.unwrap_err()), "invoke");
    assert_eq!(
        capability(reply.get_graph(0).await.unwrap_err()),
        "getGraphAsync"
    );
    assert_eq!(
        capability(reply.get_subgraphs(None, false).await.unwrap_err()),
        "getSubgraphsAsync"
    );
}

#[tokio::test]
async fn memory_stores_the_text_and_counts_the_namespace() {
    let memory = graph("memory").await;
    let store = long_term_store(
        memory_store(MemoryOptions::new(Arc::new(SystemClock))),
        &EngineConfig::default(),
    );
    let ctx = RunContext::default().with_store(store.clone());
    let modes = [StreamMode::Values];
    let first = json!({"user": "u1", "key": "a", "text": "hello"});
    let outcome = run_in(
        memory.as_ref(),
        RunInput::Values(first),
        options("t", &modes),
        ctx.clone(),
    )
    .await;
    assert_eq!(outcome.last_values()["count"], 1);
    let second = json!({"user": "u1", "key": "b", "text": "again"});
    let outcome = run_in(
        memory.as_ref(),
        RunInput::Values(second),
        options("t", &modes),
        ctx,
    )
    .await;
    assert_eq!(outcome.last_values()["count"], 2);
    let namespace = vec!["memories".to_owned(), "u1".to_owned()];
    let item = store.get(&namespace, "a", None).await.unwrap().unwrap();
    assert_eq!(Value::Object(item.value), json!({"text": "hello"}));
}

#[tokio::test]
async fn memory_fails_without_a_store() {
    let memory = graph("memory").await;
    let outcome = run(
        memory.as_ref(),
        "t",
        RunInput::Values(json!({"user": "u", "key": "k", "text": "x"})),
    )
    .await;
    assert!(matches!(outcome.error, Some(GraphError::NodeFailed { .. })));
}
