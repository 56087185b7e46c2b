//! The server binary: configuration mistakes stop the boot with a message naming
//! them, and SIGTERM stops a serving process cleanly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
fn a_setting_of_a_feature_not_built_yet_stops_the_boot_saying_so() {
    let output = server()
        .args(["start", "--port", "0", "--no-console"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--no-console is not supported yet"),
        "stderr: {stderr}"
    );
}

#[test]
fn an_unknown_config_file_key_stops_the_boot() {
    let path = std::env::temp_dir().join(format!("service-config-{}.json", std::process::id()));
    std::fs::write(&path, r#"{"grpahs": {}}"#).unwrap();
    let output = server()
        .args(["dev", "--port", "0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("grpahs"));
}

/// Reads the server's log until it names the address it listens on.
fn listening_address(log: &mut impl BufRead) -> String {
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
            started.elapsed() < Duration::from_secs(10),
            "server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "clean exit after SIGTERM: {status}");
}
