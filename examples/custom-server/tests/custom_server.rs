//! The custom server is the bundled server over its own graph: it boots with the
//! binary's flags, environment knobs and configuration file, and runs its graph over
//! HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

fn custom_server() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_custom-server"));
    command.env_remove("RUST_LOG").env("NO_COLOR", "1");
    command
}

/// A configuration file of its own, removed when the test ends.
struct ConfigFile(PathBuf);

impl ConfigFile {
    fn new(label: &str, config: Value) -> Self {
        let path =
            std::env::temp_dir().join(format!("custom-server-{label}-{}.json", std::process::id()));
        std::fs::write(&path, config.to_string()).unwrap();
        Self(path)
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A serving process, killed when dropped.
struct Serving {
    child: Child,
    address: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(command: &mut Command) -> Serving {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let address = loop {
        line.clear();
        assert!(
            log.read_line(&mut line).unwrap() > 0,
            "server exited before listening"
        );
        if let Some(at) = line.find("listening on http://") {
            break line[at + "listening on http://".len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                .collect::<String>();
        }
    };
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in log.lines() {});
    Serving { child, address }
}

/// One request; the status and JSON body of the answer. HTTP/1.0, so a streamed body
/// ends with the connection instead of being chunked.
fn request(server: &Serving, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(&server.address).unwrap();
    let body = body.map(|body| body.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[test]
fn the_custom_server_serves_its_own_graph_as_its_configuration_says() {
    let config = ConfigFile::new("graphs", json!({"graphs": {"journal": "notes"}}));
    let server = serve(
        custom_server()
            .args([
                "dev",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--concurrency",
                "2",
                "--config",
            ])
            .arg(&config.0)
            .env("SERVICE_MAX_PAGE_SIZE", "1"),
    );

    // The configuration file's `graphs` block renames the program's own graph.
    let (_, info) = request(&server, "GET", "/info", None);
    assert_eq!(info["graphs"], json!(["journal"]));

    let (_, thread) = request(&server, "POST", "/threads", Some(json!({})));
    let thread = thread["thread_id"].as_str().unwrap().to_owned();
    for note in ["first", "second"] {
        let (status, _) = request(
            &server,
            "POST",
            &format!("/threads/{thread}/runs/wait"),
            Some(json!({"assistant_id": "journal", "input": {"note": note}})),
        );
        assert_eq!(status, 200);
    }
    // The graph kept the thread's notes across runs, in the server's checkpointer.
    let (_, state) = request(&server, "GET", &format!("/threads/{thread}/state"), None);
    assert_eq!(state["values"]["notes"], json!(["first", "second"]));
    assert_eq!(state["values"]["count"], 2);

    // SERVICE_MAX_PAGE_SIZE bounds every list.
    request(&server, "POST", "/threads", Some(json!({})));
    let (_, page) = request(
        &server,
        "POST",
        "/threads/search",
        Some(json!({"limit": 10})),
    );
    assert_eq!(page.as_array().unwrap().len(), 1);
}

/// `command`'s boot is refused with a message naming `says`.
fn refused(command: &mut Command, says: &str) {
    let output = command.output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(says), "stderr: {stderr}");
}

#[test]
fn the_custom_server_refuses_what_the_bundled_server_refuses() {
    refused(
        custom_server()
            .args(["start", "--port", "0"])
            .env("SERVICE_HEAP_WARN_PERCENT", "150"),
        "SERVICE_HEAP_WARN_PERCENT",
    );
    let adapter = ConfigFile::new("adapter", json!({"store": {"adapter": "./store.py:store"}}));
    refused(
        custom_server()
            .args(["dev", "--port", "0", "--config"])
            .arg(&adapter.0),
        "store.adapter failed to load",
    );
    let alias = ConfigFile::new("alias", json!({"graphs": {"chat": "echo"}}));
    refused(
        custom_server()
            .args(["dev", "--port", "0", "--config"])
            .arg(&alias.0),
        "graphs.chat",
    );
}
