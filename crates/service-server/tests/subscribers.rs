//! Fault (d): many SSE subscribers on one run. Every subscriber joins the run while it
//! is queued, then receives every frame in the same order, and the server's resident
//! memory grows by a bounded amount per subscriber, not per frame per subscriber.
//!
//! `FAULT_SUBSCRIBERS` sets the count (default 10,000). Both processes need that many
//! file descriptors: the test raises its soft limit to the hard one (the server
//! inherits it) and, where even that is too low, runs as many as fit and says so.

mod support;

use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{queued_run, release, resident_bytes, spawn};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What one subscriber saw.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    events: usize,
    custom: usize,
    /// Of every event, id and data line in order.
    digest: u64,
}

/// Joins `path` (HTTP/1.0: the body ends when the server closes it), counts itself
/// in `attached` and lets the next subscriber connect (`permit`) once the answer's
/// head arrived, then reads the stream to its end.
async fn subscribe(
    address: String,
    path: String,
    attached: Arc<AtomicUsize>,
    permit: OwnedSemaphorePermit,
) -> Seen {
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    // hyper answers in the request's version.
    assert!(line.starts_with("HTTP/1.0 200"), "{line}");
    loop {
        line.clear();
        reader.read_line(&mut line).await.unwrap();
        if line.trim().is_empty() {
            break;
        }
    }
    attached.fetch_add(1, Ordering::Relaxed);
    drop(permit);
    let mut seen = Seen {
        events: 0,
        custom: 0,
        digest: 0,
    };
    let mut hasher = DefaultHasher::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await.unwrap() == 0 {
            break;
        }
        let line = line.trim_end();
        // Heartbeats come whenever the stream is quiet, differently per subscriber.
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        if let Some(event) = line.strip_prefix("event:") {
            seen.events += 1;
            if event.trim() == "custom" {
                seen.custom += 1;
            }
        }
        hasher.write(line.as_bytes());
    }
    seen.digest = hasher.finish();
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_subscribers_of_one_run_each_receive_every_frame() {
    let count: usize = std::env::var("FAULT_SUBSCRIBERS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(10_000);
    let fit = raise_fd_limit().saturating_sub(200) as usize;
    if fit < count {
        eprintln!("only {fit} subscribers fit the hard limit on open files; running that many");
    }
    let count = count.min(fit);
    let steps = 50;
    let server = spawn(
        &["dev", "--port", "0", "--no-console"],
        &[
            ("SERVICE_MAX_STREAMS_PER_ADDRESS", "0"),
            ("SERVICE_REQUEST_LOG", "off"),
        ],
    );
    let pid = server.child.id();
    let (thread, blocker, run) = queued_run(
        &server,
        json!({
            "assistant_id": "steps",
            "input": {"n": steps},
            "stream_mode": ["values", "custom"],
            "config": {"recursion_limit": 1000},
        }),
    );
    let idle = resident_bytes(pid);

    let attached = Arc::new(AtomicUsize::new(0));
    let connecting = Arc::new(Semaphore::new(256));
    let path = format!("/threads/{thread}/runs/{run}/stream");
    let started = Instant::now();
    let mut subscribers = Vec::with_capacity(count);
    for _ in 0..count {
        let permit = Arc::clone(&connecting).acquire_owned().await.unwrap();
        let attached = Arc::clone(&attached);
        let (address, path) = (server.address.clone(), path.clone());
        subscribers.push(tokio::spawn(subscribe(address, path, attached, permit)));
    }
    while attached.load(Ordering::Relaxed) < count {
        // One that ended before the run started failed: stop here with its panic.
        if let Some(at) = subscribers
            .iter()
            .position(tokio::task::JoinHandle::is_finished)
        {
            let failed = subscribers.swap_remove(at).await;
            panic!("a subscriber ended before the run started: {failed:?}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(100),
            "{} of {count} subscribers attached in 100 s",
            attached.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let joined_in = started.elapsed();
    let subscribed = resident_bytes(pid);

    // The highest resident memory while the frames go out.
    let peak = Arc::new(AtomicU64::new(subscribed));
    let sampling = {
        let peak = Arc::clone(&peak);
        tokio::spawn(async move {
            loop {
                peak.fetch_max(resident_bytes(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let streaming = Instant::now();
    release(&server, &thread, &blocker);
    let mut seen = Vec::with_capacity(count);
    for subscriber in subscribers {
        seen.push(subscriber.await.unwrap());
    }
    let streamed_in = streaming.elapsed();
    sampling.abort();
    let peak = peak.load(Ordering::Relaxed);

    let first = &seen[0];
    assert_eq!(first.custom, steps, "every step's custom frame: {first:?}");
    let differing = seen.iter().filter(|other| *other != first).count();
    assert_eq!(
        differing, 0,
        "every subscriber saw the same frames as the first"
    );
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    eprintln!(
        "{count} subscribers: joined in {joined_in:.1?}, {} frames each in {streamed_in:.1?}; \
         resident {:.1} MiB idle, {:.1} MiB subscribed, {:.1} MiB peak",
        first.events,
        mib(idle),
        mib(subscribed),
        mib(peak)
    );
    // Holding a subscriber costs a connection's buffers and a cursor on the run's
    // frames; the frames themselves are shared. Were each subscriber to buffer its own
    // copy of the stream (~20 KiB of frames here) the growth while streaming alone
    // would pass 200 MiB.
    let per_subscriber = subscribed.saturating_sub(idle) / count as u64;
    assert!(
        per_subscriber < 64 * 1024,
        "{per_subscriber} bytes of resident memory per open subscriber"
    );
    assert!(
        peak.saturating_sub(subscribed) < 128 * 1024 * 1024,
        "resident memory grew by {:.1} MiB while the frames went out",
        mib(peak.saturating_sub(subscribed))
    );
}

/// Raises the soft limit on open files to the hard one (a child inherits it); the
/// soft limit then.
fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        if let Err(error) = setrlimit(Resource::Nofile, limit) {
            eprintln!("cannot raise the limit on open files: {error}");
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}
