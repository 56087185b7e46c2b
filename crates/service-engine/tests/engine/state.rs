//! Edits of a thread's state: never beside a run of the thread, and announced on the
//! thread's stream.

use service_engine::ErrorKind;
use service_engine::bus::{Delivery, Replay};
use service_types::{IfExists, Metadata, Superstep, SuperstepUpdate, ThreadStateUpdate};

use crate::support::*;

const BUSY: &str = "Thread is busy with a running job. Cannot update state.";

fn done_update() -> ThreadStateUpdate {
    ThreadStateUpdate {
        values: Some(json!({"done": true})),
        ..ThreadStateUpdate::default()
    }
}

fn metadata(value: Value) -> Metadata {
    serde_json::from_value(value).unwrap()
}

/// `POST` and `PATCH /threads/{id}/state` are refused with 409 while a run of the
/// thread is running or waits to start, and the state is left as it was; once the
/// thread is free the same edit goes through.
#[tokio::test]
async fn a_state_edit_beside_an_active_run_is_refused_409_and_changes_nothing() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let running = running_slow_run(&engine, thread).await;
    let refused = unscoped(&engine)
        .threads()
        .update_state(thread, done_update())
        .await
        .unwrap_err();
    assert_eq!(
        (refused.kind, refused.message.as_str()),
        (ErrorKind::Conflict, BUSY)
    );
    let refused = unscoped(&engine)
        .threads()
        .patch_state(thread, metadata(json!({"note": "x"})))
        .await
        .unwrap_err();
    assert_eq!(
        (refused.kind, refused.message.as_str()),
        (ErrorKind::Conflict, BUSY)
    );
    unscoped(&engine)
        .runs()
        .cancel(thread, running.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    settled(&engine, &running).await;
    let state = unscoped(&engine)
        .threads()
        .state(thread, None, false)
        .await
        .unwrap();
    assert_eq!(
        state.values.get("done"),
        None,
        "the refused edit wrote nothing"
    );

    let mut delayed = run_body("slow", json!({"delay_ms": 1}));
    delayed.after_seconds = Some(60.0);
    let waiting = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), delayed)
        .await
        .unwrap();
    let refused = unscoped(&engine)
        .threads()
        .update_state(thread, done_update())
        .await
        .unwrap_err();
    assert_eq!(
        refused.kind,
        ErrorKind::Conflict,
        "a pending run counts too"
    );
    unscoped(&engine)
        .runs()
        .cancel(thread, waiting.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    unscoped(&engine)
        .threads()
        .update_state(thread, done_update())
        .await
        .expect("no run is active now");
    let state = unscoped(&engine)
        .threads()
        .state(thread, None, false)
        .await
        .unwrap();
    assert_eq!(state.values["done"], json!(true));
}

/// A run queued after a state edit runs on the edited state: the edit's hold is
/// released, and the workers woken, when the edit ends.
#[tokio::test]
async fn a_run_after_a_state_edit_starts_and_sees_the_edit() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let first = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("echo", json!({"messages": ["a"]})),
        )
        .await
        .unwrap();
    settled(&engine, &first).await;
    let edit = ThreadStateUpdate {
        values: Some(json!({"messages": ["b"]})),
        as_node: Some("echo".into()),
        ..ThreadStateUpdate::default()
    };
    unscoped(&engine)
        .threads()
        .update_state(thread, edit)
        .await
        .unwrap();
    let next = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("echo", json!({"messages": ["c"]})),
        )
        .await
        .unwrap();
    let next = settled(&engine, &next).await;
    assert_eq!(next.status, RunStatus::Success);
    let values = unscoped(&engine)
        .threads()
        .state(thread, None, false)
        .await
        .unwrap()
        .values;
    let contents: Vec<&Value> = values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message.get("content").unwrap_or(message))
        .collect();
    assert_eq!(
        contents,
        [
            &json!("a"),
            &json!("echo: a"),
            &json!("b"),
            &json!("c"),
            &json!("echo: c")
        ]
    );
}

/// Supersteps applied when a thread is created publish `state_update` on the thread's
/// stream, as `POST /threads/{id}/state` does.
#[tokio::test]
async fn supersteps_at_thread_creation_publish_a_state_update() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread_id = Uuid::now_v7();
    let create = |supersteps| ThreadCreate {
        thread_id: Some(thread_id),
        metadata: Some(metadata(json!({"graph_id": "echo"}))),
        if_exists: Some(IfExists::DoNothing),
        supersteps,
        ..ThreadCreate::default()
    };
    unscoped(&engine)
        .threads()
        .create(create(None))
        .await
        .unwrap();
    let mut stream = unscoped(&engine)
        .threads()
        .join_stream(thread_id, Replay::Live)
        .await
        .unwrap()
        .expect("the thread's topic");
    let steps = vec![Superstep {
        updates: vec![SuperstepUpdate {
            values: Some(json!({"messages": ["hi"]})),
            command: None,
            as_node: "echo".into(),
        }],
    }];
    unscoped(&engine)
        .threads()
        .create(create(Some(steps)))
        .await
        .unwrap();
    let delivery = tokio::time::timeout(
        Duration::from_secs(5),
        futures::StreamExt::next(&mut stream),
    )
    .await
    .expect("a frame within 5 s")
    .expect("a frame");
    let Delivery::Frame(frame) = delivery else {
        panic!("a frame, not {delivery:?}");
    };
    assert_eq!(frame.event, "state_update");
    let data: Value = serde_json::from_slice(&frame.data).unwrap();
    assert_eq!(data["thread_id"], json!(thread_id));
    // The bare string became a human message with an id, as `add_messages` makes it.
    let message = &data["state"]["values"]["messages"][0];
    assert_eq!(
        (&message["type"], &message["content"]),
        (&json!("human"), &json!("hi"))
    );
    assert!(message["id"].is_string());
}
