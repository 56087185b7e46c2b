//! `/metrics` through the binary: after a known workload over real HTTP (blocking
//! runs, a streamed run, a run with a webhook, one whose receiver fails, a miss), the
//! scrape counts exactly that; `start` serves it only when SERVICE_METRICS turns it on.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Instance, call, request, spawn};

/// The raw answer to one request: head and (de-chunked) body text.
fn raw(instance: &Instance, method: &str, path: &str, body: &str) -> (String, String) {
    let mut stream = TcpStream::connect(&instance.address).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, mut rest) = response.split_once("\r\n\r\n").unwrap();
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return (head.to_owned(), rest.to_owned());
    }
    let mut text = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        text.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    (head.to_owned(), text)
}

/// The value of the sample whose name and labels are exactly `series`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

fn scrape(instance: &Instance) -> String {
    let (head, text) = raw(instance, "GET", "/metrics", "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    text
}

/// Answers every webhook POST with `status` (such as "200 OK") and reports each.
fn webhook_receiver(status: &'static str) -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (received, receipts) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            answer(stream.unwrap(), status);
            let _ = received.send(());
        }
    });
    (url, receipts)
}

/// Reads one request off `stream` and answers it with `status`.
fn answer(mut stream: TcpStream, status: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
}

#[test]
fn a_scrape_after_a_known_workload_counts_it() {
    let server = spawn(&["dev", "--port", "0", "--no-console"], &[]);
    let thread = request(&server, "POST", "/threads", Some(json!({})));
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let run = json!({"assistant_id": "echo", "input": {}});
    for _ in 0..3 {
        let path = format!("/threads/{thread_id}/runs/wait");
        request(&server, "POST", &path, Some(run.clone()));
    }
    let (head, stream) = raw(
        &server,
        "POST",
        &format!("/threads/{thread_id}/runs/stream"),
        &run.to_string(),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let frames_read = stream.matches("event: ").count();
    assert!(frames_read >= 2, "{stream}");
    let (hook, delivered) = webhook_receiver("200 OK");
    let with_hook = json!({"assistant_id": "echo", "input": {}, "webhook": hook});
    request(
        &server,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        Some(with_hook),
    );
    delivered
        .recv_timeout(Duration::from_secs(20))
        .expect("the webhook arrives");
    // A receiver that fails every attempt: its delivery awaits a retry.
    let (failing, refused) = webhook_receiver("500 Internal Server Error");
    let with_failing = json!({"assistant_id": "echo", "input": {}, "webhook": failing});
    request(
        &server,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        Some(with_failing),
    );
    refused
        .recv_timeout(Duration::from_secs(20))
        .expect("the failing webhook's first attempt arrives");
    let missing = format!("/threads/{}", uuid::Uuid::new_v4());
    assert_eq!(call(&server, "GET", &missing, &[], None).status, 404);
    // The same route with another status, and paths no route matches with two methods.
    let existing = format!("/threads/{thread_id}");
    assert_eq!(call(&server, "GET", &existing, &[], None).status, 200);
    for method in ["GET", "DELETE"] {
        assert_eq!(
            call(&server, method, "/no/such/route", &[], None).status,
            404
        );
    }

    // Each delivery is counted once its attempt is recorded, just after it arrives.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(&server);
        let recorded = |series: &str| sample(&text, series).is_some_and(|value| value >= 1.0);
        if (recorded(r#"service_webhook_deliveries_total{outcome="delivered"}"#)
            && recorded("service_webhook_retries_pending"))
            || Instant::now() > deadline
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let expect = |series: &str, value: f64| {
        assert_eq!(sample(&text, series), Some(value), "{series} in\n{text}");
    };
    expect("service_runs_created_total", 6.0);
    expect("service_runs_started_total", 6.0);
    expect(r#"service_runs_settled_total{status="success"}"#, 6.0);
    expect("service_runs_executing", 0.0);
    expect("service_queue_depth", 0.0);
    expect("service_queue_oldest_pending_age_seconds", 0.0);
    expect(
        r#"service_webhook_deliveries_total{outcome="delivered"}"#,
        1.0,
    );
    // Failed and not given up, whether its retry is due later or under way.
    expect("service_webhook_retries_pending", 1.0);
    expect(
        r#"service_http_requests_total{method="POST",route="/threads/{thread_id}/runs/wait",status="200"}"#,
        5.0,
    );
    expect(
        r#"service_http_request_duration_seconds_count{method="POST",route="/threads/{thread_id}/runs/wait"}"#,
        5.0,
    );
    expect(
        r#"service_http_requests_total{method="GET",route="/threads/{thread_id}",status="404"}"#,
        1.0,
    );
    expect(
        r#"service_http_requests_total{method="POST",route="/threads",status="200"}"#,
        1.0,
    );
    expect(
        r#"service_http_requests_total{method="GET",route="/threads/{thread_id}",status="200"}"#,
        1.0,
    );
    expect(
        r#"service_http_request_duration_seconds_count{method="GET",route="/threads/{thread_id}"}"#,
        2.0,
    );
    for method in ["GET", "DELETE"] {
        expect(
            &format!(
                r#"service_http_requests_total{{method="{method}",route="unmatched",status="404"}}"#
            ),
            1.0,
        );
    }
    expect("service_sse_subscribers", 0.0);
    expect("service_sse_frames_sent_total", frames_read as f64);
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    // Aggregates only: no id of what the workload made or asked for.
    assert!(!text.contains(&thread_id), "{text}");
    assert!(!text.contains(&missing[9..]), "{text}");
    // The scrapes themselves are requests too.
    assert!(
        sample(
            &scrape(&server),
            r#"service_http_requests_total{method="GET",route="/metrics",status="200"}"#
        )
        .is_some_and(|scrapes| scrapes >= 1.0)
    );
}

#[test]
fn start_serves_metrics_only_when_turned_on() {
    let off = spawn(&["start", "--port", "0"], &[]);
    assert_eq!(call(&off, "GET", "/metrics", &[], None).status, 404);
    let on = spawn(&["start", "--port", "0"], &[("SERVICE_METRICS", "on")]);
    let text = scrape(&on);
    assert!(
        text.contains("# TYPE service_runs_created counter"),
        "{text}"
    );
}

/// The pid of the server's one Python worker (its only child process).
fn worker_pid(server: &Instance) -> String {
    let pid = server.child.id();
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).expect("Linux /proc");
    let pids: Vec<&str> = children.split_whitespace().collect();
    assert_eq!(pids.len(), 1, "one worker: {children:?}");
    pids[0].to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn start_reports_its_pools_and_python_workers() {
    let python = std::env::var("SERVICE_PYTHON").expect(
        "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)",
    );
    let database = support::Database::create("metrics").await;
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/python-graphs/langgraph.json"
    );
    let url = database.url();
    let env = [
        ("SERVICE_PYTHON", python.as_str()),
        ("SERVICE_PYTHON_WORKERS", "1"),
        ("SERVICE_METRICS", "on"),
        ("DATABASE_URL", url.as_str()),
    ];
    let server = spawn(&["start", "--port", "0", "--config", config], &env);
    let thread = request(&server, "POST", "/threads", Some(json!({})));
    let path = format!(
        "/threads/{}/runs/wait",
        thread["thread_id"].as_str().unwrap()
    );
    request(
        &server,
        "POST",
        &path,
        Some(json!({"assistant_id": "echo", "input": {"messages": []}})),
    );
    let text = scrape(&server);
    let expect = |text: &str, series: &str, value: f64| {
        assert_eq!(sample(text, series), Some(value), "{series} in\n{text}");
    };
    expect(
        &text,
        r#"service_runs_settled_total{status="success"}"#,
        1.0,
    );
    // The settled run gave its claim connection back; nothing waits.
    expect(&text, r#"service_db_pool_in_use{pool="claim"}"#, 0.0);
    for pool in ["store", "checkpointer", "claim"] {
        expect(
            &text,
            &format!(r#"service_db_pool_waiting{{pool="{pool}"}}"#),
            0.0,
        );
    }
    let idle = sample(&text, r#"service_db_pool_idle{pool="store"}"#).unwrap();
    assert!(idle >= 1.0, "the store's connections are pooled:\n{text}");
    expect(
        &text,
        r#"service_graph_workers_alive{language="Python"}"#,
        1.0,
    );
    expect(
        &text,
        r#"service_graph_workers_restarted_total{language="Python"}"#,
        0.0,
    );

    let killed = std::process::Command::new("kill")
        .args(["-9", &worker_pid(&server)])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = scrape(&server);
        let restarted = sample(
            &text,
            r#"service_graph_workers_restarted_total{language="Python"}"#,
        );
        if restarted == Some(1.0) {
            expect(
                &text,
                r#"service_graph_workers_alive{language="Python"}"#,
                1.0,
            );
            break;
        }
        assert!(Instant::now() < deadline, "no restart counted:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(server);
    database.drop().await;
}
