//! Fault (e): clients that subscribe to a run and then stop reading. The run goes on
//! for the clients that read, the server's resident memory grows no more than with
//! one reading client plus the bus's bounds (the stalled streams are cursors on the
//! run's frames, never queues of their own), and once a write has made no progress
//! for SERVICE_SEND_TIMEOUT_MS the server closes the stalled connections.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Instance, queued_run, release, resident_bytes, spawn};

const STALLED: usize = 20;
const STEPS: usize = 300;

/// Joins the run's stream; the open socket, its answer's head read.
fn join(server: &Instance, thread: &str, run: &str) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(&server.address).unwrap();
    write!(
        stream,
        "GET /threads/{thread}/runs/{run}/stream HTTP/1.0\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.0 200"), "{status}");
    reader
}

/// The server's open file descriptors (its sockets among them).
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// What one run showed.
struct Run {
    /// Bytes the reading client got.
    read: u64,
    /// Peak growth of resident memory over the run.
    growth: u64,
    /// The server's descriptors with every client joined.
    joined_fds: usize,
}

/// Streams one run of big frames to a reader and `count` clients that never read.
fn one_run(server: &Instance, stalled: &mut Vec<BufReader<TcpStream>>, count: usize) -> Run {
    // Each values frame carries the 100 KB entry of `log`: ~30 MB per subscriber.
    let pad = "x".repeat(100 * 1024);
    let (thread, blocker, run) = queued_run(
        server,
        json!({
            "assistant_id": "steps",
            "input": {"n": STEPS, "log": [pad]},
            "stream_mode": ["values"],
            "config": {"recursion_limit": 1000},
        }),
    );
    for _ in 0..count {
        stalled.push(join(server, &thread, &run));
    }
    let mut reader = join(server, &thread, &run);
    let pid = server.child.id();
    let joined_fds = open_fds(pid);
    let before = resident_bytes(pid);
    let peak = Arc::new(AtomicU64::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(resident_bytes(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    release(server, &thread, &blocker);
    let mut read = Vec::new();
    reader.read_to_end(&mut read).unwrap();
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    Run {
        read: read.len() as u64,
        growth: peak.load(Ordering::Relaxed) - before,
        joined_fds,
    }
}

#[test]
fn clients_that_stop_reading_cost_no_memory_beyond_the_bus_bounds_and_are_cut_off() {
    let server = spawn(
        &["dev", "--port", "0", "--no-console"],
        &[
            ("SERVICE_SEND_TIMEOUT_MS", "3000"),
            ("SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN", "100"),
            ("SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES", "16777216"),
            ("SERVICE_REQUEST_LOG", "off"),
        ],
    );
    let pid = server.child.id();
    let mut stalled = Vec::new();
    // The same run with one reading client first: what the run itself costs.
    let control = one_run(&server, &mut stalled, 0);
    let (full, alone) = (control.read, control.growth);
    assert!(full > 25 * 1024 * 1024, "the stream is {full} bytes");
    let fds = open_fds(pid);
    let stalling = one_run(&server, &mut stalled, STALLED);
    let stopped = Instant::now();
    let (read, with_stalled) = (stalling.read, stalling.growth);
    assert!(
        read > 25 * 1024 * 1024,
        "the reader got the run: {read} bytes"
    );
    assert!(
        stalling.joined_fds >= fds + STALLED,
        "the stalled streams were open"
    );

    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    eprintln!(
        "one {:.1} MiB stream: resident growth {:.1} MiB with one reader, {:.1} MiB with {STALLED} stalled clients besides",
        mib(full),
        mib(alone),
        mib(with_stalled)
    );
    // The bus keeps at most 100 frames of ~100 KB per run; were the stalled streams
    // queues, their ~25 MB each the sockets cannot take would add ~500 MB.
    let bus_bound = 100 * 110 * 1024;
    let slack = 48 * 1024 * 1024;
    assert!(
        with_stalled <= alone + bus_bound + slack,
        "{:.1} MiB with stalled clients against {:.1} MiB with one reader",
        mib(with_stalled),
        mib(alone)
    );

    // Their writes stalled; within the send timeout the server lets them go.
    while open_fds(pid) > fds {
        assert!(
            stopped.elapsed() < Duration::from_secs(30),
            "the stalled connections are closed ({} descriptors open, {fds} before)",
            open_fds(pid)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for mut client in stalled {
        let mut got = Vec::new();
        client
            .get_mut()
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // What the sockets held, then the end (or a reset).
        if client.read_to_end(&mut got).is_ok() {
            assert!(
                (got.len() as u64) < full,
                "cut off before the end of the stream"
            );
        }
    }
    assert_eq!(support::call(&server, "GET", "/ok", &[], None).status, 200);
}
