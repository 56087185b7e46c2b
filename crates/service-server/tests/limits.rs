//! The caps on what one connection may send or hold, through the binary and raw
//! sockets: an oversized target or head is a 414/431 with a JSON message (and a head
//! past the hard cap a bare 431, never buffered whole), a head or a body that
//! trickles in is cut off with a 408, an idle connection is closed, and one address holds at most
//! its share of open streams and waits. The server answers normally after each.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;
use support::{Instance, call, request, spawn};

fn dev(env: &[(&str, &str)]) -> Instance {
    spawn(&["dev", "--port", "0", "--no-console"], env)
}

/// Still serving.
fn ok(instance: &Instance) {
    assert_eq!(call(instance, "GET", "/ok", &[], None).status, 200);
}

fn message(reply: &support::Reply) -> String {
    reply.body["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn an_oversized_target_or_head_is_refused_with_a_json_message() {
    let server = dev(&[
        ("SERVICE_MAX_URI_BYTES", "1024"),
        ("SERVICE_MAX_HEADERS", "20"),
        ("SERVICE_MAX_HEADER_BYTES", "4096"),
    ]);
    let long = format!("/ok?pad={}", "a".repeat(1100));
    let reply = call(&server, "GET", &long, &[], None);
    assert_eq!(reply.status, 414, "{reply:?}");
    assert!(
        message(&reply).contains("SERVICE_MAX_URI_BYTES"),
        "{reply:?}"
    );

    let names: Vec<String> = (0..25).map(|i| format!("x-extra-{i}")).collect();
    let many: Vec<(&str, &str)> = names.iter().map(|name| (name.as_str(), "1")).collect();
    let reply = call(&server, "GET", "/ok", &many, None);
    assert_eq!(reply.status, 431, "{reply:?}");
    assert!(message(&reply).contains("SERVICE_MAX_HEADERS"), "{reply:?}");

    let big = "b".repeat(5000);
    let reply = call(&server, "GET", "/ok", &[("x-big", &big)], None);
    assert_eq!(reply.status, 431, "{reply:?}");
    assert!(
        message(&reply).contains("SERVICE_MAX_HEADER_BYTES"),
        "{reply:?}"
    );
    // The same caps guard the authenticated routes before any credential is read.
    let reply = call(&server, "POST", &long, &[], Some(json!({})));
    assert_eq!(reply.status, 414, "{reply:?}");
    ok(&server);

    // Far past the caps: refused by the connection before it buffers the head, and
    // the server is unharmed.
    let huge = "c".repeat(4 * 1024 * 1024);
    let mut stream = TcpStream::connect(&server.address).unwrap();
    let head = format!("GET /ok HTTP/1.1\r\nHost: x\r\nx-huge: {huge}\r\n\r\n");
    // The server may close before the whole head is written.
    let _ = stream.write_all(head.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let fields: Vec<String> = (0..100).map(|i| format!("x-f{i}: 1\r\n")).collect();
    let mut stream = TcpStream::connect(&server.address).unwrap();
    let head = format!("GET /ok HTTP/1.1\r\nHost: x\r\n{}\r\n", fields.concat());
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    ok(&server);
}

#[test]
fn a_head_that_trickles_in_is_cut_off_with_a_408_and_an_idle_connection_is_closed() {
    let server = dev(&[("SERVICE_HEADER_READ_TIMEOUT_MS", "1000")]);
    // Slow-loris: part of a head, then nothing.
    let mut slow = TcpStream::connect(&server.address).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    slow.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\nx-slow: ")
        .unwrap();
    let mut answer = String::new();
    slow.read_to_string(&mut answer)
        .expect("the server closes the connection");
    assert_timed_out_naming(&answer, "SERVICE_HEADER_READ_TIMEOUT_MS");

    // A connection that never sends, and one kept alive after its answer, are closed
    // without a word.
    let mut idle = TcpStream::connect(&server.address).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut nothing = Vec::new();
    idle.read_to_end(&mut nothing)
        .expect("the server closes it");
    assert!(nothing.is_empty(), "{}", String::from_utf8_lossy(&nothing));
    let mut kept = TcpStream::connect(&server.address).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    kept.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut reader = BufReader::new(kept);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).expect("the server closes it");
    assert!(
        !String::from_utf8_lossy(&rest).contains("408"),
        "no answer to a request never sent"
    );
    ok(&server);
}

#[test]
fn a_body_that_trickles_in_is_cut_off_with_a_408() {
    let server = dev(&[("SERVICE_BODY_READ_TIMEOUT_MS", "1000")]);
    // A whole head, then a body one byte at a time, never finished.
    let mut slow = TcpStream::connect(&server.address).unwrap();
    slow.write_all(
        b"POST /threads HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{\"metadata\": {\"pad\": \"",
    )
    .unwrap();
    slow.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    // Bounded: a minute of trickling.
    for _ in 0..300 {
        // The server may have closed its side already.
        let _ = slow.write_all(b"a");
        match slow.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => answer.extend_from_slice(&buffer[..read]),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert_timed_out_naming(&answer, "SERVICE_BODY_READ_TIMEOUT_MS");
    // A body sent whole is read as ever.
    let reply = call(&server, "POST", "/threads", &[], Some(json!({})));
    assert_eq!(reply.status, 200, "{reply:?}");
    ok(&server);
}

/// A join of `run` on `thread` (a wait), its status line read.
fn open_join(server: &Instance, thread: &str, run: &str) -> (u16, BufReader<TcpStream>) {
    let mut stream = TcpStream::connect(&server.address).unwrap();
    write!(
        stream,
        "GET /threads/{thread}/runs/{run}/stream HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let code = status.split(' ').nth(1).unwrap().parse().unwrap();
    (code, reader)
}

#[test]
fn one_address_holds_at_most_its_share_of_streams_and_waits() {
    let server = dev(&[("SERVICE_MAX_STREAMS_PER_ADDRESS", "2")]);
    let thread = request(&server, "POST", "/threads", Some(json!({})))["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = request(
        &server,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({"assistant_id": "slow", "input": {"delay_ms": 60000}})),
    );
    let run = run["run_id"].as_str().unwrap().to_owned();
    let (first, _first) = open_join(&server, &thread, &run);
    let (second, second_stream) = open_join(&server, &thread, &run);
    assert_eq!((first, second), (200, 200));
    // A wait counts as well.
    let wait = call(
        &server,
        "POST",
        &format!("/threads/{thread}/runs/wait"),
        &[],
        Some(json!({"assistant_id": "echo", "input": {}})),
    );
    assert_eq!(wait.status, 429, "{wait:?}");
    assert!(
        message(&wait).contains("SERVICE_MAX_STREAMS_PER_ADDRESS"),
        "{wait:?}"
    );
    let (third, _) = open_join(&server, &thread, &run);
    assert_eq!(third, 429);
    // Closing one frees its slot.
    drop(second_stream);
    let mut freed = false;
    for _ in 0..100 {
        let (again, stream) = open_join(&server, &thread, &run);
        if again == 200 {
            freed = true;
            drop(stream);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(freed, "a closed stream's slot is released");
    ok(&server);
}

/// A raw answer is a 408 whose JSON message names the knob that timed it out.
fn assert_timed_out_naming(answer: &str, knob: &str) {
    let (head, body) = answer.split_once("\r\n\r\n").expect("an answer");
    assert!(head.starts_with("HTTP/1.1 408"), "{answer}");
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["status"], 408);
    assert!(body["message"].as_str().unwrap().contains(knob), "{body}");
}
