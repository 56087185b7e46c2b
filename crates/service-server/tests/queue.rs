//! Two instances on one PostgreSQL database and one Redis (REDIS_URL, default
//! redis://127.0.0.1:6379): a run's stream reaches a client through either instance,
//! from its first frame, and a reconnect with `Last-Event-ID` to the other instance
//! gets exactly the frames after the last one seen.

mod support;

use serde_json::{Value, json};
use support::{Database, Instance, call, request, start_with};

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// One SSE frame: its id (when sent), event name and data.
#[derive(Clone, Debug, PartialEq)]
struct Event {
    id: Option<String>,
    event: String,
    data: Value,
}

/// The frames of a finished stream from the instance at `address`.
fn events(address: &str, path: &str, last_event_id: &str) -> Vec<Event> {
    let reply = call_raw(address, path, last_event_id);
    let mut events = Vec::new();
    for block in reply.replace("\r\n", "\n").split("\n\n") {
        let (mut id, mut event, mut data) = (None, None, None);
        for line in block.lines() {
            if let Some(value) = line.strip_prefix("id: ") {
                id = Some(value.to_owned());
            } else if let Some(value) = line.strip_prefix("event: ") {
                event = Some(value.to_owned());
            } else if let Some(value) = line.strip_prefix("data: ") {
                data = serde_json::from_str(value).ok();
            }
        }
        if let (Some(event), Some(data)) = (event, data) {
            events.push(Event { id, event, data });
        }
    }
    events
}

/// The body of a GET with `Last-Event-ID`, read to its end.
fn call_raw(address: &str, path: &str, last_event_id: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nLast-Event-ID: {last_event_id}\r\n\r\n"
    )
    .unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("the stream ends");
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    body.to_owned()
}

/// A thread made through `instance`; its id.
fn new_thread(instance: &Instance) -> String {
    request(instance, "POST", "/threads", Some(json!({})))["thread_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn instances(database: &Database) -> (Instance, Instance) {
    let url = database.url();
    let env = [("REDIS_URL", redis_url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    (start_with(&url, &env), start_with(&url, &env))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_streams_through_either_instance_and_replays_across_them() {
    let database = Database::create("queue").await;
    let (a, b) = instances(&database);
    let thread = new_thread(&a);
    let run = request(
        &a,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({
            "assistant_id": "steps",
            "input": {"n": 20},
            "stream_mode": ["values", "custom"],
            "stream_resumable": true,
        })),
    );
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let path = format!("/threads/{thread}/runs/{run_id}/stream");

    // Joined through B from the start: every frame, whichever instance executes it.
    let through_b = events(&b.address, &path, "-1");
    assert_eq!(
        through_b.first().map(|e| e.event.as_str()),
        Some("metadata")
    );
    assert_eq!(through_b[0].data["run_id"], json!(run_id));
    let steps: Vec<i64> = through_b
        .iter()
        .filter(|e| e.event == "custom")
        .filter_map(|e| e.data["step"].as_i64())
        .collect();
    assert_eq!(steps, (1..=20).collect::<Vec<_>>());
    let last = through_b.last().unwrap();
    assert_eq!(last.data["count"], json!(20), "ends with the final values");

    // The same frames, with the same ids, through A.
    let through_a = events(&a.address, &path, "-1");
    assert_eq!(through_a, through_b);

    // A client that saw frames up to k on A reconnects to B: exactly the rest.
    for k in [0, 7, through_a.len() - 2] {
        let seen = through_a[k].id.clone().expect("resumable frames carry ids");
        let rest = events(&b.address, &path, &seen);
        assert_eq!(rest, through_a[k + 1..].to_vec(), "after frame {k}");
    }

    // A stateless wait on A answers, whichever instance runs it.
    let waited = call(
        &a,
        "POST",
        "/runs/wait",
        &[],
        Some(json!({"assistant_id": "steps", "input": {"n": 3}})),
    );
    assert_eq!(waited.body["count"], json!(3));
    database.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_streamed_from_another_instance_is_followed_live_to_its_end() {
    let database = Database::create("queue_live").await;
    let (a, b) = instances(&database);
    let thread = new_thread(&a);
    let run = request(
        &a,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "slow", "input": {"delay_ms": 700}})),
    );
    let run_id = run["run_id"].as_str().unwrap();
    // Joined on B while the run still sleeps: the live frames, then the end.
    let joined = events(
        &b.address,
        &format!("/threads/{thread}/runs/{run_id}/stream"),
        "-1",
    );
    let values = joined.iter().rev().find(|e| e.event == "values").cloned();
    assert_eq!(values.map(|e| e.data["done"].clone()), Some(json!(true)));
    let status = request(&b, "GET", &format!("/threads/{thread}/runs/{run_id}"), None);
    assert_eq!(status["status"], json!("success"));
    database.drop().await;
}

/// Answers each delivery's first attempt 503 and later ones 200, recording
/// `(delivery id, attempt)` of each request.
async fn receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<(String, u32)>>>) {
    use axum::http::{HeaderMap, StatusCode};
    let seen: std::sync::Arc<std::sync::Mutex<Vec<(String, u32)>>> = Default::default();
    let recorded = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap| {
            let recorded = recorded.clone();
            async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned()
                };
                let attempt: u32 = header("x-service-attempt").parse().unwrap_or(0);
                recorded
                    .lock()
                    .unwrap()
                    .push((header("x-service-delivery-id"), attempt));
                if attempt <= 1 {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// A retry scheduled on Redis by an instance that is then killed is sent by the next
/// instance when it falls due: the queue outlives every instance. (Without the queue
/// the next instance would find it only at its next sweep of the outbox table, a
/// minute later, past this test's limit.)
#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_retry_scheduled_on_redis_survives_the_instance_that_scheduled_it() {
    let database = Database::create("queue_retry").await;
    let prefix = format!("test-retry-{}", std::process::id());
    let config = support::ConfigFile::write(
        "queue-retry",
        &json!({
            "queue": {"prefix": prefix},
            "service": {"webhooks": {"retries": {"initial_delay_ms": 3000}}},
        }),
    );
    let (hook, seen) = receiver().await;
    let url = database.url();
    let redis = redis_url();
    let path = config.path();
    let boot = || {
        support::spawn(
            &["start", "--port", "0", "--config", &path],
            &[("DATABASE_URL", &url), ("REDIS_URL", &redis)],
        )
    };
    let mut first = boot();
    let waited = call(
        &first,
        "POST",
        "/runs/wait",
        &[],
        Some(json!({"assistant_id": "echo", "input": {"messages": []}, "webhook": hook})),
    );
    assert_eq!(waited.status, 200, "{}", waited.body);
    let started = std::time::Instant::now();
    while seen.lock().unwrap().is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the first attempt"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Its failure is recorded and its retry scheduled; then the instance dies.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let _second = boot();
    let started = std::time::Instant::now();
    loop {
        let attempts: Vec<u32> = seen.lock().unwrap().iter().map(|(_, a)| *a).collect();
        if attempts.contains(&2) {
            assert_eq!(attempts, vec![1, 2], "one retry, from the queue");
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the retry within 20 s: {attempts:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    database.drop().await;
}

/// A run whose instance is killed mid-run: a client streaming it through the other
/// instance is not left hanging; its stream ends once recovery settles the run as an
/// error (runs older than 30 s whose thread claim died with their instance).
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_of_a_run_whose_instance_dies_ends_with_its_recovery() {
    let database = Database::create("queue_kill").await;
    let url = database.url();
    let redis = redis_url();
    let env = [("REDIS_URL", redis.as_str())];
    // B starts after A took the run, so the run executes on A.
    let mut a = start_with(&url, &env);
    let thread = new_thread(&a);
    let run = request(
        &a,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "slow", "input": {"delay_ms": 600_000}})),
    );
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let run_path = format!("/threads/{thread}/runs/{run_id}");
    let started = std::time::Instant::now();
    while request(&a, "GET", &run_path, None)["status"] != json!("running") {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "A runs it"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let b = start_with(&url, &env);
    let stream_path = format!("{run_path}/stream");
    let reading = {
        let address = b.address.clone();
        std::thread::spawn(move || events(&address, &stream_path, "-1"))
    };
    // The claim is taken once the run has executed a second; then A dies.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let frames = tokio::task::spawn_blocking(move || reading.join().expect("the stream ends"))
        .await
        .unwrap();
    assert_eq!(frames.first().map(|e| e.event.as_str()), Some("metadata"));
    let settled = request(&b, "GET", &run_path, None);
    assert_eq!(settled["status"], json!("error"), "{settled}");
    database.drop().await;
}

/// A Redis of this test's own, stopped by it.
struct OwnRedis {
    child: std::process::Child,
    url: String,
}

impl OwnRedis {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap();
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "Redis starts"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Self {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Redis goes away mid-run: the client streaming the run is not left hanging (its
/// stream ends, so the SDK reconnects), and the run itself settles in the store, where
/// a wait reads its result.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_ends_with_an_error_frame_when_redis_goes_away_and_the_run_still_settles() {
    let mut redis = OwnRedis::start();
    let instance = support::spawn(&["dev", "--port", "0", "--queue", &redis.url], &[]);
    let thread = new_thread(&instance);
    let run = request(
        &instance,
        "POST",
        &format!("/threads/{thread}/runs"),
        // Long enough that the stream reads Redis (every second) before the run ends.
        Some(json!({"assistant_id": "slow", "input": {"delay_ms": 5000}})),
    );
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let run_path = format!("/threads/{thread}/runs/{run_id}");
    let reading = {
        let (address, path) = (instance.address.clone(), format!("{run_path}/stream"));
        std::thread::spawn(move || call_raw(&address, &path, "-1"))
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    redis.child.kill().unwrap();
    redis.child.wait().unwrap();
    let streamed = tokio::task::spawn_blocking(move || reading.join())
        .await
        .unwrap();
    let body = streamed.expect("the stream ended instead of hanging");
    // It ends with an error frame saying why, without an id (Last-Event-ID stays the
    // last frame's, to resume from once Redis is back).
    let last = body.trim_end().rsplit("event: ").next().unwrap_or_default();
    assert!(
        last.starts_with("error\r\ndata: {\"error\":\"StreamUnavailable\""),
        "{body}"
    );
    assert!(!last.contains("id: "), "{last}");
    let started = std::time::Instant::now();
    loop {
        let status = request(&instance, "GET", &run_path, None)["status"].clone();
        if status == json!("success") {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the run settles without Redis: {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let waited = call(&instance, "GET", &format!("{run_path}/join"), &[], None);
    assert_eq!(waited.body["done"], json!(true), "{}", waited.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_through_one_instance_stops_a_run_streaming_from_the_other() {
    let database = Database::create("queue_cancel").await;
    let (a, b) = instances(&database);
    let a = std::sync::Arc::new(a);
    let thread = new_thread(&a);
    // Streamed from A, so A executes it; a minute long unless cancelled.
    let streaming = {
        let a = std::sync::Arc::clone(&a);
        let path = format!("/threads/{thread}/runs/stream");
        tokio::task::spawn_blocking(move || {
            call(
                &a,
                "POST",
                &path,
                &[],
                Some(json!({"assistant_id": "slow", "input": {"delay_ms": 60000}})),
            )
        })
    };
    let run_id = loop {
        let runs = request(&b, "GET", &format!("/threads/{thread}/runs"), None);
        match runs.as_array().and_then(|runs| runs.first()) {
            Some(run) if run["status"] == json!("running") => {
                break run["run_id"].as_str().unwrap().to_owned();
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    let cancelled = call(
        &b,
        "POST",
        &format!("/threads/{thread}/runs/{run_id}/cancel"),
        &[],
        None,
    );
    assert!(cancelled.status < 300, "{}", cancelled.status);
    let streamed = streaming.await.unwrap();
    assert_eq!(streamed.status, 200, "A's stream of the run ended");
    let run = request(&a, "GET", &format!("/threads/{thread}/runs/{run_id}"), None);
    assert_eq!(run["status"], json!("cancelled"), "{run}");
    database.drop().await;
}
