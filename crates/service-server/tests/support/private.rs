//! A PostgreSQL cluster and a Redis server of one test's own, on free ports, which
//! the test may stop and start (the machine's shared servers serve other tests).
//! PostgreSQL refuses to run as root: as root, its commands run as the `postgres`
//! system user.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
const PG_USER: &str = "postgres";

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        == Some("0")
}

fn wait_for(port: u16, up: bool) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() != up {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "port {port} {} within 60 s",
            if up { "listens" } else { "closes" }
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A PostgreSQL program, run as its user when this is root.
fn pg_command(program: &str) -> Command {
    let program = format!("{PG_BIN}/{program}");
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", PG_USER, "--", &program]);
        command
    } else {
        Command::new(program)
    }
}

/// A private PostgreSQL cluster, removed when dropped.
pub struct Postgres {
    dir: PathBuf,
    pub port: u16,
}

impl Postgres {
    /// A new cluster (initdb), started.
    pub fn start(label: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("svc-pg-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            let owned = Command::new("chown")
                .args([PG_USER, &dir.to_string_lossy()])
                .status()
                .unwrap();
            assert!(owned.success(), "chown {}", dir.display());
        }
        let cluster = Self {
            dir,
            port: free_port(),
        };
        cluster.run(&[
            "initdb",
            "-D",
            &cluster.data(),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "-N",
        ]);
        cluster.resume();
        cluster
    }

    fn data(&self) -> String {
        self.dir.join("data").to_string_lossy().into_owned()
    }

    fn run(&self, args: &[&str]) {
        let output = pg_command(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// postgres://…/postgres on this cluster.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the stopped cluster and waits until it listens.
    pub fn resume(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("server.log").to_string_lossy().into_owned();
        self.run(&[
            "pg_ctl",
            "-D",
            &self.data(),
            "-l",
            &log,
            "-w",
            "-t",
            "60",
            "-o",
            &options,
            "start",
        ]);
        wait_for(self.port, true);
    }

    /// Stops the cluster (fast: open sessions are ended, committed work is kept).
    pub fn stop(&self) {
        self.run(&["pg_ctl", "-D", &self.data(), "-m", "fast", "-w", "stop"]);
        wait_for(self.port, false);
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = pg_command("pg_ctl")
            .args(["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A private Redis server without persistence: a restart loses every key.
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
}

impl Redis {
    pub fn start() -> Self {
        let mut redis = Self {
            child: None,
            port: free_port(),
        };
        redis.resume();
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the stopped server on the same port and waits until it listens.
    pub fn resume(&mut self) {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        self.child = Some(child);
        wait_for(self.port, true);
    }

    /// Kills the server (as a crash would) and waits until its port is closed.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        wait_for(self.port, false);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
