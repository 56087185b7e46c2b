//! `store.adapter` naming a LangGraph `BaseStore` (tests/store_adapter/store.py, an
//! InMemoryStore subclass): the Python workers load it at boot and it keeps the store
//! items for clients (the Python SDK's store calls) and graphs alike, while the server
//! applies its own filter, ordering, paging and namespace rules. A mis-shaped export,
//! `store.index`, and `store.ttl` with an adapter that cannot sweep stop the boot; an
//! adapter that raises is a 503 saying so.
//! SERVICE_PYTHON as for the bridge's tests.

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use support::{call, request, spawn};

fn python() -> String {
    std::env::var("SERVICE_PYTHON").expect(
        "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)",
    )
}

fn fixture(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/store_adapter")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_python_base_store_keeps_the_items_of_clients_and_graphs() {
    let python = python();
    let server = spawn(
        &["dev", "--port", "0", "--config", &fixture("langgraph.json")],
        // One worker: the InMemoryStore lives in that process.
        &[("SERVICE_PYTHON", &python), ("SERVICE_PYTHON_WORKERS", "1")],
    );
    let sdk = Command::new(&python)
        .args([
            fixture("sdk_calls.py"),
            format!("http://{}", server.address),
        ])
        .output()
        .unwrap();
    assert!(
        sdk.status.success(),
        "{}",
        String::from_utf8_lossy(&sdk.stderr)
    );
    let report: Value = serde_json::from_slice(&sdk.stdout).unwrap();
    assert_eq!(
        report["wildcard"],
        json!(["c", "b"]),
        "a wildcard prefix, an operator filter and a page, newest first"
    );
    assert_eq!(
        report["namespaces"],
        json!([["notes", "u1"], ["notes", "u2"]])
    );
    assert_eq!(report["roots"], json!([["notes"]]));
    assert_eq!(report["got"], json!({"text": "note b", "n": 2}));
    assert_eq!(report["after_delete"], json!(["c", "b", "a"]));

    let run = request(
        &server,
        "POST",
        "/runs/wait",
        Some(json!({"assistant_id": "memory", "input": {}})),
    );
    let graph = &run["report"];
    assert_eq!(
        graph["found"],
        json!(["from-graph", "c", "b"]),
        "the graph's search: {run}"
    );
    assert_eq!(
        graph["namespaces"],
        json!([["notes", "graph"], ["notes", "u1"], ["notes", "u2"]])
    );
    assert_eq!(graph["got"], json!({"text": "note a", "n": 1}));
    assert_eq!(
        graph["held"],
        json!(["a", "b", "c", "from-graph"]),
        "the adapter holds what clients and the graph put"
    );
    for op in ["PutOp", "GetOp", "SearchOp", "ListNamespacesOp"] {
        assert!(
            graph["seen"][op].as_u64() > Some(0),
            "{op} reached the adapter: {graph}"
        );
    }
    let written = request(
        &server,
        "GET",
        "/store/items?namespace=notes.graph&key=from-graph",
        None,
    );
    assert_eq!(
        written["value"],
        json!({"text": "written by a run", "n": 10})
    );
}

#[test]
fn an_adapter_that_raises_is_a_503_naming_the_adapter_and_its_error() {
    // `start`: production, stacks hidden; the adapter's account is still given.
    let server = spawn(
        &["start", "--port", "0", "--config", &fixture("down.json")],
        &[
            ("SERVICE_PYTHON", &python()),
            ("SERVICE_PYTHON_WORKERS", "1"),
        ],
    );
    let put = json!({"namespace": ["notes"], "key": "a", "value": {"text": "x"}});
    let search = json!({"namespace_prefix": ["notes"]});
    for (method, path, body) in [
        ("PUT", "/store/items", Some(put)),
        ("GET", "/store/items?namespace=notes&key=a", None),
        ("POST", "/store/items/search", Some(search)),
        ("POST", "/store/namespaces", Some(json!({}))),
    ] {
        let reply = call(&server, method, path, &[], body);
        assert_eq!(reply.status, 503, "{method} {path}: {reply:?}");
        assert_eq!(reply.body["code"], "store_adapter_failed", "{reply:?}");
        let message = reply.body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("./store.py:down")
                && message.contains("ConnectionError: the notes database is down"),
            "{method} {path}: {message}"
        );
    }
}

fn refused(config: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_service-server"))
        .args(["dev", "--port", "0", "--config", &fixture(config)])
        .env("SERVICE_PYTHON", python())
        .env("SERVICE_PYTHON_WORKERS", "1")
        .env("OPENAI_API_KEY", "sk-unused")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!output.status.success(), "{config} booted");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn an_export_that_is_not_a_base_store_stops_the_boot_naming_it() {
    let stderr = refused("broken.json");
    assert!(
        stderr.contains("store.adapter") && stderr.contains("not a LangGraph BaseStore"),
        "{stderr}"
    );
}

#[test]
fn an_index_with_an_adapter_stops_the_boot() {
    let stderr = refused("indexed.json");
    assert!(
        stderr.contains("store.index together with a store adapter"),
        "{stderr}"
    );
}

#[test]
fn a_store_ttl_with_an_adapter_that_cannot_sweep_stops_the_boot() {
    let stderr = refused("ttl.json");
    assert!(stderr.contains("sweeps expired items"), "{stderr}");
}
