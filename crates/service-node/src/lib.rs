//! The Node graph bridge: LangGraph.js graphs, unmodified, served as
//! [`AgentGraph`](service_graph::AgentGraph)s.
//!
//! The JS side (the modules of `js/bridge/`, shipped inside the binary) speaks the Python bridge's
//! worker protocol, so the supervision, the engine-facing graphs and the calls back to
//! the server's checkpointer and store are service-python's: this crate supplies the
//! Node [`Runtime`] and checks the versions. Each worker runs in the config file's
//! directory, so `@langchain/langgraph` (and `tsx` for TypeScript graphs) come from
//! the user's own `node_modules`. A `store.adapter` naming a LangGraph.js `BaseStore`
//! is served the same way ([`Bridge::store_adapter`]). docs/js-graphs.md describes it
//! for users.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use service_python::Runtime;
pub use service_python::{Bridge, BridgeError};
pub use ui::{UiFile, bundle_ui};

mod ui;

/// The Node side, shipped inside the binary: the program `node -e` runs, which writes
/// the modules to a private temporary directory, imports them and removes it
/// (docs/architecture.md, "The Node bridge's modules").
const BOOT_MJS: &str = include_str!("../js/bridge/boot.mjs");

/// The bridge's modules, by file name, which `BOOT_MJS` reads from this variable.
const MODULES_VARIABLE: &str = "SERVICE_BRIDGE_MODULES";
const MODULES: [(&str, &str); 7] = [
    ("main.mjs", include_str!("../js/bridge/main.mjs")),
    ("protocol.mjs", include_str!("../js/bridge/protocol.mjs")),
    ("graphs.mjs", include_str!("../js/bridge/graphs.mjs")),
    ("runs.mjs", include_str!("../js/bridge/runs.mjs")),
    ("saver.mjs", include_str!("../js/bridge/saver.mjs")),
    ("store.mjs", include_str!("../js/bridge/store.mjs")),
    ("adapter.mjs", include_str!("../js/bridge/adapter.mjs")),
];

/// `MODULES` as the JSON object `BOOT_MJS` reads.
fn modules_json() -> String {
    serde_json::to_string(&BTreeMap::from(MODULES)).expect("strings serialize")
}

/// The oldest Node the bridge runs on.
const NODE_MAJOR: u64 = 20;

/// What to serve and how to run Node.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The interpreter (`SERVICE_NODE`, default `node` on PATH).
    pub node: OsString,
    /// Graph id → `./path/file.ts:export`.
    pub graphs: BTreeMap<String, String>,
    /// The directory graph paths are relative to (the config file's); node_modules is
    /// found from here as Node finds it.
    pub base: PathBuf,
    /// Environment of the workers, over the server's own (`env`).
    pub env: Vec<(String, String)>,
    /// How many worker processes run.
    pub workers: usize,
    /// langgraph.json's `node_version`: the major version the graphs need.
    pub node_version: Option<String>,
    /// The `store.adapter` (`./store.ts:store`, a LangGraph.js `BaseStore` instance)
    /// the workers load at boot.
    pub store_adapter: Option<String>,
}

impl NodeOptions {
    /// Options for `graphs` relative to `base`, with `node`, one worker per CPU.
    pub fn new(graphs: BTreeMap<String, String>, base: impl Into<PathBuf>) -> Self {
        Self {
            node: OsString::from("node"),
            graphs,
            base: base.into(),
            env: Vec::new(),
            workers: std::thread::available_parallelism().map_or(1, usize::from),
            node_version: None,
            store_adapter: None,
        }
    }
}

/// Starts the Node workers and waits until each has loaded the graphs and the store
/// adapter. A graph that fails to load does not stop the others (see
/// [`Bridge::failures`]); a missing Node, one older than 20 or than `node_version`, a
/// project without `@langchain/langgraph` 1.x, or a store adapter that fails to load
/// does.
pub async fn start(options: NodeOptions) -> Result<Bridge, BridgeError> {
    let runtime = Runtime {
        language: "Node",
        program: options.node,
        program_variable: "SERVICE_NODE",
        args: vec![
            "--input-type=module".into(),
            "--enable-source-maps".into(),
            "-e".into(),
            BOOT_MJS.into(),
        ],
        env: vec![(MODULES_VARIABLE.into(), modules_json())],
        version_field: "node",
        package: "@langchain/langgraph",
        install: "npm install @langchain/langgraph in the project of langgraph.json",
    };
    let spec = serde_json::json!({
        "graphs": options.graphs,
        "base": options.base.to_string_lossy(),
        "store_adapter": options.store_adapter,
    });
    let bridge = Bridge::start_runtime(
        runtime,
        options.base,
        options.env,
        &spec,
        options.graphs.into_keys().collect(),
        options.workers,
        options.store_adapter,
    )
    .await?;
    check_node(bridge.versions().0, options.node_version.as_deref())?;
    Ok(bridge)
}

/// Refuses a Node older than the bridge needs or than langgraph.json's `node_version`.
fn check_node(running: &str, wanted: Option<&str>) -> Result<(), BridgeError> {
    let major = |version: &str| -> Option<u64> {
        version
            .trim()
            .trim_start_matches('v')
            .split('.')
            .next()?
            .parse()
            .ok()
    };
    let Some(have) = major(running) else {
        return Err(BridgeError::Boot(format!(
            "Node graphs: the worker reported no Node version ({running:?})"
        )));
    };
    if have < NODE_MAJOR {
        return Err(BridgeError::Boot(format!(
            "Node graphs: Node {running} is too old; the bridge needs Node {NODE_MAJOR} or newer (set SERVICE_NODE)"
        )));
    }
    match wanted {
        Some(wanted) => match major(wanted) {
            Some(need) if have >= need => Ok(()),
            Some(_) => Err(BridgeError::Boot(format!(
                "Node graphs: langgraph.json asks for node_version {wanted}, but SERVICE_NODE runs Node {running}"
            ))),
            None => Err(BridgeError::Boot(format!(
                "Node graphs: node_version {wanted:?} is not a Node major version (e.g. \"20\")"
            ))),
        },
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{MODULES, check_node, modules_json};

    #[test]
    fn the_modules_fit_one_environment_variable_and_are_all_shipped() {
        // Linux refuses to start a program with an environment string over 128 KiB.
        assert!(
            modules_json().len() < 100 * 1024,
            "{}",
            modules_json().len()
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("js/bridge");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                name == "boot.mjs" || MODULES.iter().any(|(shipped, _)| *shipped == name),
                "js/bridge/{name} is not in MODULES"
            );
        }
    }

    #[test]
    fn node_version_is_a_floor_on_the_running_major() {
        assert!(check_node("20.20.2", None).is_ok());
        assert!(check_node("22.1.0", Some("20")).is_ok());
        assert!(check_node("20.20.2", Some("20")).is_ok());
        let too_old = check_node("20.20.2", Some("22")).unwrap_err().to_string();
        assert!(too_old.contains("node_version 22"), "{too_old}");
        let ancient = check_node("18.19.0", None).unwrap_err().to_string();
        assert!(ancient.contains("Node 20 or newer"), "{ancient}");
        assert!(check_node("20.1.0", Some("lts")).is_err());
    }
}
