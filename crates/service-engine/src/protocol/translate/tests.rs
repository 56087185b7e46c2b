//! The translator's rules, one test each.

use bytes::Bytes;

use super::*;
use crate::bus::EventId;

const RUN: &str = "01a20c40-264e-77f6-8cbe-756b55253aa2";
const NEXT: &str = "01a20c40-2f3a-72c4-b1be-7b75da51ac5d";

fn frame(seq: u64, event: &str, data: Value) -> Frame {
    Frame {
        id: EventId { millis: 1000, seq },
        event: event.to_owned(),
        data: Bytes::from(data.to_string()),
    }
}

fn created(seq: u64, run: &str) -> Frame {
    frame(seq, "metadata", json!({"run_id": run, "attempt": 1}))
}

fn done(seq: u64, run: &str) -> Frame {
    frame(
        seq,
        "metadata",
        json!({"status": "run_done", "run_id": run}),
    )
}

fn graph(name: &str) -> RunFacts {
    RunFacts {
        graph_name: Some(name.into()),
        status: None,
    }
}

fn ended(status: RunStatus) -> RunFacts {
    RunFacts {
        graph_name: None,
        status: Some(status),
    }
}

/// `method` and the data's `event` (lifecycle, messages) of each event.
fn summary(events: &[ProtocolEvent]) -> Vec<String> {
    events
        .iter()
        .map(
            |event| match event.params.data.get("event").and_then(Value::as_str) {
                Some(what) => format!("{} {what}", event.method),
                None => event.method.clone(),
            },
        )
        .collect()
}

#[test]
fn a_run_is_running_then_its_frames_then_completed() {
    let mut t = Translator::default();
    let start = t.accept(&created(0, RUN), &graph("echo"));
    assert_eq!(start[0].event_id, format!("synth:{RUN}:lc||running"));
    assert_eq!(
        start[0].params.data,
        json!({"event": "running", "graph_name": "echo"})
    );
    let values = t.accept(
        &frame(1, "values", json!({"messages": []})),
        &RunFacts::default(),
    );
    assert_eq!((values[0].seq, values[0].event_id.as_str()), (2, "1000-1"));
    let update = json!({"echo": {"messages": [{"type": "ai", "content": "echo: hi"}]}});
    let updates = t.accept(&frame(2, "updates", update), &RunFacts::default());
    assert_eq!(
        summary(&updates),
        [
            "messages message-start",
            "messages content-block-start",
            "messages content-block-delta",
            "messages content-block-finish",
            "messages message-finish",
            "updates"
        ]
    );
    assert_eq!(updates[0].params.data["role"], "ai");
    assert_eq!(updates[2].params.data["delta"]["text"], "echo: hi");
    assert_eq!(updates[1].event_id, "1000-2.1");
    assert_eq!(updates[5].params.node.as_deref(), Some("echo"));
    assert_eq!(
        updates[5].params.data["values"]["messages"][0]["content"],
        "echo: hi"
    );
    let end = t.accept(&done(3, RUN), &ended(RunStatus::Success));
    assert_eq!(summary(&end), ["lifecycle completed"]);
    assert_eq!(end[0].seq, 9);
}

#[test]
fn an_interrupt_is_requested_once_and_pauses_the_root() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("approval"));
    let interrupt = json!([{"id": "i1", "value": {"question": "approve?"}}]);
    let paused = t.accept(
        &frame(1, "updates", json!({"__interrupt__": interrupt})),
        &RunFacts::default(),
    );
    assert_eq!(
        summary(&paused),
        ["input.requested", "lifecycle interrupted"]
    );
    assert_eq!(
        paused[0].params.data,
        json!({"interrupt_id": "i1", "payload": {"question": "approve?"},
               "value": {"question": "approve?"}})
    );
    assert_eq!(paused[0].event_id, format!("synth:{RUN}:input||i1"));
    let values = t.accept(
        &frame(
            2,
            "values",
            json!({"topic": "x", "__interrupt__": interrupt}),
        ),
        &RunFacts::default(),
    );
    assert_eq!(summary(&values), ["values"]);
    assert_eq!(values[0].params.data, json!({"topic": "x"}));
    assert!(
        t.accept(&done(3, RUN), &ended(RunStatus::Success))
            .is_empty()
    );
}

#[test]
fn an_error_frame_fails_the_root_with_its_message() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("fail"));
    let failed = t.accept(
        &frame(
            1,
            "error",
            json!({"error": "ValueError", "message": "boom"}),
        ),
        &RunFacts::default(),
    );
    assert_eq!(
        failed[0].params.data,
        json!({"event": "failed", "graph_name": "fail", "error": "boom"})
    );
    assert!(t.accept(&done(2, RUN), &ended(RunStatus::Error)).is_empty());
}

#[test]
fn a_subgraph_is_started_on_its_first_frame_and_completed_by_its_node() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("nested"));
    let inner = t.accept(
        &frame(1, "updates|review:t1", json!({"draft": {"draft": "d"}})),
        &RunFacts::default(),
    );
    assert_eq!(summary(&inner), ["lifecycle started", "updates"]);
    assert_eq!(inner[0].params.namespace, ["review:t1"]);
    assert_eq!(inner[0].params.data["graph_name"], "review");
    assert_eq!(inner[1].params.namespace, ["review:t1"]);
    let outer = t.accept(
        &frame(2, "updates", json!({"review": {"status": "approved"}})),
        &RunFacts::default(),
    );
    assert_eq!(summary(&outer), ["updates", "lifecycle completed"]);
    assert_eq!(outer[1].params.namespace, ["review:t1"]);
}

#[test]
fn streamed_message_chunks_become_one_message() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("chat"));
    let meta = json!({"langgraph_node": "model"});
    let first = t.accept(
        &frame(
            1,
            "messages",
            json!([{"id": "m1", "type": "AIMessageChunk", "content": "hel"}, meta]),
        ),
        &RunFacts::default(),
    );
    assert_eq!(
        summary(&first),
        [
            "messages message-start",
            "messages content-block-start",
            "messages content-block-delta"
        ]
    );
    assert_eq!(first[0].params.node.as_deref(), Some("model"));
    let last = t.accept(
        &frame(
            2,
            "messages",
            json!([{"id": "m1", "content": "lo", "chunk_position": "last"}, meta]),
        ),
        &RunFacts::default(),
    );
    assert_eq!(
        summary(&last),
        [
            "messages content-block-delta",
            "messages content-block-finish",
            "messages message-finish"
        ]
    );
    assert_eq!(last[1].params.data["content"]["text"], "hello");
    // The node's returned message was streamed already: not sent again.
    let update = json!({"model": {"messages": [{"id": "m1", "type": "ai", "content": "hello"}]}});
    let updates = t.accept(&frame(3, "updates", update), &RunFacts::default());
    assert_eq!(summary(&updates), ["updates"]);
}

#[test]
fn a_queued_run_starts_when_the_one_before_it_is_done() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("echo"));
    assert!(t.accept(&created(1, NEXT), &graph("steps")).is_empty());
    let handover = t.accept(&done(2, RUN), &ended(RunStatus::Success));
    assert_eq!(
        summary(&handover),
        ["lifecycle completed", "lifecycle running"]
    );
    assert_eq!(handover[1].event_id, format!("synth:{NEXT}:lc||running"));
    assert_eq!(handover[1].params.data["graph_name"], "steps");
    let cancelled = t.accept(&done(3, NEXT), &ended(RunStatus::Cancelled));
    assert_eq!(cancelled[0].params.data["event"], "failed");
}

#[test]
fn state_updates_and_internal_records_give_nothing() {
    let mut t = Translator::default();
    assert!(
        t.accept(&frame(0, "state_update", json!({})), &RunFacts::default())
            .is_empty()
    );
    assert!(
        t.accept(&frame(1, "__outcome__", json!({})), &RunFacts::default())
            .is_empty()
    );
}

#[test]
fn tool_events_travel_as_langgraph_sends_them() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("agent"));
    let started = json!({"event": "tool-started", "tool_call_id": "c1", "tool_name": "search",
                         "input": {"q": "cats"}});
    let events = t.accept(
        &frame(1, "tools|tools:7", started.clone()),
        &RunFacts::default(),
    );
    assert_eq!(
        summary(&events),
        ["lifecycle started", "tools tool-started"]
    );
    assert_eq!(events[1].params.namespace, ["tools:7"]);
    assert_eq!(events[1].params.data, started);
}

#[test]
fn a_checkpoint_becomes_its_envelope() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("steps"));
    let snapshot = json!({
        "config": {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c2"}},
        "parent_config": {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}},
        "values": {"count": 1}, "metadata": {"source": "loop", "step": 1}, "next": [], "tasks": [],
    });
    let events = t.accept(&frame(1, "checkpoints", snapshot), &RunFacts::default());
    assert_eq!(summary(&events), ["checkpoints"]);
    assert_eq!(
        events[0].params.data,
        json!({"id": "c2", "parent_id": "c1", "step": 1, "source": "loop"})
    );
    assert_eq!(events[0].event_id, format!("synth:{RUN}:checkpoint||c2"));
    let first = json!({"config": {"configurable": {"checkpoint_id": "c0"}}, "parent_config": null,
                       "metadata": {"source": "input", "step": -1}});
    let events = t.accept(&frame(2, "checkpoints", first), &RunFacts::default());
    assert_eq!(
        events[0].params.data,
        json!({"id": "c0", "step": -1, "source": "input"})
    );
}

#[test]
fn a_named_custom_frame_is_a_custom_event_carrying_its_name() {
    let mut t = Translator::default();
    t.accept(&created(0, RUN), &graph("agent"));
    let events = t.accept(
        &frame(1, "custom:progress", json!({"pct": 50})),
        &RunFacts::default(),
    );
    assert_eq!(summary(&events), ["custom"]);
    assert_eq!(
        events[0].params.data,
        json!({"name": "progress", "payload": {"pct": 50}})
    );
}
