//! SPEC's store adapter at boot: `store.adapter` in the configuration file (a LangGraph
//! `BaseStore` the Python workers load, or a LangGraph.js one the Node workers load) or
//! a [`StoreAdapter`] an embedder passes to
//! [`crate::Server::store_adapter`], checked against the `store` block and put in
//! place of the driver's items repository.

use std::sync::Arc;

use service_engine::EngineConfig;
use service_store::{PageLimits, Store, StoreAdapter, with_adapter};

use crate::config::StoreConfig;
use crate::env::ConfigError;

/// Checks the configuration file's `store.adapter` against the rest of its `store`
/// block (whether the adapter sweeps is known once it is loaded: [`attach`]).
pub(crate) fn validate(adapter: &str, store: &StoreConfig) -> Result<(), ConfigError> {
    if file_of(adapter).is_none() {
        return Err(ConfigError(format!(
            "store.adapter {adapter:?} must be './file.py:attribute', 'package.module:attribute' or './file.ts:export', naming a LangGraph (or LangGraph.js) BaseStore"
        )));
    }
    rules(
        store.index.is_some(),
        store.ttl.as_ref().map(|ttl| ttl.refresh_on_read),
    )
}

/// The file (or module) of a well-formed `store.adapter` (`file:export`).
fn file_of(adapter: &str) -> Option<&str> {
    match adapter.rsplit_once(':') {
        Some((file, export)) if !file.is_empty() && !export.is_empty() => Some(file),
        _ => None,
    }
}

/// Whether the Node workers load `store.adapter` (a `.ts`/`.js` file; else Python's do).
pub(crate) fn is_js(adapter: &str) -> bool {
    file_of(adapter).is_some_and(crate::graphs::is_js_file)
}

/// SPEC: an adapter refuses `store.index`, and `store.ttl` unless `refresh_on_read` is
/// false (`ttl` is that setting when the block is there).
fn rules(index: bool, ttl: Option<bool>) -> Result<(), ConfigError> {
    if index {
        return Err(ConfigError(
            "store.index together with a store adapter is refused: the adapter's items are not embedded or searched by meaning here; remove one of them".into(),
        ));
    }
    if ttl == Some(true) {
        return Err(ConfigError(
            "store.ttl with a store adapter needs \"refresh_on_read\": false (a read through the adapter does not extend an item's expiry)".into(),
        ));
    }
    Ok(())
}

/// `store` with its items kept by an adapter: the program's (`program`) or the one the
/// workers loaded from `store.adapter` (`file`), never both. `store_ttl` says whether
/// the file has a `store.ttl` block, which needs an adapter that sweeps.
pub(crate) fn attach(
    store: Store,
    program: Option<Arc<dyn StoreAdapter>>,
    file: Option<Arc<dyn StoreAdapter>>,
    engine: &EngineConfig,
    store_ttl: bool,
) -> Result<Store, ConfigError> {
    let adapter = match (program, file) {
        (None, None) => return Ok(store),
        (Some(_), Some(_)) => {
            return Err(ConfigError(
                "a store adapter was given to the server and store.adapter is set too: keep one"
                    .into(),
            ));
        }
        (Some(adapter), None) | (None, Some(adapter)) => adapter,
    };
    rules(
        engine.store_index.is_some(),
        store_ttl.then_some(engine.store_refresh_on_read),
    )?;
    if store_ttl && !adapter.sweeps() {
        return Err(ConfigError(
            "store.ttl with a store adapter needs one that sweeps expired items (a LangGraph BaseStore with supports_ttl and a sweep_ttl method; a LangGraph.js one has none); remove store.ttl or use such a store".into(),
        ));
    }
    tracing::info!("store items are kept by the store adapter");
    Ok(with_adapter(
        &store,
        adapter,
        PageLimits::new(engine.max_page_size),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(text: &str) -> StoreConfig {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn an_adapter_is_a_path_and_export_without_an_index_or_a_refreshing_ttl() {
        let plain = store("{}");
        for (adapter, js) in [
            ("./store.py:store", false),
            ("my_pkg.stores:store", false),
            ("./store.ts:store", true),
            ("./dist/store.mjs:stores.notes", true),
        ] {
            validate(adapter, &plain).unwrap();
            assert_eq!(is_js(adapter), js, "{adapter}");
        }
        for adapter in ["./store.py", "./store.py:", "./store.ts", ":store"] {
            let error = validate(adapter, &plain).unwrap_err();
            assert!(error.0.contains("must be"), "{adapter}: {error}");
        }
        let indexed = store(r#"{"index": {"embed": "openai:m", "dims": 8}}"#);
        let error = validate("./store.py:store", &indexed).unwrap_err();
        assert!(error.0.contains("store.index"), "{error}");
        let refreshing = store(r#"{"ttl": {"default_ttl": 5}}"#);
        let error = validate("./store.py:store", &refreshing).unwrap_err();
        assert!(error.0.contains("refresh_on_read"), "{error}");
        validate(
            "./store.py:store",
            &store(r#"{"ttl": {"default_ttl": 5, "refresh_on_read": false}}"#),
        )
        .unwrap();
    }
}
