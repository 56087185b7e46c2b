//! What the server binary logs (SPEC "Logging"): a failed run's block with its ids,
//! node, error, cause and stack; the same as fields of one JSON object with
//! SERVICE_LOG_FORMAT=json; the run activity `--verbose` adds; and a graph that
//! cannot load, reported in its block at boot while the other graphs serve.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{ConfigFile, call_at};

/// A serving binary whose log is read line by line.
struct Logged {
    child: Child,
    address: String,
    lines: Receiver<String>,
    /// Every line read so far.
    seen: Vec<String>,
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary with `args` and `env`, once it listens.
fn serve(args: &[&str], env: &[(&str, &str)]) -> Logged {
    let mut child = Command::new(env!("CARGO_BIN_EXE_service-server"))
        .args(args)
        .args(["--port", "0"])
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("DATABASE_URL")
        .env_remove("DATABASE_URI")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let log = BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = channel();
    std::thread::spawn(move || {
        for line in log.lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    let mut logged = Logged {
        child,
        address: String::new(),
        lines,
        seen: Vec::new(),
    };
    let listening = logged.until(|line| line.contains("listening on http://"));
    let at = listening.find("listening on http://").unwrap() + "listening on http://".len();
    logged.address = listening[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    logged
}

impl Logged {
    /// Reads the log until a line satisfies `wanted` (within 30 s), and returns it.
    fn until(&mut self, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                panic!("not logged within 30 s; the log:\n{}", self.seen.join("\n"));
            };
            self.seen.push(line.clone());
            if wanted(&line) {
                return line;
            }
        }
    }

    /// The block whose first line contains `head` (read already, or read now): that
    /// line and the indented ones after it, written with it.
    fn block(&mut self, head: &str) -> String {
        let start = match self.seen.iter().position(|line| line.contains(head)) {
            Some(start) => start,
            None => {
                self.until(|line| line.contains(head));
                self.seen.len() - 1
            }
        };
        let mut block: Vec<String> = self.seen[start..]
            .iter()
            .take_while(|line| !line.is_empty())
            .enumerate()
            .take_while(|(index, line)| *index == 0 || line.starts_with("  "))
            .map(|(_, line)| line.clone())
            .collect();
        // A block read just now may not have all its lines in `seen` yet.
        if start + block.len() == self.seen.len() {
            while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
                self.seen.push(line.clone());
                if !line.starts_with("  ") {
                    break;
                }
                block.push(line);
            }
        }
        block.join("\n")
    }
}

/// A `fail` run on a new thread, waited for; its row.
fn failed_run(address: &str) -> Value {
    let thread = call_at(address, "POST", "/threads", &[], Some(json!({}))).body;
    let thread_id = thread["thread_id"].as_str().unwrap();
    let answer = call_at(
        address,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &[],
        Some(json!({"assistant_id": "fail", "input": {"messages": []}})),
    );
    assert_eq!(answer.body["__error__"]["message"], "boom", "{answer:?}");
    let runs = call_at(
        address,
        "GET",
        &format!("/threads/{thread_id}/runs"),
        &[],
        None,
    );
    runs.body[0].clone()
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[test]
fn a_failed_run_prints_its_block_with_ids_node_error_cause_and_stack() {
    let mut server = serve(&["dev"], &[]);
    let run = failed_run(&server.address);
    let block = server.block("run failed");
    assert!(block.contains(" ERROR run failed"), "{block}");
    for part in [
        format!("\n  run        {}", text(&run["run_id"])),
        format!("\n  assistant  {}", text(&run["assistant_id"])),
        format!("\n  thread     {}", text(&run["thread_id"])),
        "\n  graph      fail".to_owned(),
        "\n  node       explode".to_owned(),
        "\n  error      ValueError: boom".to_owned(),
        "\n  caused by  RuntimeError: root cause".to_owned(),
        "\n  stack\n    ValueError: boom\n        at ".to_owned(),
    ] {
        assert!(block.contains(&part), "{part:?} missing from:\n{block}");
    }
    // The stack starts at the node's own code, not the runtime's, and the code frame
    // shows the line that made the error.
    let stack = &block[block.find("\n  stack\n").unwrap()..];
    let first_frame = stack.lines().nth(3).unwrap_or_default();
    assert!(
        first_frame.contains("service_example_graphs::fail")
            && first_frame.contains("examples/graphs/src/fail.rs:"),
        "{block}"
    );
    let frame = &block[block.find("\n  code frame\n").expect("a code frame")..];
    assert!(frame.contains("examples/graphs/src/fail.rs:"), "{block}");
    assert!(
        frame
            .lines()
            .any(|line| line.trim_start().starts_with('>') && line.contains("\"boom\"")),
        "{block}"
    );
}

#[test]
fn the_json_format_logs_one_object_per_line_with_the_runs_ids_as_fields() {
    let mut server = serve(&["dev"], &[("SERVICE_LOG_FORMAT", "json")]);
    let run = failed_run(&server.address);
    let failed = server.until(|line| line.contains("\"run failed\""));
    let failed: Value = serde_json::from_str(&failed).unwrap();
    assert_eq!(failed["level"], "ERROR");
    assert_eq!(failed["message"], "run failed");
    for id in ["run_id", "thread_id", "assistant_id"] {
        assert_eq!(failed[id], run[id], "{id}: {failed}");
    }
    assert_eq!(failed["node"], "explode");
    assert_eq!(failed["error"], "ValueError: boom");
    assert_eq!(failed["cause"], "RuntimeError: root cause");
    assert!(
        text(&failed["stack"]).starts_with("ValueError: boom\n    at "),
        "{failed}"
    );
    let finished = server.until(|line| line.contains("\"run finished\""));
    let finished: Value = serde_json::from_str(&finished).unwrap();
    assert_eq!(finished["run_id"], run["run_id"]);
    assert_eq!(finished["assistant_id"], run["assistant_id"]);
    assert_eq!(finished["status"], "error");
    for line in &server.seen {
        let object: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("{line}"));
        assert!(object["timestamp"].is_string(), "{line}");
    }
}

#[test]
fn verbose_logs_each_runs_start_and_the_interrupts_it_waits_on() {
    let mut quiet = serve(&["dev"], &[]);
    let thread = call_at(&quiet.address, "POST", "/threads", &[], Some(json!({}))).body;
    let path = format!("/threads/{}/runs/wait", text(&thread["thread_id"]));
    let body = json!({"assistant_id": "approval", "input": {"topic": "logs"}});
    call_at(&quiet.address, "POST", &path, &[], Some(body.clone()));
    quiet.until(|line| line.contains("run finished"));
    assert!(
        !quiet.seen.iter().any(|line| line.contains("run started")),
        "no activity without --verbose: {:?}",
        quiet.seen
    );

    let mut verbose = serve(&["dev", "--verbose"], &[]);
    let thread = call_at(&verbose.address, "POST", "/threads", &[], Some(json!({}))).body;
    let thread_id = text(&thread["thread_id"]).to_owned();
    let path = format!("/threads/{thread_id}/runs/wait");
    let answer = call_at(&verbose.address, "POST", &path, &[], Some(body));
    assert!(answer.body["__interrupt__"].is_array(), "{answer:?}");
    let started = verbose.until(|line| line.contains("run started"));
    assert!(
        started.contains(&thread_id) && started.contains("graph_id=\"approval\""),
        "{started}"
    );
    let interrupted = verbose.until(|line| line.contains("run interrupted"));
    assert!(interrupted.contains("logs"), "the prompt: {interrupted}");
    let finished = verbose.until(|line| line.contains("run finished"));
    assert!(
        finished.contains("elapsed_ms=") && finished.contains("frames="),
        "{finished}"
    );
}

#[test]
fn a_graph_that_cannot_load_is_reported_at_boot_and_the_others_serve() {
    let python = std::env::var("SERVICE_PYTHON").expect(
        "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)",
    );
    let file = std::env::temp_dir().join(format!("broken_graph_{}.py", std::process::id()));
    std::fs::write(
        &file,
        "import missing_dependency_of_the_graph\ngraph = None\n",
    )
    .unwrap();
    let config = ConfigFile::write(
        "load-failure",
        &json!({"graphs": {
            "broken": format!("./{}:graph", file.file_name().unwrap().to_string_lossy()),
            "echo": "rust:echo",
        }}),
    );
    let mut server = serve(
        &["dev", "--config", &config.path()],
        &[("SERVICE_PYTHON", &python), ("SERVICE_PYTHON_WORKERS", "1")],
    );
    let block = server.block("graph broken failed to load");
    assert!(block.contains(" ERROR "), "{block}");
    assert!(
        block.contains("missing_dependency_of_the_graph"),
        "the reason: {block}"
    );
    let thread = call_at(&server.address, "POST", "/threads", &[], Some(json!({}))).body;
    let path = format!("/threads/{}/runs/wait", text(&thread["thread_id"]));
    let echoed = call_at(
        &server.address,
        "POST",
        &path,
        &[],
        Some(
            json!({"assistant_id": "echo", "input": {"messages": [{"type": "human", "content": "hi"}]}}),
        ),
    );
    assert_eq!(echoed.status, 200, "{echoed:?}");
    assert!(echoed.body.to_string().contains("echo: hi"), "{echoed:?}");
    let _ = std::fs::remove_file(file);
}
