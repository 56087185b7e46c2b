//! Fault (c): Redis restarted (killed, down two seconds, back empty) while eight
//! clients stream runs through it. Every stream the server opened ends cleanly (its
//! chunked body is terminated, nothing hangs) with the run's result or a
//! `StreamUnavailable` error event saying to resume with Last-Event-ID, a refused one
//! is a 503, a wait answers its run's result, every run whose stream was opened
//! settles, and streaming works again once Redis is back, without restarting the
//! server.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use support::private::Redis;
use support::{Database, Instance, request, start_with};

const CLIENTS: usize = 8;
const TERMINAL: [&str; 4] = ["success", "error", "interrupted", "timeout"];

/// One streamed run as the client saw it.
#[derive(Debug)]
struct Streamed {
    status: u16,
    thread: String,
    /// From `Content-Location`.
    run: Option<String>,
    /// The chunked body's terminating chunk arrived.
    clean_end: bool,
    body: String,
}

/// Streams a `slow` run on a new thread to its end (HTTP/1.1, chunked).
fn stream_run(address: &str, thread: &str) -> std::io::Result<Streamed> {
    let body = json!({
        "assistant_id": "slow",
        "input": {"delay_ms": 1000},
        "stream_mode": ["values"],
    })
    .to_string();
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        stream,
        "POST /threads/{thread}/runs/stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let run = head.lines().find_map(|line| {
        line.to_ascii_lowercase()
            .starts_with("content-location:")
            .then(|| line.rsplit('/').next().unwrap().trim().to_owned())
    });
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok(Streamed {
        status,
        thread: thread.to_owned(),
        run,
        clean_end: !chunked || body.ends_with("0\r\n\r\n"),
        body: body.to_owned(),
    })
}

fn client(server: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Vec<Streamed>>>) {
    while !stop.load(Ordering::Relaxed) {
        let thread = support::try_call(&server, "POST", "/threads", &[], Some(json!({})), None)
            .unwrap()
            .body["thread_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let streamed = stream_run(&server, &thread).expect("the stream ends within 60 s");
        seen.lock().unwrap().push(streamed);
        // A wait reads the same bus: its answer is the run's result all the same.
        let waited = support::try_call(
            &server,
            "POST",
            &format!("/threads/{thread}/runs/wait"),
            &[],
            Some(json!({"assistant_id": "slow", "input": {"delay_ms": 300}})),
            Some(Duration::from_secs(60)),
        )
        .expect("the wait ends within 60 s");
        assert!(
            waited.status == 503 || waited.body["done"] == true,
            "a wait answers the run's result: {waited:?}"
        );
    }
}

fn status_of(server: &Instance, thread: &str, run: &str) -> String {
    request(
        server,
        "GET",
        &format!("/threads/{thread}/runs/{run}"),
        None,
    )["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redis_restart_under_streaming_load_ends_streams_cleanly_and_runs_settle() {
    let database = Database::create("redis_restart").await;
    let mut redis = Redis::start();
    let server = start_with(
        &database.url(),
        &[("REDIS_URL", &redis.url()), ("SERVICE_REQUEST_LOG", "off")],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (address, stop, seen) =
                (server.address.clone(), Arc::clone(&stop), Arc::clone(&seen));
            std::thread::spawn(move || client(address, stop, seen))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.stop();
    tokio::time::sleep(Duration::from_secs(2)).await;
    redis.resume();
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());

    for streamed in &seen {
        assert!(streamed.clean_end, "the stream ended cleanly: {streamed:?}");
        // Without the result, the stream says why and how to resume.
        assert!(
            streamed.status != 200
                || streamed.body.contains("\"done\":true")
                || streamed.body.contains("StreamUnavailable"),
            "the stream carried the run's result or told of the outage: {streamed:?}"
        );
        assert!(
            streamed.status == 200 || streamed.status == 503,
            "a stream opens or is refused with a 503: {streamed:?}"
        );
    }
    // Every run that was created settles.
    let started = Instant::now();
    for streamed in &seen {
        let Some(run) = &streamed.run else { continue };
        loop {
            let status = status_of(&server, &streamed.thread, run);
            if TERMINAL.contains(&status.as_str()) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "run {run} settles (still {status})"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Streaming works again with the new Redis.
    let thread = request(&server, "POST", "/threads", Some(json!({})))["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let after = stream_run(&server.address, &thread).unwrap();
    assert_eq!(after.status, 200, "{after:?}");
    assert!(
        after.clean_end && after.body.contains("\"done\":true"),
        "a stream after the restart carries the run's result: {after:?}"
    );
    let opened = seen
        .iter()
        .filter(|streamed| streamed.status == 200)
        .count();
    let with_result = seen
        .iter()
        .filter(|streamed| streamed.body.contains("\"done\":true"))
        .count();
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    for streamed in &seen {
        if let Some(run) = &streamed.run {
            *statuses
                .entry(status_of(&server, &streamed.thread, run))
                .or_default() += 1;
        }
    }
    eprintln!(
        "{} streams: {opened} opened and ended cleanly ({with_result} with the run's result), {} refused with 503; runs {statuses:?}",
        seen.len(),
        seen.len() - opened
    );
    drop(server);
    database.drop().await;
}
