//! `store.adapter` naming a LangGraph `BaseStore` (tests/store_adapter/store.py, an
//! InMemoryStore subclass): the Python workers load it at boot and it keeps the store
//! items for clients (the Python SDK's store calls) and graphs alike, while the server
//! applies its own filter, ordering, paging and namespace rules. A mis-shaped export,
//! `store.index`, and `store.ttl` with an adapter that cannot sweep stop the boot; an
//! adapter that raises is a 503 saying so. The same holds for a LangGraph.js `BaseStore`
//! (tests/store_adapter/js/store.ts, Map-backed) the Node workers load.
//! SERVICE_PYTHON as for the bridge's tests; the JS ones need `npm ci` in
//! examples/js-graphs (SERVICE_NODE, default `node`).

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
    every_store_route_fails_naming(
        &server,
        "./store.py:down",
        "ConnectionError: the notes database is down",
    );
}

/// Every store route answers 503 `store_adapter_failed`, its message naming the adapter
/// and the error it raised.
fn every_store_route_fails_naming(server: &support::Instance, adapter: &str, error: &str) {
    let put = json!({"namespace": ["notes"], "key": "a", "value": {"text": "x"}});
    let search = json!({"namespace_prefix": ["notes"]});
    for (method, path, body) in [
        ("PUT", "/store/items", Some(put)),
        ("GET", "/store/items?namespace=notes&key=a", None),
        ("POST", "/store/items/search", Some(search)),
        ("POST", "/store/namespaces", Some(json!({}))),
    ] {
        let reply = call(server, method, path, &[], body);
        assert_eq!(reply.status, 503, "{method} {path}: {reply:?}");
        assert_eq!(reply.body["code"], "store_adapter_failed", "{reply:?}");
        let message = reply.body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(adapter) && message.contains(error),
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

/// The JS fixtures (tests/store_adapter/js) copied into a project of their own, whose
/// node_modules is the JS reference graphs' (`npm ci` in examples/js-graphs first, as
/// scripts/test does); removed when dropped.
struct JsProject(PathBuf);

impl JsProject {
    fn new(label: &str) -> Self {
        let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/js-graphs/node_modules")
            .canonicalize()
            .expect("run `npm ci` in examples/js-graphs first (scripts/test does)");
        let dir =
            std::env::temp_dir().join(format!("service-js-adapter-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(fixture("js")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        std::os::unix::fs::symlink(modules, dir.join("node_modules")).unwrap();
        Self(dir)
    }

    fn config(&self, file: &str) -> String {
        self.0.join(file).to_string_lossy().into_owned()
    }
}

impl Drop for JsProject {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A store call that must succeed (a put or delete answers without a body).
fn store_call(server: &support::Instance, method: &str, path: &str, body: Value) {
    let reply = call(server, method, path, &[], Some(body));
    assert!(reply.status < 300, "{method} {path}: {reply:?}");
}

fn keys(found: &Value) -> Value {
    found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["key"].clone())
        .collect()
}

#[test]
fn a_langgraph_js_base_store_keeps_the_items_under_the_services_own_rules() {
    let project = JsProject::new("store");
    // No JS graph: the adapter alone starts the Node workers (one: the Map lives there).
    let server = spawn(
        &[
            "dev",
            "--port",
            "0",
            "--config",
            &project.config("langgraph.json"),
        ],
        &[("SERVICE_NODE_WORKERS", "1")],
    );
    let seeded = request(
        &server,
        "GET",
        "/store/items?namespace=archive&key=first",
        None,
    );
    assert_eq!(
        seeded["value"],
        json!({"text": "kept before the server started"}),
        "what the store held is read through it: {seeded}"
    );
    assert!(
        seeded["created_at"]
            .as_str()
            .is_some_and(|at| at.starts_with("2024-01-02T03:04:05")),
        "{seeded}"
    );
    for (user, key, n) in [
        ("u1", "a", 1),
        ("u1", "b", 2),
        ("u2", "c", 3),
        ("u2", "d", 4),
    ] {
        let body = json!({"namespace": ["notes", user], "key": key, "value": {"text": format!("note {key}"), "n": n}});
        store_call(&server, "PUT", "/store/items", body);
    }
    let wildcard = request(
        &server,
        "POST",
        "/store/items/search",
        Some(
            json!({"namespace_prefix": ["notes", "*"], "filter": {"n": {"$gt": 1}}, "limit": 2, "offset": 1}),
        ),
    );
    assert_eq!(
        keys(&wildcard),
        json!(["c", "b"]),
        "a wildcard prefix, an operator filter and a page, newest first"
    );
    let namespaces = request(
        &server,
        "POST",
        "/store/namespaces",
        Some(json!({"prefix": ["notes"], "max_depth": 2})),
    );
    assert_eq!(
        namespaces["namespaces"],
        json!([["notes", "u1"], ["notes", "u2"]])
    );
    let roots = request(
        &server,
        "POST",
        "/store/namespaces",
        Some(json!({"max_depth": 1})),
    );
    assert_eq!(roots["namespaces"], json!([["archive"], ["notes"]]));
    let got = request(
        &server,
        "GET",
        "/store/items?namespace=notes.u1&key=b",
        None,
    );
    assert_eq!(got["value"], json!({"text": "note b", "n": 2}));
    store_call(
        &server,
        "DELETE",
        "/store/items",
        json!({"namespace": ["notes", "u2"], "key": "d"}),
    );
    let remaining = request(
        &server,
        "POST",
        "/store/items/search",
        Some(json!({"namespace_prefix": ["notes"], "limit": 10})),
    );
    assert_eq!(keys(&remaining), json!(["c", "b", "a"]));
    // A LangGraph.js store keeps no expiry: an item's ttl is refused, not dropped.
    let ttl = call(
        &server,
        "PUT",
        "/store/items",
        &[],
        Some(json!({"namespace": ["notes"], "key": "e", "value": {}, "ttl": 5})),
    );
    assert_eq!(ttl.status, 400, "{ttl:?}");
    assert!(
        ttl.body["message"]
            .as_str()
            .is_some_and(|message| message.contains("does not support ttl")),
        "{ttl:?}"
    );
}

#[test]
fn a_js_adapter_that_throws_is_a_503_naming_the_adapter_and_its_error() {
    let project = JsProject::new("down");
    let server = spawn(
        &[
            "start",
            "--port",
            "0",
            "--config",
            &project.config("down.json"),
        ],
        &[("SERVICE_NODE_WORKERS", "1")],
    );
    every_store_route_fails_naming(
        &server,
        "./store.ts:down",
        "Error: the notes database is down",
    );
}

#[test]
fn a_js_graphs_store_calls_reach_the_js_adapter_in_the_same_worker() {
    let project = JsProject::new("graph");
    let server = spawn(
        &[
            "dev",
            "--port",
            "0",
            "--config",
            &project.config("graph.json"),
        ],
        &[("SERVICE_NODE_WORKERS", "1")],
    );
    for (user, key, n) in [("u1", "a", 1), ("u1", "b", 2), ("u2", "c", 3)] {
        let body = json!({"namespace": ["notes", user], "key": key, "value": {"text": format!("note {key}"), "n": n}});
        store_call(&server, "PUT", "/store/items", body);
    }
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
    assert_eq!(graph["got"], json!({"text": "note a", "n": 1}));
    assert_eq!(
        graph["namespaces"],
        json!({
            "notes": [["notes", "graph"], ["notes", "u1"], ["notes", "u2"]],
            "page": [["notes", "u1"]],
            "suffix": [["notes", "u2"]],
            "roots": [["archive"], ["notes"]],
        }),
        "the graph's listNamespaces, by prefix, page, suffix and depth: {run}"
    );
    assert_eq!(
        graph["held"],
        json!(["a", "b", "c", "from-graph"]),
        "the adapter holds what clients and the graph put"
    );
    for op in ["put", "get", "search", "listNamespaces"] {
        assert!(
            graph["seen"][op].as_u64() > Some(0),
            "{op} reached the adapter: {graph}"
        );
    }
}

#[test]
fn a_js_export_that_is_not_a_base_store_or_a_store_ttl_stops_the_boot() {
    let project = JsProject::new("refused");
    for (config, says) in [
        ("broken.json", "./store.ts:notAStore"),
        ("broken.json", "not a LangGraph BaseStore"),
        ("ttl.json", "sweeps expired items"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_service-server"))
            .args(["dev", "--port", "0", "--config", &project.config(config)])
            .env("SERVICE_NODE_WORKERS", "1")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(!output.status.success(), "{config} booted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("store.adapter") || stderr.contains("store adapter"),
            "{stderr}"
        );
        assert!(stderr.contains(says), "{config}: {stderr}");
    }
}
