//! A stopped run's late writes are refused: a Python or JS node still sleeping when its
//! run is rolled back finishes after the rollback, and what it then writes must not
//! reach the thread. The binary serves the reference graphs (`examples/python-graphs`,
//! `examples/js-graphs`) through the bridges, with the interpreter SERVICE_PYTHON
//! (scripts/test makes a virtual environment with LangGraph), in memory and on
//! PostgreSQL (TEST_DATABASE_URL).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Database, Instance, request, spawn};

/// The binary serving the reference graphs: `dev`, or `start` on `database_url`.
fn python_graphs(database_url: Option<&str>) -> Instance {
    let python = std::env::var("SERVICE_PYTHON").unwrap_or_else(|_| {
        panic!(
            "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)"
        )
    });
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/python-graphs/langgraph.json"
    );
    let mut env = vec![("SERVICE_PYTHON", python.as_str())];
    let mode = match database_url {
        Some(url) => {
            env.push(("DATABASE_URL", url));
            "start"
        }
        None => "dev",
    };
    spawn(&[mode, "--port", "0", "--config", config], &env)
}

/// The binary serving the JS reference graphs (`examples/js-graphs`, their packages
/// installed there) through the Node bridge, in `dev`; Node is SERVICE_NODE or `node`.
fn js_graphs() -> Instance {
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/js-graphs/langgraph.json"
    );
    let node = std::env::var("SERVICE_NODE").ok();
    let env: Vec<(&str, &str)> = node
        .iter()
        .map(|node| ("SERVICE_NODE", node.as_str()))
        .collect();
    spawn(&["dev", "--port", "0", "--config", config], &env)
}

/// The run's status once `done` holds for it (bounded: a minute).
fn run_status_when(
    server: &Instance,
    thread_id: &str,
    run_id: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = request(
            server,
            "GET",
            &format!("/threads/{thread_id}/runs/{run_id}"),
            None,
        );
        let status = run["status"].as_str().unwrap_or_default().to_owned();
        if done(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "run {run_id} stayed {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One rollback over a sleeping node: the displaced run's node sleeps 600 ms, the run
/// that displaces it 1,200 ms, so the first node has finished, and tried to write,
/// before the second run ends.
fn rollback_over_a_sleeping_node(server: &Instance) {
    let thread = request(server, "POST", "/threads", Some(json!({})));
    let thread_id = thread["thread_id"].as_str().unwrap();
    let displaced = request(
        server,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        Some(json!({"assistant_id": "slow", "input": {"delay_ms": 600}})),
    );
    let displaced_id = displaced["run_id"].as_str().unwrap();
    run_status_when(server, thread_id, displaced_id, |status| {
        status == "running"
    });
    let second = request(
        server,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        Some(json!({
            "assistant_id": "slow",
            "input": {"delay_ms": 1200},
            "multitask_strategy": "rollback",
        })),
    );
    let second_id = second["run_id"].as_str().unwrap();
    let status = run_status_when(server, thread_id, second_id, |status| {
        !matches!(status, "pending" | "running")
    });
    assert_eq!(status, "success");

    let history = request(
        server,
        "POST",
        &format!("/threads/{thread_id}/history"),
        Some(json!({"limit": 100})),
    );
    let runs: Vec<&Value> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|state| &state["metadata"]["run_id"])
        .collect();
    assert!(
        runs.iter().all(|run| *run == &json!(second_id)),
        "the displaced run {displaced_id} left checkpoints: {runs:?}"
    );
    let state = request(server, "GET", &format!("/threads/{thread_id}/state"), None);
    assert_eq!(state["values"], json!({"delay_ms": 1200, "done": true}));
}

#[test]
fn a_rollback_over_a_sleeping_python_node_leaves_no_checkpoint_of_the_displaced_run() {
    let server = python_graphs(None);
    for _ in 0..20 {
        rollback_over_a_sleeping_node(&server);
    }
}

#[test]
fn a_rollback_over_a_sleeping_js_node_leaves_no_checkpoint_of_the_displaced_run() {
    let server = js_graphs();
    for _ in 0..10 {
        rollback_over_a_sleeping_node(&server);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_too_a_displaced_runs_late_checkpoint_is_refused() {
    let database = Database::create("fencing").await;
    let url = database.url();
    tokio::task::spawn_blocking(move || {
        let server = python_graphs(Some(&url));
        for _ in 0..20 {
            rollback_over_a_sleeping_node(&server);
        }
    })
    .await
    .expect("20 rollbacks");
    database.drop().await;
}
