//! Webhooks end to end on the in-memory store: runs settle, their deliveries reach a
//! real HTTP receiver on loopback, signed, retried, dead, replayed.

mod support;

use std::time::Duration;

use service_engine::ErrorKind;
use service_types::CancelAction;
use service_webhooks::{DEFAULT_TOLERANCE, Rejection, verify, verify_header};
use support::*;

fn assert_signed(received: &Received) {
    assert_eq!(
        verify(
            &received.headers,
            &received.body,
            &[SECRET],
            DEFAULT_TOLERANCE
        ),
        Ok(())
    );
    assert_eq!(
        verify(
            &received.headers,
            &received.body,
            &["other"],
            DEFAULT_TOLERANCE
        ),
        Err(Rejection::Mismatch)
    );
}

#[tokio::test]
async fn a_successful_run_delivers_its_final_state_signed() {
    let receiver = Receiver::start().await;
    let engine = memory_engine(fast_settings()).await;
    let thread = new_thread(&engine).await;
    let input = json!({"messages": [{"type": "human", "content": "hi"}]});
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("echo", input, &receiver.url),
        )
        .await
        .unwrap();
    let received = receiver.wait_for(1).await;
    let hook = &received[0];
    assert_signed(hook);
    let body = hook.json();
    assert_eq!(body["status"], "success");
    assert_eq!(body["run_id"], json!(run.run_id));
    assert_eq!(body["thread_id"], json!(thread));
    assert_eq!(body["assistant_id"], json!(run.assistant_id));
    assert_eq!(body["values"]["messages"][1]["content"], "echo: hi");
    for field in [
        "run_started_at",
        "run_ended_at",
        "webhook_sent_at",
        "metadata",
    ] {
        assert!(body.get(field).is_some(), "{field} missing from {body}");
    }
    assert!(body.get("error").is_none() && body.get("interrupts").is_none());
    assert!(
        body.get("kwargs").is_none(),
        "the request's options are not sent"
    );
    assert_eq!(body["created_at"], json!(run.created_at));
    assert_eq!(hook.header("x-service-attempt"), Some("1"));
    assert_eq!(hook.header("content-type"), Some("application/json"));

    let delivery = delivery_in(&engine, &run, DeliveryStatus::Delivered).await;
    assert_eq!(
        hook.header("x-service-delivery-id"),
        Some(delivery.delivery_id.to_string().as_str())
    );
    assert_eq!(delivery.attempt, 1);
    assert!(!delivery.replayable, "the payload is cleared on success");
    assert_eq!(
        unscoped(&engine)
            .deliveries()
            .replay(thread, run.run_id, delivery.delivery_id)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Conflict,
        "a delivered delivery is not replayed"
    );
}

#[tokio::test]
async fn failed_timed_out_and_interrupted_runs_report_their_status() {
    let receiver = Receiver::start().await;
    let config = EngineConfig {
        run_timeout: Some(Duration::from_millis(200)),
        ..EngineConfig::default()
    };
    let engine = memory_engine_with(fast_settings(), config).await;

    let failing = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body("fail", json!({}), &receiver.url),
        )
        .await
        .unwrap();
    let slow = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body("slow", json!({"delay_ms": 5_000}), &receiver.url),
        )
        .await
        .unwrap();
    let thread = new_thread(&engine).await;
    let approval = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("approval", json!({"topic": "x"}), &receiver.url),
        )
        .await
        .unwrap();

    let received = receiver.wait_for(3).await;
    let body_of = |run: &Run| {
        received
            .iter()
            .map(Received::json)
            .find(|body| body["run_id"] == json!(run.run_id))
            .unwrap_or_else(|| panic!("no delivery for {}", run.run_id))
    };
    let failed = body_of(&failing);
    assert_eq!(failed["status"], "error");
    assert_eq!(failed["error"], "boom", "a plain message string");
    let timed_out = body_of(&slow);
    assert_eq!(timed_out["status"], "timeout");
    assert!(timed_out["error"].as_str().unwrap().contains("200 ms"));
    let paused = body_of(&approval);
    assert_eq!(paused["status"], "interrupted");
    let interrupts = paused["interrupts"]
        .as_object()
        .expect("interrupts by task id");
    let (_, pending) = interrupts.iter().next().expect("one interrupted task");
    assert!(pending[0]["id"].is_string() && pending[0].get("value").is_some());
    assert!(paused.get("error").is_none());
}

#[tokio::test]
async fn a_run_cancelled_while_running_delivers_and_one_cancelled_while_pending_does_not() {
    let receiver = Receiver::start().await;
    let engine = memory_engine(fast_settings()).await;
    let thread = new_thread(&engine).await;
    let running = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("slow", json!({"delay_ms": 60_000}), &receiver.url),
        )
        .await
        .unwrap();
    eventually(|| async {
        let run = unscoped(&engine)
            .runs()
            .get(thread, running.run_id)
            .await
            .ok()?;
        (run.status == RunStatus::Running).then_some(())
    })
    .await;
    let queued = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            RunCreate {
                multitask_strategy: Some(service_types::MultitaskStrategy::Enqueue),
                ..run_body("echo", json!({}), &receiver.url)
            },
        )
        .await
        .unwrap();
    unscoped(&engine)
        .runs()
        .cancel(thread, queued.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    unscoped(&engine)
        .runs()
        .cancel(thread, running.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    let received = receiver.wait_for(1).await;
    assert_eq!(received[0].json()["status"], "cancelled");
    assert_eq!(received[0].json()["run_id"], json!(running.run_id));
    // The pending run never started: it has no delivery and nothing more arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1);
    let none = unscoped(&engine)
        .deliveries()
        .list(thread, queued.run_id, &Default::default())
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[tokio::test]
async fn a_failed_attempt_is_retried_with_the_same_delivery_id() {
    let receiver = Receiver::start().await;
    receiver.plan([Answer::Status(500), Answer::After(Duration::from_secs(2))]);
    let engine = memory_engine(fast_settings()).await;
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body("echo", json!({}), &receiver.url),
        )
        .await
        .unwrap();
    // 500, then no answer within the 300 ms timeout, then 200.
    let received = receiver.wait_for(3).await;
    let ids: Vec<_> = received
        .iter()
        .map(|r| r.header("x-service-delivery-id").unwrap().to_owned())
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "stable across retries");
    let attempts: Vec<_> = received
        .iter()
        .map(|r| r.header("x-service-attempt").unwrap().to_owned())
        .collect();
    assert_eq!(attempts, ["1", "2", "3"]);
    for hook in &received {
        assert_signed(hook);
    }
    let sent_at: Vec<_> = received
        .iter()
        .map(|r| r.json()["webhook_sent_at"].clone())
        .collect();
    assert_ne!(
        sent_at[0], sent_at[2],
        "webhook_sent_at is this attempt's time"
    );
    let mut first = received[0].json();
    let mut last = received[2].json();
    first.as_object_mut().unwrap().remove("webhook_sent_at");
    last.as_object_mut().unwrap().remove("webhook_sent_at");
    assert_eq!(
        first, last,
        "the stored body is sent again, not re-rendered"
    );

    let delivery = delivery_in(&engine, &run, DeliveryStatus::Delivered).await;
    assert_eq!(delivery.attempt, 3);
    assert!(delivery.last_error.unwrap().contains("within 300 ms"));
}

#[tokio::test]
async fn a_delivery_dies_after_its_last_attempt_and_a_replay_sends_it_again() {
    let receiver = Receiver::start().await;
    receiver.plan([
        Answer::Status(500),
        Answer::Status(503),
        Answer::Status(502),
    ]);
    let engine = memory_engine(fast_settings()).await;
    let thread = new_thread(&engine).await;
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("echo", json!({}), &receiver.url),
        )
        .await
        .unwrap();
    let dead = delivery_in(&engine, &run, DeliveryStatus::Dead).await;
    assert_eq!(dead.attempt, 3);
    assert_eq!(
        dead.last_error.as_deref(),
        Some("the receiver answered HTTP 502")
    );
    assert!(dead.replayable, "a dead delivery keeps its payload");
    assert_eq!(receiver.received().len(), 3);

    // Not another run's delivery: 404.
    let other = unscoped(&engine)
        .deliveries()
        .replay(thread, Uuid::now_v7(), dead.delivery_id)
        .await
        .unwrap_err();
    assert_eq!(other.kind, ErrorKind::NotFound);
    let replayed = unscoped(&engine)
        .deliveries()
        .replay(thread, run.run_id, dead.delivery_id)
        .await
        .unwrap();
    assert_eq!(replayed.status, DeliveryStatus::Pending);
    let received = receiver.wait_for(4).await;
    assert_eq!(received[3].header("x-service-attempt"), Some("4"));
    let delivered = delivery_in(&engine, &run, DeliveryStatus::Delivered).await;
    assert_eq!(delivered.delivery_id, dead.delivery_id);
}

#[tokio::test]
async fn an_oversized_body_has_its_values_truncated_inside_the_signed_body() {
    let receiver = Receiver::start().await;
    let settings = WebhookSettings {
        max_payload_bytes: 4096,
        ..fast_settings()
    };
    let engine = memory_engine(settings).await;
    let big = "x".repeat(20_000);
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body(
                "echo",
                json!({"messages": [{"type": "human", "content": big}]}),
                &receiver.url,
            ),
        )
        .await
        .unwrap();
    let hook = &receiver.wait_for(1).await[0];
    assert_signed(hook);
    let body = hook.json();
    assert_eq!(body["values"]["__truncated__"], true);
    assert!(body["values"]["original_bytes"].as_u64().unwrap() > 40_000);
    assert!(hook.body.len() <= 4096, "{} bytes", hook.body.len());
    let delivery = delivery_in(&engine, &run, DeliveryStatus::Delivered).await;
    assert!(delivery.payload_truncated);
}

#[tokio::test]
async fn a_host_outside_the_allow_list_is_recorded_dead_and_never_sent() {
    let receiver = Receiver::start().await;
    let settings = WebhookSettings {
        allowed_hosts: Some(vec!["hooks.example.com".into()]),
        ..fast_settings()
    };
    let engine = memory_engine(settings).await;
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body("echo", json!({}), &receiver.url),
        )
        .await
        .unwrap();
    let dead = delivery_in(&engine, &run, DeliveryStatus::Dead).await;
    assert!(
        dead.last_error
            .as_deref()
            .unwrap()
            .contains("not in allowed_hosts"),
        "{:?}",
        dead.last_error
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(receiver.received().is_empty());
}

#[tokio::test]
async fn urls_are_checked_at_creation() {
    let settings = WebhookSettings {
        require_https: true,
        ..fast_settings()
    };
    let engine = memory_engine(settings).await;
    for bad in ["/relative", "ftp://example.com/x", "http://example.com/x"] {
        let error = unscoped(&engine)
            .runs()
            .create(RunTarget::Stateless, run_body("echo", json!({}), bad))
            .await
            .unwrap_err();
        assert_eq!(error.kind, ErrorKind::Unprocessable, "{bad}");
        assert!(
            error.message.starts_with("Invalid webhook URL"),
            "{}",
            error.message
        );
    }
}

#[tokio::test]
async fn a_reply_declaration_is_captured_and_replayed_verbatim_on_retries() {
    let receiver = Receiver::start().await;
    receiver.plan([Answer::Status(500)]);
    let engine = memory_engine(fast_settings()).await;
    let body = RunCreate {
        stream_mode: Some(serde_json::from_value(json!(["values", "custom"])).unwrap()),
        ..run_body("reply", json!({"text": "hi"}), &receiver.url)
    };
    unscoped(&engine)
        .runs()
        .create(RunTarget::Stateless, body)
        .await
        .unwrap();
    let received = receiver.wait_for(2).await;
    for hook in &received {
        assert_eq!(hook.json()["reply"], json!({"text": "reply to hi"}));
    }

    // Without the custom stream mode nothing is captured.
    unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body("reply", json!({"text": "hi"}), &receiver.url),
        )
        .await
        .unwrap();
    let received = receiver.wait_for(3).await;
    assert!(received[2].json().get("reply").is_none());
}

#[tokio::test]
async fn cron_firings_deliver() {
    let receiver = Receiver::start().await;
    let clock = std::sync::Arc::new(service_store::ManualClock::new(
        service_types::Timestamp::from_unix_micros(1_800_000_000_000_000),
    ));
    let dyn_clock: std::sync::Arc<dyn Clock> = clock.clone();
    let store = service_store_memory::memory_store(service_store_memory::MemoryOptions::new(
        dyn_clock.clone(),
    ));
    let engine =
        engine_with_clock(store, fast_settings(), EngineConfig::default(), dyn_clock).await;
    let cron = unscoped(&engine)
        .crons()
        .create(
            None,
            service_types::CronCreate {
                schedule: "*/5 * * * *".into(),
                run: run_body("echo", json!({}), &receiver.url),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    clock.set(cron.next_run_date.expect("next occurrence"));
    engine.system().fire_due_crons().await;
    let hook = &receiver.wait_for(1).await[0];
    assert_eq!(hook.json()["status"], "success");
    // Signed at the engine's clock, which this test set.
    let signature = hook.header("x-service-signature").unwrap();
    let now = clock.now().unix_micros() / 1_000_000;
    assert_eq!(
        verify_header(signature, &hook.body, &[SECRET], DEFAULT_TOLERANCE, now),
        Ok(())
    );
}

#[tokio::test]
async fn a_store_without_deliveries_sends_one_unsigned_best_effort_post() {
    let receiver = Receiver::start().await;
    receiver.plan([Answer::Status(500)]);
    let full = service_store_memory::memory_store(service_store_memory::MemoryOptions::new(
        std::sync::Arc::new(SystemClock),
    ));
    let store = Store::new(service_store::StoreParts {
        deliveries: None,
        ..full.parts()
    });
    let engine = engine_on(store, fast_settings(), EngineConfig::default()).await;
    unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body("echo", json!({}), &receiver.url),
        )
        .await
        .unwrap();
    let hook = &receiver.wait_for(1).await[0];
    assert_eq!(hook.json()["status"], "success");
    for header in [
        "x-service-delivery-id",
        "x-service-attempt",
        "x-service-signature",
    ] {
        assert!(hook.header(header).is_none(), "{header} sent");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1, "not retried");
}

#[tokio::test]
async fn a_dead_delivery_loses_its_payload_after_retention_and_can_no_longer_be_replayed() {
    let receiver = Receiver::start().await;
    receiver.plan([Answer::Status(500)]);
    let settings = WebhookSettings {
        max_attempts: 1,
        retain: Duration::ZERO,
        purge_interval: Duration::from_millis(20),
        ..fast_settings()
    };
    let engine = memory_engine(settings).await;
    let thread = new_thread(&engine).await;
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("echo", json!({}), &receiver.url),
        )
        .await
        .unwrap();
    let dead = delivery_in(&engine, &run, DeliveryStatus::Dead).await;
    let purged = eventually(|| async {
        let listed = unscoped(&engine)
            .deliveries()
            .list(thread, run.run_id, &Default::default())
            .await
            .unwrap();
        listed.into_iter().find(|delivery| !delivery.replayable)
    })
    .await;
    assert_eq!(purged.delivery_id, dead.delivery_id);
    let error = unscoped(&engine)
        .deliveries()
        .replay(thread, run.run_id, dead.delivery_id)
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Conflict);
    assert!(error.message.contains("purged"), "{}", error.message);
}

#[tokio::test]
async fn shutdown_does_not_wait_out_a_receiver_that_never_answers() {
    let receiver = Receiver::start().await;
    receiver.plan([Answer::After(Duration::from_secs(120))]);
    let settings = WebhookSettings {
        timeout: Duration::from_secs(60),
        ..fast_settings()
    };
    let engine = memory_engine(settings).await;
    unscoped(&engine)
        .runs()
        .create(
            RunTarget::Stateless,
            run_body("echo", json!({}), &receiver.url),
        )
        .await
        .unwrap();
    receiver.wait_for(1).await;
    // The attempt hangs for its 60 s timeout; shutdown keeps to its own budget.
    tokio::time::timeout(Duration::from_secs(20), engine.shutdown())
        .await
        .expect("shutdown ends while the attempt still hangs");
}
