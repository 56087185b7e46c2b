//! Webhooks through the server binary: at-least-once across a crash (deliveries
//! committed by an instance killed before its receiver acknowledged them are sent by
//! the next boot), and the configuration's address guard as the deliveries route
//! reports it.

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::json;
use support::{ConfigFile, Database, request, spawn, start_with};
use tokio::sync::watch;

/// A receiver that holds every request unanswered until it is opened, and records
/// which deliveries it acknowledged: those answered 2xx, once opened.
#[derive(Clone)]
struct Receiver {
    arrived: Arc<Mutex<Vec<String>>>,
    acknowledged: Arc<Mutex<BTreeSet<String>>>,
    open: watch::Sender<bool>,
}

async fn receive(State(receiver): State<Receiver>, headers: HeaderMap) -> StatusCode {
    let id = headers
        .get("x-service-delivery-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    receiver.arrived.lock().unwrap().push(id.clone());
    let mut open = receiver.open.subscribe();
    if *open.borrow_and_update() {
        receiver.acknowledged.lock().unwrap().insert(id);
        return StatusCode::OK;
    }
    // Held until opened, then refused: its sender was killed meanwhile (the server
    // may not notice the closed connection, so this must never count as an answer).
    let _ = open.wait_for(|open| *open).await;
    StatusCode::SERVICE_UNAVAILABLE
}

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deliveries_unacknowledged_when_the_server_is_killed_arrive_after_the_next_boot() {
    let database = Database::create("webhook_crash").await;
    let (open, _) = watch::channel(false);
    let receiver = Receiver {
        arrived: Arc::default(),
        acknowledged: Arc::default(),
        open,
    };
    let app = axum::Router::new()
        .route("/hook", post(receive))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // A short per-POST timeout keeps the dead instance's attempt leases short.
    let env = [
        ("SERVICE_WEBHOOK_TIMEOUT_MS", "1000"),
        ("SERVICE_WEBHOOK_SECRET", "crash-test"),
    ];
    let mut first = start_with(&database.url(), &env);
    let runs = 4;
    let mut created = Vec::new();
    for i in 0..runs {
        let thread = request(&first, "POST", "/threads", Some(json!({})))["thread_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let body = json!({
            "assistant_id": "echo",
            "input": {"messages": [{"type": "human", "content": format!("m{i}")}]},
            "webhook": hook,
        });
        let run = request(
            &first,
            "POST",
            &format!("/threads/{thread}/runs"),
            Some(body),
        );
        created.push((thread, run["run_id"].as_str().unwrap().to_owned()));
    }
    // Every run settled and its first attempt reached the receiver, which holds it.
    wait_until(
        "every first attempt arrives",
        Duration::from_secs(30),
        || receiver.arrived.lock().unwrap().len() >= runs,
    )
    .await;
    let sent: BTreeSet<String> = receiver.arrived.lock().unwrap().iter().cloned().collect();
    assert_eq!(sent.len(), runs, "one delivery per run: {sent:?}");

    // SIGKILL: no shutdown path runs, the attempts in flight are never acknowledged.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    receiver.open.send_replace(true);
    assert!(receiver.acknowledged.lock().unwrap().is_empty());

    let second = start_with(&database.url(), &env);
    wait_until(
        "every delivery is acknowledged after the reboot",
        Duration::from_secs(60),
        || *receiver.acknowledged.lock().unwrap() == sent,
    )
    .await;
    for (thread, run) in &created {
        let deliveries = request(
            &second,
            "GET",
            &format!("/threads/{thread}/runs/{run}/deliveries"),
            None,
        );
        let delivery = &deliveries.as_array().unwrap()[0];
        // The row may still be recording its acknowledgement.
        assert!(
            ["delivering", "delivered"].contains(&delivery["status"].as_str().unwrap()),
            "{delivery}"
        );
        assert!(delivery["attempt"].as_u64().unwrap() >= 2, "{delivery}");
        assert!(
            delivery.get("payload").is_none(),
            "listing never shows the payload"
        );
    }
    drop(second);
    database.drop().await;
}

#[tokio::test]
async fn a_langgraph_json_with_disable_private_ips_refuses_a_loopback_receiver() {
    let arrived = Arc::new(Mutex::new(0_usize));
    let app = axum::Router::new()
        .route(
            "/hook",
            post(|State(arrived): State<Arc<Mutex<usize>>>| async move {
                *arrived.lock().unwrap() += 1;
                StatusCode::OK
            }),
        )
        .with_state(Arc::clone(&arrived));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!(
        "http://localhost:{}/hook",
        listener.local_addr().unwrap().port()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let config = ConfigFile::write(
        "private-ips",
        &json!({"webhooks": {"url": {"disable_private_ips": true}}}),
    );
    let server = spawn(&["dev", "--port", "0", "--config", &config.path()], &[]);
    let thread = request(&server, "POST", "/threads", Some(json!({})))["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = request(
        &server,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "echo", "input": {}, "webhook": hook})),
    )["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/threads/{thread}/runs/{run}/deliveries");
    let mut dead = None;
    wait_until("the delivery is dead", Duration::from_secs(30), || {
        let listed = request(&server, "GET", &path, None);
        dead = listed
            .as_array()
            .and_then(|rows| rows.first())
            .filter(|row| row["status"] == "dead")
            .cloned();
        dead.is_some()
    })
    .await;
    let dead = dead.unwrap();
    assert_eq!(dead["last_error"], "refused by policy: loopback address");
    assert_eq!(dead["attempt"], 1);
    assert_eq!(*arrived.lock().unwrap(), 0, "never sent");
}
