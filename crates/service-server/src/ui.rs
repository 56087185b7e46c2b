//! langgraph.json's generative UI (`ui`, `ui_config.shared`): the components are
//! bundled at boot with Node and esbuild from the config file's project, as the
//! LangGraph servers bundle them, and served under `/ui`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::config::ConfigFile;
use crate::env::ConfigError;

/// What to bundle, and with which Node.
#[derive(Debug)]
pub(crate) struct UiPlan {
    node: OsString,
    base: PathBuf,
    ui: BTreeMap<String, String>,
    shared: Vec<String>,
}

/// The plan for the file's `ui` (graph id → component file relative to `base`) and
/// `ui_config`, run with `node` (SERVICE_NODE, default `node`); none without `ui`.
pub(crate) fn plan(
    file: &ConfigFile,
    base: &Path,
    node: Option<&str>,
) -> Result<Option<UiPlan>, ConfigError> {
    let Some(ui) = &file.ui else {
        return Ok(None);
    };
    let ui: BTreeMap<String, String> = serde_json::from_value(ui.clone()).map_err(|_| {
        ConfigError(format!(
            "ui must map graph ids to component files (e.g. {{\"agent\": \"./src/ui.tsx\"}}), got {ui}"
        ))
    })?;
    let shared = match file
        .ui_config
        .as_ref()
        .and_then(|config| config.get("shared"))
    {
        None => Vec::new(),
        Some(shared) => serde_json::from_value(shared.clone()).map_err(|_| {
            ConfigError(format!(
                "ui_config.shared must be a list of module names, got {shared}"
            ))
        })?,
    };
    Ok(Some(UiPlan {
        node: node.unwrap_or("node").into(),
        base: base.to_owned(),
        ui,
        shared,
    }))
}

/// Bundles the components; a component that does not build stops the boot, naming it.
pub(crate) async fn bundle(plan: UiPlan) -> Result<service_axum::UiAssets, ConfigError> {
    let bundles = service_node::bundle_ui(&plan.node, &plan.base, &plan.ui, &plan.shared)
        .await
        .map_err(|error| ConfigError(error.to_string()))?;
    tracing::info!(
        "generative UI: bundled the components of {}",
        bundles.keys().cloned().collect::<Vec<_>>().join(", ")
    );
    Ok(service_axum::UiAssets::new(
        bundles
            .into_iter()
            .map(|(graph, files)| {
                let files = files
                    .into_iter()
                    .map(|file| (file.name, Bytes::from(file.text)))
                    .collect();
                (graph, files)
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(text: &str) -> Result<Option<UiPlan>, ConfigError> {
        let file: ConfigFile = serde_json::from_str(text).unwrap();
        plan(&file, Path::new("/project"), None)
    }

    #[test]
    fn ui_maps_graphs_to_files_and_shared_names_modules() {
        assert!(plan_of("{}").unwrap().is_none());
        let plan =
            plan_of(r#"{"ui": {"agent": "./ui.tsx"}, "ui_config": {"shared": ["zustand"]}}"#)
                .unwrap()
                .unwrap();
        assert_eq!(plan.ui["agent"], "./ui.tsx");
        assert_eq!(plan.shared, ["zustand"]);
        assert_eq!(plan.node, "node");
        let error = plan_of(r#"{"ui": "./ui.tsx"}"#).unwrap_err().0;
        assert!(error.contains("ui must map graph ids"), "{error}");
        let error = plan_of(r#"{"ui": {"a": "./ui.tsx"}, "ui_config": {"shared": "x"}}"#)
            .unwrap_err()
            .0;
        assert!(error.contains("ui_config.shared"), "{error}");
    }
}
