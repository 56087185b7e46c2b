//! Generative UI: langgraph.json's `ui` components bundled for the browser by
//! `js/ui.mjs` with esbuild from the user's project, as the LangGraph servers bundle
//! them (one script per graph registering `__LGUI_<graph>`, and the CSS it imports).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

use serde::Deserialize;

use crate::BridgeError;

/// The bundler, shipped inside the binary.
const UI_MJS: &str = include_str!("../js/ui.mjs");

/// One file of a graph's bundle.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct UiFile {
    /// Its file name (`entrypoint.js`, `entrypoint.css`).
    pub name: String,
    /// Its contents.
    pub text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Reply {
    Ok(BTreeMap<String, Vec<UiFile>>),
    Err(String),
}

/// Bundles `ui` (graph id → component file relative to `base`) with `node` in
/// `base`; `shared` names more modules the page provides (`ui_config.shared`).
pub async fn bundle_ui(
    node: &OsStr,
    base: &Path,
    ui: &BTreeMap<String, String>,
    shared: &[String],
) -> Result<BTreeMap<String, Vec<UiFile>>, BridgeError> {
    let spec = serde_json::json!({"ui": ui, "shared": shared}).to_string();
    let output = tokio::process::Command::new(node)
        .args(["--input-type=module", "-e", UI_MJS, &spec])
        .current_dir(base)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|error| {
            BridgeError::Boot(format!(
                "generative UI: cannot run {} (set SERVICE_NODE): {error}",
                node.to_string_lossy()
            ))
        })?;
    let reply: Reply = serde_json::from_slice(&output.stdout).map_err(|_| {
        BridgeError::Boot(format!(
            "generative UI: the bundler failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    })?;
    match reply {
        Reply::Ok(bundles) => Ok(bundles),
        Reply::Err(message) => Err(BridgeError::Boot(format!("generative UI: {message}"))),
    }
}
