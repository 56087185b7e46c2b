//! The server binary: configuration mistakes stop the boot with a message naming
//! them, `dev` serves the console, and SIGTERM stops a serving process cleanly.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{ConfigFile, listening_address};

fn server() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_service-server"));
    command.env_remove("RUST_LOG").env("NO_COLOR", "1");
    command
}

#[test]
fn a_misspelt_knob_stops_the_boot_naming_it() {
    let output = server()
        .args(["dev", "--port", "0"])
        .env("SERVICE_RUN_CONCURENCY", "4")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("SERVICE_RUN_CONCURENCY"),
        "stderr: {stderr}"
    );
}

#[test]
fn a_malformed_knob_value_stops_the_boot_naming_it() {
    let output = server()
        .args(["start", "--port", "0"])
        .env("SERVICE_MAX_PAGE_SIZE", "lots")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("SERVICE_MAX_PAGE_SIZE"));
}

#[test]
fn resident_memory_above_the_heap_threshold_is_warned_once() {
    // A thousandth of a percent of any machine's memory is below this process's.
    let mut child = server()
        .args(["dev", "--port", "0"])
        .env_remove("DATABASE_URL")
        .env("SERVICE_HEAP_WARN_PERCENT", "0.001")
        .env("SERVICE_HEAP_SAMPLE_MS", "20")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let log = BufReader::new(child.stdout.take().unwrap());
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in log.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut warnings = 0;
    let mut since_warning = None;
    while Instant::now() < deadline {
        let Ok(line) = received.recv_timeout(Duration::from_millis(100)) else {
            // Many samples after the first warning, still above: no second one.
            if since_warning.is_some_and(|at: Instant| at.elapsed() > Duration::from_millis(500)) {
                break;
            }
            continue;
        };
        if line.contains("resident memory is at") {
            assert!(line.contains("WARN"), "{line}");
            assert!(line.contains("SERVICE_HEAP_WARN_PERCENT=0.001"), "{line}");
            warnings += 1;
            since_warning.get_or_insert_with(Instant::now);
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(warnings, 1, "one warning per crossing");
}

#[test]
fn a_heap_threshold_above_100_percent_stops_the_boot_naming_it() {
    let output = server()
        .args(["start", "--port", "0"])
        .env("SERVICE_HEAP_WARN_PERCENT", "150")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("SERVICE_HEAP_WARN_PERCENT"),
        "stderr: {stderr}"
    );
}

#[test]
fn dev_serves_the_console_and_no_console_or_start_leave_it_out() {
    for (args, served) in [
        (&["dev"][..], true),
        (&["dev", "--no-console"][..], false),
        (&["start"][..], false),
    ] {
        let mut child = server()
            .args(args)
            .args(["--port", "0"])
            .env_remove("DATABASE_URL")
            .env_remove("DATABASE_URI")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut log = BufReader::new(child.stdout.take().unwrap());
        let address = listening_address(&mut log);
        let page = request(&address, "GET", "/console/", "");
        let status = page.lines().next().unwrap_or_default().to_owned();
        let expected = if served {
            "HTTP/1.1 200"
        } else {
            "HTTP/1.1 404"
        };
        assert!(status.starts_with(expected), "{args:?}: {status}");
        if served {
            assert!(page.contains("<html"), "{args:?}: the console's page");
        }
        terminate_cleanly_within(&mut child, Duration::from_secs(10));
    }
}

#[test]
fn start_serves_the_console_at_the_path_http_console_names() {
    let config = ConfigFile::write(
        "console",
        &serde_json::json!({"http": {"console": "/admin"}}),
    );
    let mut child = server()
        .args(["start", "--port", "0", "--config", &config.path()])
        .env_remove("DATABASE_URL")
        .env_remove("DATABASE_URI")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let address = listening_address(&mut log);
    let status = |path: &str| {
        let answer = request(&address, "GET", path, "");
        answer.lines().next().unwrap_or_default().to_owned()
    };
    assert!(status("/admin/").starts_with("HTTP/1.1 200"));
    assert!(status("/admin").starts_with("HTTP/1.1 302"));
    assert!(status("/console/").starts_with("HTTP/1.1 404"));
    terminate_cleanly_within(&mut child, Duration::from_secs(10));
}

#[test]
fn an_unknown_config_file_key_stops_the_boot() {
    let config = ConfigFile::write("config", &serde_json::json!({"grpahs": {}}));
    let output = server()
        .args(["dev", "--port", "0", "--config", &config.path()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("grpahs"));
}

fn get_ok(address: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn sigterm_stops_a_serving_server_cleanly() {
    let mut child = server()
        .args(["dev", "--port", "0"])
        .env("SERVICE_SHUTDOWN_GRACE_MS", "500")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let address = listening_address(&mut log);
    assert!(get_ok(&address).contains("\"ok\":true"));

    terminate_cleanly_within(&mut child, Duration::from_secs(10));
}

/// Sends SIGTERM and waits, at most `limit`, for the process to exit successfully.
fn terminate_cleanly_within(child: &mut std::process::Child, limit: Duration) {
    let terminated = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < limit,
            "the server still runs {limit:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "clean exit after SIGTERM: {status}");
}

/// One request on a connection of its own; the whole answer as text.
fn request(address: &str, method: &str, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The value of `"key":"<value>"` in a JSON answer.
fn string_field(response: &str, key: &str) -> String {
    let marker = format!("\"{key}\":\"");
    let at = response.find(&marker).expect(key) + marker.len();
    response[at..].split('"').next().unwrap().to_owned()
}

/// SIGTERM while a thread stream is open, a client is half-way through sending a
/// request and a run executes: the run gets its grace and is then cancelled and
/// settled, the stream ends after telling so, and the process exits within its
/// shutdown budget (grace + 3 s) whatever the clients do.
#[test]
fn sigterm_exits_within_its_budget_despite_open_streams_and_slow_clients() {
    let mut child = server()
        .args(["dev", "--port", "0"])
        .env("SERVICE_SHUTDOWN_GRACE_MS", "500")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let address = listening_address(&mut log);
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in log.lines() {});

    let thread = string_field(&request(&address, "POST", "/threads", "{}"), "thread_id");
    let mut stream = TcpStream::connect(&address).unwrap();
    let path = format!("/threads/{thread}/stream?stream_mode=lifecycle");
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains("200"), "{status}");
    let streamed = std::thread::spawn(move || {
        let mut rest = String::new();
        // Ends when the server closes the stream.
        let _ = reader.read_to_string(&mut rest);
        rest
    });
    let run = request(
        &address,
        "POST",
        &format!("/threads/{thread}/runs"),
        r#"{"assistant_id":"slow","input":{"delay_ms":60000}}"#,
    );
    let run_id = string_field(&run, "run_id");
    // A run still queued at SIGTERM stays queued (for the next boot, or another
    // instance); this one must be executing for its grace to apply.
    let run_path = format!("/threads/{thread}/runs/{run_id}");
    let started = Instant::now();
    while string_field(&request(&address, "GET", &run_path, ""), "status") != "running" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut half_sent = TcpStream::connect(&address).unwrap();
    half_sent
        .write_all(b"POST /threads HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();

    terminate_cleanly_within(&mut child, Duration::from_secs(20));
    let streamed = streamed.join().unwrap();
    assert!(
        streamed.contains("run_done") && streamed.contains(&run_id),
        "the stream told of the cancelled run's end before it closed: {streamed}"
    );
    drop(half_sent);
}

#[test]
fn a_queue_that_does_not_answer_stops_the_boot_naming_it() {
    let output = server()
        .args([
            "dev",
            "--port",
            "0",
            "--queue",
            "redis://user:secret@127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot reach Redis at redis://127.0.0.1:1"),
        "stderr: {stderr}"
    );
    assert!(
        !stderr.contains("secret"),
        "the password is not logged: {stderr}"
    );
}

#[test]
fn a_jwks_url_that_cannot_be_fetched_stops_the_boot_naming_it() {
    let url = "http://127.0.0.1:1/.well-known/jwks.json";
    let config = ConfigFile::write(
        "jwks",
        &serde_json::json!({"auth": {"jwt": {"jwks_url": url}}}),
    );
    let output = server()
        .args(["dev", "--port", "0", "--config", &config.path()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "auth.jwt.jwks_url: cannot fetch the JWK Set at {url}"
        )),
        "stderr: {stderr}"
    );
}

#[test]
fn a_langgraph_json_with_every_kind_of_key_boots_noting_what_each_does_here() {
    let config = ConfigFile::write(
        "langgraph-keys",
        &serde_json::json!({
            "dependencies": ["."], "graphs": {"chat": {"path": "rust:echo", "description": "Chat"}},
            // `ui` is honoured (bundled at boot): its tests are service-node's tests/ui.rs.
            "python_version": "3.12", "disable_persistence": true,
            "priority": {"path": "./priority.py:decide"},
            "http": {"cors": {"allow_origins": ["https://app.example"], "allow_methods": ["GET", "POST"]}},
        }),
    );
    let mut child = server()
        .args(["dev", "--port", "0", "--config", &config.path()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let mut boot = String::new();
    let address = loop {
        let mut line = String::new();
        assert!(log.read_line(&mut line).unwrap() > 0, "exited: {boot}");
        if line.contains("listening on http://") {
            break listening_address(&mut std::io::Cursor::new(line));
        }
        boot.push_str(&line);
    };
    std::thread::spawn(move || for _ in log.lines() {});
    for notice in [
        "python_version",
        "disable_persistence:",
        "priority:",
        "graphs.*.description:",
    ] {
        assert_eq!(boot.matches(notice).count(), 1, "{notice}: {boot}");
    }
    let preflight = |origin: &str| {
        let mut stream = TcpStream::connect(&address).unwrap();
        write!(
            stream,
            "OPTIONS /threads HTTP/1.1\r\nHost: x\r\nConnection: close\r\nOrigin: {origin}\r\nAccess-Control-Request-Method: POST\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let allowed = preflight("https://app.example");
    assert!(allowed.starts_with("HTTP/1.1 200"), "{allowed}");
    assert!(
        allowed
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: https://app.example"),
        "{allowed}"
    );
    assert!(preflight("https://evil.example").starts_with("HTTP/1.1 400"));
    terminate_cleanly_within(&mut child, Duration::from_secs(10));
}

#[test]
fn a_langgraph_json_key_whose_absence_would_weaken_security_stops_the_boot() {
    let config = ConfigFile::write(
        "langgraph-encryption",
        &serde_json::json!({"graphs": {"chat": "rust:echo"}, "encryption": {"path": "./crypt.py:crypt"}}),
    );
    let output = server()
        .args(["dev", "--port", "0", "--config", &config.path()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("encryption") && said.contains("in the clear"),
        "{said}"
    );
}
