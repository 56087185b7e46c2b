//! Golden shapes: JSON captured from the reference server (`contract/examples.md`)
//! deserializes into our types and serializes back to equivalent JSON; keys the SDKs
//! omit stay omitted.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use service_types::{
    Assistant, AssistantVersion, Checkpoint, Cron, Item, Run, RunCreate, RunError, SearchItem,
    Thread, ThreadState, Timestamp,
};

/// Timestamps are equivalent when they name the same instant (the reference server
/// sometimes omits the microseconds).
fn normalize(value: Value) -> Value {
    match value {
        Value::String(text) => match Timestamp::parse(&text) {
            Some(at) if text.contains('T') => Value::String(at.to_string()),
            _ => Value::String(text),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, normalize(v))).collect())
        }
        other => other,
    }
}

fn round_trip<T: Serialize + DeserializeOwned>(captured: Value) {
    let typed: T = serde_json::from_value(captured.clone()).expect("captured JSON deserializes");
    let back = serde_json::to_value(&typed).expect("serializes");
    pretty_assertions::assert_eq!(normalize(back), normalize(captured));
}

#[test]
fn thread_after_an_interrupt_round_trips() {
    round_trip::<Thread>(json!({
        "thread_id": "77777777-0000-4000-8000-000000000001",
        "created_at": "2026-11-21T21:30:58.789293+00:00",
        "updated_at": "2026-11-21T21:30:59.758057+00:00",
        "state_updated_at": "2026-11-21T21:30:59.758057+00:00",
        "metadata": {"user": "u1", "graph_id": "interrupter", "assistant_id": "fc7dd03f-cf33-529f-91df-327d1231b64e"},
        "status": "interrupted",
        "config": {"configurable": {}},
        "values": {"messages": [{"content": "q", "type": "human"}]},
        "error": null,
        "interrupts": {"39832197-5c5e-48f4-de71-93df160ded09": [{"id": "8ee1912969ad710ee7db087fd64822eb", "value": {"question": "approve?"}}]}
    }));
}

#[test]
fn run_round_trips_and_omits_error_unless_failed() {
    let mut captured = json!({
        "run_id": "01a20005-05df-7431-a882-6ac58e21a67d",
        "thread_id": "77777777-0000-4000-8000-000000000001",
        "assistant_id": "fc7dd03f-cf33-529f-91df-327d1231b64e",
        "metadata": {"created_by": "system", "user": "u1"},
        "status": "success",
        "kwargs": {"input": null},
        "multitask_strategy": "enqueue",
        "created_at": "2026-11-21T21:30:58.911890+00:00",
        "updated_at": "2026-11-21T21:30:59.758057+00:00"
    });
    // Captured from peer 0.16.7, which predates `cancel_reason`; 0.18 always sends it,
    // null for a run nobody cancelled.
    let run: Run = serde_json::from_value(captured.clone()).unwrap();
    assert_eq!(run.cancel_reason, None);
    captured["cancel_reason"] = Value::Null;
    round_trip::<Run>(captured);
    assert!(serde_json::to_value(&run).unwrap().get("error").is_none());
}

#[test]
fn a_cancelled_run_carries_its_cancel_reason() {
    let captured = json!({
        "run_id": "01a20005-05df-7431-a882-6ac58e21a67d",
        "thread_id": "77777777-0000-4000-8000-000000000001",
        "assistant_id": "fc7dd03f-cf33-529f-91df-327d1231b64e",
        "metadata": {},
        "status": "cancelled",
        "kwargs": {"input": null},
        "multitask_strategy": "interrupt",
        "created_at": "2026-11-21T21:30:58.911890+00:00",
        "updated_at": "2026-11-21T21:30:59.758057+00:00",
        "cancel_reason": "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel"
    });
    round_trip::<Run>(captured);
}

#[test]
fn a_failed_run_carries_its_run_error() {
    let mut run: Run = serde_json::from_value(json!({
        "run_id": "01a20005-05df-7431-a882-6ac58e21a67d",
        "thread_id": "77777777-0000-4000-8000-000000000001",
        "assistant_id": "fc7dd03f-cf33-529f-91df-327d1231b64e",
        "status": "error", "created_at": "2026-11-21T21:30:58.911890+00:00",
        "updated_at": "2026-11-21T21:30:59.758057+00:00"
    }))
    .unwrap();
    run.error = Some(RunError::new("ValueError", "boom"));
    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(
        json["error"],
        json!({"error": "ValueError", "name": "ValueError", "message": "boom"})
    );
}

#[test]
fn cron_round_trips() {
    round_trip::<Cron>(json!({
        "cron_id": "01a1ffff-0000-7000-8000-000000000000",
        "assistant_id": "fe096781-5601-53d2-b2f6-0d3403f7e9ca",
        "thread_id": null, "user_id": "", "end_time": null,
        "schedule": "*/5 * * * *", "timezone": "America/New_York",
        "payload": {"assistant_id": "fe096781-5601-53d2-b2f6-0d3403f7e9ca", "schedule": "*/5 * * * *", "input": {"messages": []}, "metadata": {"m": 1}, "timezone": "America/New_York", "config": {"configurable": {"cron_id": "01a1ffff-0000-7000-8000-000000000000"}}},
        "next_run_date": "2026-11-21T21:25:00+00:00",
        "metadata": {"m": 1}, "on_run_completed": "delete", "enabled": true,
        "created_at": "2026-11-21T21:20:00.123456+00:00", "updated_at": "2026-11-21T21:20:00.123456+00:00"
    }));
}

#[test]
fn store_search_item_round_trips_with_a_null_score() {
    round_trip::<SearchItem>(json!({
        "namespace": ["users", "u2"], "key": "k2", "value": {"a": 5},
        "created_at": "2026-11-21T21:20:00.123456+00:00", "updated_at": "2026-11-21T21:20:00.123456+00:00",
        "score": null
    }));
    let item: Item = serde_json::from_value(json!({
        "namespace": ["a"], "key": "k", "value": {},
        "created_at": "2026-11-21T21:20:00.123456+00:00", "updated_at": "2026-11-21T21:20:00.123456+00:00"
    }))
    .unwrap();
    assert!(serde_json::to_value(item).unwrap().get("score").is_none());
}

#[test]
fn assistant_and_version_round_trip() {
    let assistant = json!({
        "assistant_id": "fe096781-5601-53d2-b2f6-0d3403f7e9ca", "graph_id": "agent",
        "config": {}, "context": {}, "metadata": {"created_by": "system"}, "name": "agent",
        "created_at": "2026-11-21T21:20:00.123456+00:00", "updated_at": "2026-11-21T21:20:00.123456+00:00",
        "version": 1, "description": null
    });
    round_trip::<Assistant>(assistant);
    round_trip::<AssistantVersion>(json!({
        "assistant_id": "fe096781-5601-53d2-b2f6-0d3403f7e9ca", "version": 2, "graph_id": "agent",
        "config": {"configurable": {"x": 1}, "tags": ["t"]}, "context": {"x": 1}, "metadata": {},
        "created_at": "2026-11-21T21:20:00.123456+00:00", "name": "agent", "description": "d"
    }));
}

#[test]
fn thread_state_of_an_empty_thread_matches_the_reference() {
    let empty = json!({"values": {}, "next": [], "tasks": [], "metadata": null, "created_at": null,
        "checkpoint": null, "parent_checkpoint": null, "interrupts": [], "checkpoint_id": null, "parent_checkpoint_id": null});
    round_trip::<ThreadState>(empty.clone());
    pretty_assertions::assert_eq!(serde_json::to_value(ThreadState::empty()).unwrap(), empty);
}

#[test]
fn thread_state_with_a_failed_task_round_trips() {
    round_trip::<ThreadState>(json!({
        "values": {"messages": []}, "next": ["boom"],
        "tasks": [{"id": "12a03deb-0000-4000-8000-000000000000", "name": "boom",
                   "error": "{\"error\":\"ValueError\",\"name\":\"ValueError\",\"message\":\"kaboom happened\"}",
                   "interrupts": [], "checkpoint": null, "state": null, "result": null}],
        "checkpoint": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "1f1e5f1a-5489-690d-8000-474ba6992803"},
        "parent_checkpoint": null, "metadata": {"source": "loop", "step": 1},
        "created_at": "2026-11-21T21:20:00.123456+00:00", "interrupts": [],
        "checkpoint_id": "1f1e5f1a-5489-690d-8000-474ba6992803", "parent_checkpoint_id": null
    }));
}

#[test]
fn checkpoint_omits_an_absent_map() {
    let checkpoint = json!({"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"});
    round_trip::<Checkpoint>(checkpoint);
}

#[test]
fn run_create_bodies_the_sdks_send_are_read() {
    let python = json!({"assistant_id": "interrupter", "input": {"messages": [{"role": "user", "content": "q"}]},
        "stream_mode": ["values", "updates"], "stream_resumable": true, "stream_subgraphs": false,
        "config": {}, "metadata": {}, "multitask_strategy": "enqueue", "if_not_exists": "create",
        "on_disconnect": "cancel", "durability": "async", "after_seconds": 1.5,
        "interrupt_before": "*", "checkpoint": {"checkpoint_ns": "", "checkpoint_id": "c"}});
    let body: RunCreate = serde_json::from_value(python).unwrap();
    assert_eq!(body.stream_modes().len(), 2);
    let js_batch_item = json!({"assistant_id": "echo", "streamMode": "values", "input": {}});
    assert!(serde_json::from_value::<RunCreate>(js_batch_item).is_ok());
}
