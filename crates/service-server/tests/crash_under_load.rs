//! Fault (a): `start` on PostgreSQL killed with SIGKILL while 32 clients create runs
//! with webhooks. After the restart every run the API acknowledged exists and reaches
//! a terminal status (queued ones run, running ones are settled as lost executors),
//! and every run's webhook delivery arrives and is recorded delivered: none lost,
//! none stuck.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use support::{Database, Instance, request, start_with, try_call};

const CREATORS: usize = 32;
const TERMINAL: [&str; 4] = ["success", "error", "interrupted", "timeout"];

type Received = Arc<Mutex<BTreeSet<String>>>;

async fn receive(State(received): State<Received>, Json(payload): Json<Value>) {
    if let Some(run) = payload["run_id"].as_str() {
        received.lock().unwrap().insert(run.to_owned());
    }
}

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates runs on its own thread until the server stops answering.
fn creator(
    address: String,
    thread: String,
    hook: String,
    created: Arc<Mutex<Vec<(String, String)>>>,
    killed: Arc<AtomicBool>,
) {
    let body = json!({
        "assistant_id": "slow",
        "input": {"delay_ms": 200},
        "webhook": hook,
        "multitask_strategy": "enqueue",
    });
    while !killed.load(Ordering::Relaxed) {
        let reply = try_call(
            &address,
            "POST",
            &format!("/threads/{thread}/runs"),
            &[],
            Some(body.clone()),
            Some(Duration::from_secs(30)),
        );
        match reply {
            Ok(reply) if reply.status < 300 => {
                let run = reply.body["run_id"].as_str().unwrap().to_owned();
                created.lock().unwrap().push((thread.clone(), run));
            }
            // Refused while the process dies, or not answered: not acknowledged.
            _ => return,
        }
    }
}

fn runs_of(server: &Instance, thread: &str) -> Vec<Value> {
    request(
        server,
        "GET",
        &format!("/threads/{thread}/runs?limit=1000"),
        None,
    )
    .as_array()
    .unwrap()
    .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_under_load_settles_every_acknowledged_run_and_delivers_every_webhook() {
    let database = Database::create("crash_load").await;
    let received: Received = Arc::default();
    let app = axum::Router::new()
        .route("/hook", post(receive))
        .with_state(Arc::clone(&received));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let env = [
        ("SERVICE_WEBHOOK_TIMEOUT_MS", "2000"),
        ("SERVICE_REQUEST_LOG", "off"),
    ];
    let mut first = start_with(&database.url(), &env);
    let threads: Vec<String> = (0..CREATORS)
        .map(|_| {
            request(&first, "POST", "/threads", Some(json!({})))["thread_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let created = Arc::new(Mutex::new(Vec::new()));
    let killed = Arc::new(AtomicBool::new(false));
    let creators: Vec<_> = threads
        .iter()
        .map(|thread| {
            let (address, thread, hook) = (first.address.clone(), thread.clone(), hook.clone());
            let (created, killed) = (Arc::clone(&created), Arc::clone(&killed));
            std::thread::spawn(move || creator(address, thread, hook, created, killed))
        })
        .collect();
    // Some runs done (and delivered), some running, some queued: then SIGKILL.
    wait_until("runs are created", Duration::from_secs(30), || {
        created.lock().unwrap().len() >= 200 && !received.lock().unwrap().is_empty()
    })
    .await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    killed.store(true, Ordering::Relaxed);
    for creator in creators {
        creator.join().unwrap();
    }
    let created = created.lock().unwrap().clone();
    let delivered_before = received.lock().unwrap().len();

    let second = start_with(&database.url(), &env);
    // A run left running by the killed instance is settled once its claim is seen to
    // be free (after the recovery grace of 30 s); queued runs simply run.
    let acknowledged: BTreeSet<&str> = created.iter().map(|(_, run)| run.as_str()).collect();
    let started = Instant::now();
    let by_status = loop {
        let mut pending = 0;
        let mut seen = BTreeSet::new();
        let mut by_status = std::collections::BTreeMap::<String, usize>::new();
        for thread in &threads {
            for run in runs_of(&second, thread) {
                let id = run["run_id"].as_str().unwrap().to_owned();
                let status = run["status"].as_str().unwrap();
                if !TERMINAL.contains(&status) {
                    pending += 1;
                }
                *by_status.entry(status.to_owned()).or_default() += 1;
                seen.insert(id);
            }
        }
        let missing: Vec<&&str> = acknowledged
            .iter()
            .filter(|run| !seen.contains(**run))
            .collect();
        assert!(missing.is_empty(), "acknowledged runs exist: {missing:?}");
        if pending == 0 {
            break by_status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{pending} runs still not terminal 90 s after the restart"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let settled_in = started.elapsed();
    wait_until(
        "every acknowledged run's webhook arrives",
        Duration::from_secs(60),
        || {
            let received = received.lock().unwrap();
            acknowledged.iter().all(|run| received.contains(*run))
        },
    )
    .await;
    // None stuck: each run's delivery is recorded delivered.
    let address = second.address.clone();
    let created_for_check = created.clone();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        for (thread, run) in &created_for_check {
            loop {
                let reply = try_call(
                    &address,
                    "GET",
                    &format!("/threads/{thread}/runs/{run}/deliveries"),
                    &[],
                    None,
                    Some(Duration::from_secs(30)),
                )
                .unwrap();
                let deliveries = reply.body.as_array().cloned().unwrap_or_default();
                if !deliveries.is_empty() && deliveries.iter().all(|d| d["status"] == "delivered") {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "run {run}'s delivery is recorded delivered: {deliveries:?}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    })
    .await
    .unwrap();
    eprintln!(
        "{} runs acknowledged by {CREATORS} creators before SIGKILL ({delivered_before} delivered by then); all terminal {settled_in:.1?} after the restart ({by_status:?}), every webhook delivered",
        created.len()
    );
    drop(second);
    database.drop().await;
}
