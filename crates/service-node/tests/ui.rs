//! Generative UI bundling with real Node and esbuild from the JS reference graphs'
//! project (`examples/js-graphs`, whose `ui.tsx` imports `ui.css`; scripts/test
//! installs its packages). The interpreter is SERVICE_NODE, default `node`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

fn project() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/js-graphs")
}

fn node() -> OsString {
    std::env::var_os("SERVICE_NODE").unwrap_or_else(|| "node".into())
}

fn ui(file: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("my agent".to_owned(), file.to_owned())])
}

#[tokio::test]
async fn a_graphs_components_become_one_script_and_its_stylesheet() {
    let bundles = service_node::bundle_ui(&node(), &project(), &ui("./ui.tsx"), &[])
        .await
        .expect("bundled");
    let files = &bundles["my agent"];
    let names: Vec<&str> = files.iter().map(|file| file.name.as_str()).collect();
    assert_eq!(names, ["entrypoint.js", "entrypoint.css"]);
    let script = &files[0].text;
    // The global the fragment's onload calls, React taken from the page.
    assert!(script.starts_with("var __LGUI_my_agent ="), "{script}");
    assert!(script.contains(r#"Symbol.for("LGUI_REQUIRE")"#));
    assert!(!script.contains("typeof require !== \"undefined\" ? require"));
    assert!(files[1].text.contains(".greeting"));
}

#[tokio::test]
async fn a_component_that_does_not_build_is_an_error_naming_it() {
    let error = service_node::bundle_ui(&node(), &project(), &ui("./missing.tsx"), &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("ui.my agent") && error.contains("missing.tsx"),
        "{error}"
    );
    let error = service_node::bundle_ui(&node(), &project(), &ui("../outside.tsx"), &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("outside the project"), "{error}");
}
