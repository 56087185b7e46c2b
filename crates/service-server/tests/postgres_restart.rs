//! Fault (b): PostgreSQL restarted under load. A private cluster (the machine's shared
//! one serves other tests) is stopped for a few seconds while eight clients create
//! threads and wait on runs: meanwhile the server answers 503 with a message (never
//! another 5xx, never a hang, never a crash), it recovers without a restart once the
//! database is back, and every thread and run it acknowledged is there afterwards.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use support::private::Postgres;
use support::{Reply, start_with, try_call};

const CLIENTS: usize = 8;
const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

#[derive(Default)]
struct Seen {
    threads: Vec<String>,
    /// (thread, run, the status its wait's answer implies) of every run whose wait
    /// answered 2xx.
    runs: Vec<(String, String, &'static str)>,
    /// Every answer that was not a 2xx, with what was asked.
    refused: Vec<(String, Reply)>,
    /// Requests the server did not answer at all.
    unanswered: Vec<String>,
}

fn client(address: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let answer = |what: &str, reply: std::io::Result<Reply>| -> Option<Reply> {
            match reply {
                Ok(reply) if reply.status < 300 => Some(reply),
                Ok(reply) => {
                    seen.lock().unwrap().refused.push((what.to_owned(), reply));
                    None
                }
                Err(error) => {
                    seen.lock()
                        .unwrap()
                        .unanswered
                        .push(format!("{what}: {error}"));
                    None
                }
            }
        };
        let created = try_call(&address, "POST", "/threads", &[], Some(json!({})), TIMEOUT);
        let Some(thread) = answer("POST /threads", created) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let thread = thread.body["thread_id"].as_str().unwrap().to_owned();
        seen.lock().unwrap().threads.push(thread.clone());
        let body = json!({
            "assistant_id": "echo",
            "input": {"messages": [{"type": "human", "content": format!("m{i}")}]},
        });
        let waited = try_call(
            &address,
            "POST",
            &format!("/threads/{thread}/runs/wait"),
            &[],
            Some(body),
            TIMEOUT,
        );
        if let Some(reply) = answer("POST /threads/{id}/runs/wait", waited) {
            let run = reply
                .header("content-location")
                .and_then(|location| location.rsplit('/').next())
                .unwrap_or_default()
                .to_owned();
            // A run the outage failed (its checkpoint could not be written) answers
            // its error, and is recorded as such.
            let status = if reply.body.get("__error__").is_some() {
                "error"
            } else {
                "success"
            };
            seen.lock().unwrap().runs.push((thread, run, status));
        }
    }
}

#[test]
fn a_postgres_restart_under_load_is_503_meanwhile_and_loses_nothing_acknowledged() {
    let cluster = Postgres::start("restart");
    let server = start_with(
        &cluster.url(),
        &[
            ("DB_CONNECTION_TIMEOUT_MS", "2000"),
            ("SERVICE_REQUEST_LOG", "off"),
        ],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (address, stop, seen) =
                (server.address.clone(), Arc::clone(&stop), Arc::clone(&seen));
            std::thread::spawn(move || client(address, stop, seen))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let before = seen.lock().unwrap().runs.len();
    assert!(before > 0, "runs complete before the restart");
    cluster.stop();
    std::thread::sleep(Duration::from_secs(4));
    cluster.resume();
    let back = Instant::now();
    // Recovered without a restart: runs complete again.
    let after = loop {
        let runs = seen.lock().unwrap().runs.len();
        if runs > before + 2 * CLIENTS {
            break runs;
        }
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "runs complete again within 30 s of the database's return ({runs} in all, {before} before)"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let recovered_in = back.elapsed();
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert!(
        seen.unanswered.is_empty(),
        "every request was answered: {:?}",
        seen.unanswered
    );
    assert!(!seen.refused.is_empty(), "the outage was noticed");
    for (what, reply) in &seen.refused {
        assert_eq!(reply.status, 503, "{what}: {reply:?}");
        assert!(
            reply.body["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}: {reply:?}"
        );
    }
    // Nothing acknowledged is lost.
    for thread in &seen.threads {
        let reply = try_call(
            &server.address,
            "GET",
            &format!("/threads/{thread}"),
            &[],
            None,
            TIMEOUT,
        )
        .unwrap();
        assert_eq!(reply.status, 200, "thread {thread}: {reply:?}");
    }
    for (thread, run, status) in &seen.runs {
        let reply = try_call(
            &server.address,
            "GET",
            &format!("/threads/{thread}/runs/{run}"),
            &[],
            None,
            TIMEOUT,
        )
        .unwrap();
        assert_eq!(reply.status, 200, "run {run}: {reply:?}");
        assert_eq!(reply.body["status"], *status, "run {run}: {reply:?}");
    }
    let failed = seen
        .runs
        .iter()
        .filter(|(_, _, status)| *status == "error")
        .count();
    eprintln!(
        "{} threads and {} runs acknowledged ({failed} of them failed by the outage) ({before} before the restart, {after} once recovered {recovered_in:.1?} after it); {} answers 503 meanwhile",
        seen.threads.len(),
        seen.runs.len(),
        seen.refused.len()
    );
}
