//! What a run's state amounts to for its thread (the mirror) and for its waiters
//! (the wait/join body).

use serde_json::{Map, Value, json};
use service_graph::StateSnapshot;
use service_store::ThreadMirror;
use service_types::ThreadStatus;

/// What a state mirrors onto its thread. `status` overrides the status derived from
/// the state (idle, or interrupted when paused).
pub(crate) fn snapshot_mirror(
    snapshot: &StateSnapshot,
    status: Option<(ThreadStatus, Option<String>)>,
) -> ThreadMirror {
    let (status, error) = status.unwrap_or_else(|| {
        let status = if snapshot.is_paused() {
            ThreadStatus::Interrupted
        } else {
            ThreadStatus::Idle
        };
        (status, None)
    });
    ThreadMirror {
        status,
        values: Some(snapshot.values.clone()),
        interrupts: pending_interrupts(snapshot),
        error,
    }
}

/// Pending interrupts of a snapshot keyed by task id.
pub(crate) fn pending_interrupts(snapshot: &StateSnapshot) -> service_types::PendingInterrupts {
    snapshot
        .tasks
        .iter()
        .filter(|task| !task.interrupts.is_empty())
        .map(|task| (task.id.clone(), task.interrupts.clone()))
        .collect()
}

/// The wait body of values and pending interrupts.
pub(crate) fn result_body(
    values: Option<Value>,
    interrupts: &service_types::PendingInterrupts,
) -> Value {
    let mut body = match values {
        Some(Value::Object(map)) => map,
        Some(other) if !other.is_null() => return other,
        _ => Map::new(),
    };
    // As in stream frames, each with a `response_schema` (null: none was declared).
    let pending: Vec<Value> = interrupts
        .values()
        .flatten()
        .map(|interrupt| json!({"value": interrupt.value, "id": interrupt.id, "response_schema": null}))
        .collect();
    if !pending.is_empty() {
        body.insert("__interrupt__".into(), Value::Array(pending));
    }
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_body_adds_pending_interrupts() {
        let mut interrupts = service_types::PendingInterrupts::new();
        interrupts.insert(
            "task".into(),
            vec![service_types::Interrupt {
                id: "i1".into(),
                value: json!({"q": 1}),
            }],
        );
        let body = result_body(Some(json!({"a": 1})), &interrupts);
        assert_eq!(
            body,
            json!({"a": 1, "__interrupt__": [{"id": "i1", "value": {"q": 1}, "response_schema": null}]})
        );
        assert_eq!(result_body(None, &Default::default()), json!({}));
    }
}
