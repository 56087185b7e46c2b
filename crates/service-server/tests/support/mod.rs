//! What the tests that start server processes on PostgreSQL share: a database of
//! their own, an instance of the binary, one HTTP request.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub mod private;

pub fn base_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A database of its own, dropped when the test ends.
pub struct Database {
    name: String,
}

impl Database {
    pub async fn create(label: &str) -> Self {
        let name = format!("svc_instances_{label}_{}", std::process::id());
        let (client, connection) = tokio_postgres::connect(&base_url(), tokio_postgres::NoTls)
            .await
            .expect("PostgreSQL reachable");
        tokio::spawn(connection);
        // Separate statements: several in one query run as one transaction.
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .unwrap();
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        Self { name }
    }

    pub async fn drop(self) {
        let (client, connection) = tokio_postgres::connect(&base_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let _ = client
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await;
    }

    pub fn url(&self) -> String {
        let base = base_url();
        let (server, _) = base.rsplit_once('/').unwrap();
        format!("{server}/{}", self.name)
    }
}

pub struct Instance {
    pub child: Child,
    pub address: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(database_url: &str) -> Instance {
    start_with(database_url, &[])
}

/// [`start`] with more environment.
pub fn start_with(database_url: &str, env: &[(&str, &str)]) -> Instance {
    let mut env = env.to_vec();
    env.push(("DATABASE_URL", database_url));
    spawn(&["start", "--port", "0"], &env)
}

/// The binary with `args` and `env`, once it listens.
pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Instance {
    let mut child = Command::new(env!("CARGO_BIN_EXE_service-server"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let address = listening_address(&mut log);
    // Keep draining the log so the server never blocks on a full pipe; its warnings
    // and errors go to the test's output, shown when the test fails.
    std::thread::spawn(move || {
        for line in log.lines().map_while(Result::ok) {
            if line.contains(" WARN ") || line.contains(" ERROR ") {
                eprintln!("server: {line}");
            }
        }
    });
    Instance { child, address }
}

/// One HTTP/1.1 request; the JSON body of the answer, which must be a 200. (A wait
/// whose result is not ready at once is answered chunked: [`call`] reads it whole.)
pub fn request(instance: &Instance, method: &str, path: &str, body: Option<Value>) -> Value {
    let reply = call(instance, method, path, &[], body);
    assert_eq!(reply.status, 200, "{method} {path}: {reply:?}");
    reply.body
}

/// Reads the server's log until it names the address it listens on.
pub fn listening_address(log: &mut impl BufRead) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            log.read_line(&mut line).unwrap() > 0,
            "server exited before listening"
        );
        if let Some(at) = line.find("listening on http://") {
            let rest = &line[at + "listening on http://".len()..];
            return rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                .collect();
        }
    }
}

/// An answer: status, headers (names lower-cased) and the JSON body (`Null` when
/// empty or not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// One HTTP/1.1 request with `headers`; any status.
pub fn call(
    instance: &Instance,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Reply {
    call_at(&instance.address, method, path, headers, body)
}

/// [`call`] to a server at `address`.
pub fn call_at(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Reply {
    try_call(address, method, path, headers, body, None).unwrap()
}

/// [`call`] to `address` that reports a connection failure or (with `timeout`) an
/// answer that does not come in time, instead of panicking.
pub fn try_call(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
    timeout: Option<std::time::Duration>,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(timeout)?;
    let body = body.map(|body| body.to_string()).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n{body}")?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let Some((head, raw)) = response.split_once("\r\n\r\n") else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("no answer to {method} {path}: {response:?}"),
        ));
    };
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let text = if chunked {
        dechunk(raw)
    } else {
        raw.to_owned()
    };
    Ok(Reply {
        status,
        headers,
        body: serde_json::from_str(text.trim()).unwrap_or(Value::Null),
    })
}

/// The payload of a chunked body.
fn dechunk(mut raw: &str) -> String {
    let mut body = String::new();
    while let Some((size, rest)) = raw.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        body.push_str(&rest[..size]);
        raw = rest[size..].trim_start_matches("\r\n");
    }
    body
}

/// A configuration file in the temporary directory, removed when dropped.
pub struct ConfigFile(pub std::path::PathBuf);

impl ConfigFile {
    /// `config` written to a file named after `label` and this process.
    pub fn write(label: &str, config: &Value) -> Self {
        let path =
            std::env::temp_dir().join(format!("service-{label}-{}.json", std::process::id()));
        std::fs::write(&path, config.to_string()).expect("config file written");
        Self(path)
    }

    pub fn path(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The resident memory of `pid` in bytes (Linux).
pub fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// A run of `body` queued on a new thread behind a blocker (a `slow` run of a
/// minute), so subscribers can join it before it produces its first frame: (thread,
/// blocker, run). Cancelling the blocker with [`release`] starts the run.
pub fn queued_run(instance: &Instance, mut body: Value) -> (String, String, String) {
    let thread = request(instance, "POST", "/threads", Some(serde_json::json!({})))["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/threads/{thread}/runs");
    let blocker = request(
        instance,
        "POST",
        &path,
        Some(serde_json::json!({"assistant_id": "slow", "input": {"delay_ms": 60000}})),
    )["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    body["multitask_strategy"] = "enqueue".into();
    let run = request(instance, "POST", &path, Some(body))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (thread, blocker, run)
}

/// Cancels the blocker of a [`queued_run`].
pub fn release(instance: &Instance, thread: &str, blocker: &str) {
    let reply = call(
        instance,
        "POST",
        &format!("/threads/{thread}/runs/{blocker}/cancel"),
        &[],
        None,
    );
    assert!(reply.status < 300, "cancel the blocker: {reply:?}");
}
