//! Stateless runs, the threads runs make, and run streams.

use crate::support::*;

#[tokio::test]
async fn a_stateless_run_deletes_its_thread_once_settled_yet_its_result_stays_answerable() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let input = json!({"messages": [{"type": "human", "content": "once"}]});
    let run = unscoped(&engine)
        .runs()
        .create(RunTarget::Stateless, run_body("echo", input))
        .await
        .unwrap();
    let body = result_of(&engine, run.run_id).await;
    assert_eq!(body["messages"][1]["content"], "echo: once");
    thread_gone(&engine, run.thread_id).await;

    let mut kept = run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": "kept"}]}),
    );
    kept.on_completion = Some(service_types::OnCompletion::Keep);
    let run = unscoped(&engine)
        .runs()
        .create(RunTarget::Stateless, kept)
        .await
        .unwrap();
    result_of(&engine, run.run_id).await;
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
    // A kept thread's checkpoints are in the saver (only a discarded one's stay with
    // its run), so its state reads back.
    let state = unscoped(&engine)
        .threads()
        .state(run.thread_id, None, false)
        .await
        .unwrap();
    assert_eq!(state.values["messages"][1]["content"], "echo: kept");
    let thread = unscoped(&engine)
        .threads()
        .get(run.thread_id)
        .await
        .unwrap();
    // Created naming the graph and assistant of its run, like a thread a run patched.
    assert_eq!(thread.metadata["graph_id"], "echo");
    assert_eq!(
        thread.metadata["assistant_id"],
        run.assistant_id.to_string().as_str()
    );
}

#[tokio::test]
async fn a_watched_stateless_run_answers_even_after_the_bus_forgot_it() {
    // The bus keeps one finished run; a waiter that subscribed only after its run ended
    // and dropped out of that retention had nothing left to read (a 404 under load).
    let mut config = EngineConfig::default();
    config.bus.max_retained_topics = 1;
    let Harness { engine, .. } = started(config).await;
    let input = json!({"messages": [{"type": "human", "content": "watched"}]});
    let (run, subscription) = unscoped(&engine)
        .runs()
        .create_watched(RunTarget::Stateless, run_body("echo", input))
        .await
        .unwrap();
    // Settled and cleaned up: a stateless run's row goes with its thread.
    thread_gone(&engine, run.thread_id).await;
    for _ in 0..2 {
        let (_other, watching) = unscoped(&engine)
            .runs()
            .create_watched(
                RunTarget::Stateless,
                run_body("echo", json!({"messages": []})),
            )
            .await
            .unwrap();
        unscoped(&engine).runs().wait(watching).await;
    }

    // Without the subscription taken at creation, the result is gone.
    let late = result_of(&engine, run.run_id).await;
    assert_eq!(late["__error__"]["message"], "404: Run not found");
    let body = unscoped(&engine).runs().wait(subscription).await;
    assert_eq!(body["messages"][1]["content"], "echo: watched");
}

#[tokio::test]
async fn a_thread_made_by_its_run_names_the_graph_and_is_idle_after_it() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = Uuid::now_v7();
    let mut body = run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": "new"}]}),
    );
    body.if_not_exists = Some(service_types::IfNotExists::Create);
    let (run, watching) = unscoped(&engine)
        .runs()
        .create_watched(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    assert_eq!(run.thread_id, thread);
    // The run's metadata takes in its new thread's, which names the graph.
    assert_eq!(run.metadata["graph_id"], "echo");
    let result = unscoped(&engine).runs().wait(watching).await;
    assert_eq!(result["messages"][1]["content"], "echo: new");
    assert_eq!(settled(&engine, &run).await.status, RunStatus::Success);
    let made = eventually(|| async {
        let made = unscoped(&engine).threads().get(thread).await.ok()?;
        (made.status == ThreadStatus::Idle).then_some(made)
    })
    .await;
    assert_eq!(made.metadata["graph_id"], "echo");
    assert_eq!(
        made.metadata["assistant_id"],
        run.assistant_id.to_string().as_str()
    );

    // Now an existing thread: the next run takes the ordinary path.
    let mut again = run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": "again"}]}),
    );
    again.if_not_exists = Some(service_types::IfNotExists::Create);
    let second = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), again)
        .await
        .unwrap();
    assert_eq!(settled(&engine, &second).await.status, RunStatus::Success);
    let values = unscoped(&engine)
        .threads()
        .get(thread)
        .await
        .unwrap()
        .values
        .unwrap();
    assert_eq!(values["messages"].as_array().unwrap().len(), 4);

    // And its multitask strategy holds: a busy thread rejects.
    running_slow_run(&engine, thread).await;
    let mut rejected = run_body("echo", json!({}));
    rejected.if_not_exists = Some(service_types::IfNotExists::Create);
    rejected.multitask_strategy = Some(MultitaskStrategy::Reject);
    let error = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), rejected)
        .await
        .unwrap_err();
    assert_eq!(error.kind, service_engine::ErrorKind::Conflict);
}

/// The frames of a run's topic up to its end (internal records left out).
async fn frames(mut subscription: service_engine::bus::Subscription) -> Vec<(String, Value)> {
    use futures::StreamExt;
    let mut frames = Vec::new();
    while let Some(delivery) = subscription.next().await {
        if let service_engine::bus::Delivery::Frame(frame) = delivery
            && !frame.is_internal()
        {
            let data = serde_json::from_slice(&frame.data).expect("JSON frame");
            frames.push((frame.event, data));
        }
    }
    frames
}

/// A run's stream starts with its `metadata` frame as soon as the run is created, also
/// while it waits to start; a run that executes sends it once.
#[tokio::test]
async fn a_run_stream_starts_with_metadata_before_the_run_starts() {
    let Harness { engine, .. } = started(EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let mut delayed = run_body("echo", json!({"messages": []}));
    delayed.after_seconds = Some(30.0);
    let (run, watched) = unscoped(&engine)
        .runs()
        .create_watched(RunTarget::Thread(thread), delayed)
        .await
        .unwrap();
    let mut subscription = watched.into_frames();
    let first = tokio::time::timeout(
        Duration::from_secs(5),
        futures::StreamExt::next(&mut subscription),
    )
    .await
    .expect("a frame while the run waits")
    .expect("a frame");
    let service_engine::bus::Delivery::Frame(first) = first else {
        panic!("a frame, not {first:?}");
    };
    assert_eq!(first.event, "metadata");
    assert_eq!(
        serde_json::from_slice::<Value>(&first.data).unwrap(),
        json!({"run_id": run.run_id, "attempt": 1})
    );
    let waiting = unscoped(&engine)
        .runs()
        .get(thread, run.run_id)
        .await
        .unwrap();
    assert_eq!(waiting.status, RunStatus::Pending);

    let (run, subscription) = unscoped(&engine)
        .runs()
        .create_watched(
            RunTarget::Stateless,
            run_body("echo", json!({"messages": []})),
        )
        .await
        .unwrap();
    let frames = frames(subscription.into_frames()).await;
    let events: Vec<&str> = frames.iter().map(|(event, _)| event.as_str()).collect();
    assert_eq!(events.first(), Some(&"metadata"));
    assert_eq!(events.iter().filter(|e| **e == "metadata").count(), 1);
    assert!(events.contains(&"values"), "{events:?}");
    assert_eq!(frames[0].1["run_id"], json!(run.run_id));
}
