//! `store.index.embed` naming a Python embeddings object (`./embed.py:embeddings`): the
//! bridge's workers load it at boot (a mis-shaped export stops the boot naming it) and
//! embed every put and query, so a search ranks by meaning. SERVICE_PYTHON as for the
//! bridge's tests.

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;
use support::{call, request, spawn};

fn python() -> String {
    std::env::var("SERVICE_PYTHON").expect(
        "set SERVICE_PYTHON to a Python with langgraph installed (scripts/test makes e2e/.venv)",
    )
}

fn fixture(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python_embed")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_python_embeddings_object_ranks_store_searches() {
    let python = python();
    let config = fixture("langgraph.json");
    let server = spawn(
        &["dev", "--port", "0", "--config", &config],
        &[("SERVICE_PYTHON", &python), ("SERVICE_PYTHON_WORKERS", "1")],
    );
    for (key, text) in [
        ("cat", "the cat sat on the mat"),
        ("stocks", "stock prices fell sharply today"),
        ("dog", "a dog barked at the mailman"),
    ] {
        let put = json!({"namespace": ["docs"], "key": key, "value": {"text": text}});
        let stored = call(&server, "PUT", "/store/items", &[], Some(put));
        assert_eq!(stored.status, 204, "{:?}", stored.body);
    }
    let search = json!({"namespace_prefix": ["docs"], "query": "cat on a mat", "limit": 3});
    let found = request(&server, "POST", "/store/items/search", Some(search));
    let items = found["items"].as_array().expect("items");
    assert_eq!(items[0]["key"], "cat", "{found}");
    let (first, second) = (
        items[0]["score"].as_f64().expect("scored"),
        items[1]["score"].as_f64().expect("scored"),
    );
    assert!(first > second, "{found}");
}

#[test]
fn an_export_that_is_not_embeddings_stops_the_boot_naming_it() {
    let output = Command::new(env!("CARGO_BIN_EXE_service-server"))
        .args(["dev", "--port", "0", "--config", &fixture("broken.json")])
        .env("SERVICE_PYTHON", python())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("store.index.embed") && stderr.contains("not_embeddings"),
        "{stderr}"
    );
}
