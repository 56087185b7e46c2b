//! Embedders for the store's semantic index (`store.index.embed`), behind
//! [`service_store::Embedder`]. [`from_config`] turns the configured string into one:
//! `openai:<model>` is an OpenAI-compatible embeddings endpoint ([`OpenAiEmbedder`]);
//! `local:<dir>` a sentence-transformers model run in-process (`LocalEmbedder`, with
//! the `local` feature).

#[cfg(feature = "local")]
mod local;
mod openai;

use std::sync::Arc;

use service_store::Embedder;

#[cfg(feature = "local")]
pub use local::LocalEmbedder;
pub use openai::{DEFAULT_BASE_URL, MAX_INPUTS_PER_REQUEST, OpenAiEmbedder, OpenAiOptions};

/// The embedder `embed` names, producing vectors of `dims`; the environment is read
/// through `lookup` (`OPENAI_BASE_URL`, `OPENAI_API_KEY`). The error says what is
/// wrong and what is accepted, for a boot error.
pub fn from_config(
    embed: &str,
    dims: usize,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Embedder>, String> {
    let (provider, model) = embed.split_once(':').unwrap_or(("", embed));
    match provider {
        "openai" if !model.trim().is_empty() => {
            let options = OpenAiOptions::from_env(model.trim(), dims, lookup)?;
            Ok(Arc::new(OpenAiEmbedder::new(options)?))
        }
        #[cfg(feature = "local")]
        "local" if !model.trim().is_empty() => {
            let embedder = LocalEmbedder::load(std::path::Path::new(model.trim()), dims)
                .map_err(|error| format!("store.index.embed {embed:?}: {error}"))?;
            Ok(Arc::new(embedder))
        }
        #[cfg(not(feature = "local"))]
        "local" => Err(format!(
            "store.index.embed {embed:?}: this server was built without local models; build it with `--features local-embed`, or use \"openai:<model>\" with an OpenAI-compatible endpoint (OPENAI_BASE_URL)"
        )),
        _ => Err(format!(
            "store.index.embed {embed:?} is not supported: use \"openai:<model>\" (an OpenAI-compatible endpoint at OPENAI_BASE_URL, key in OPENAI_API_KEY) or \"local:<model directory>\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn only_openai_model_strings_are_accepted() {
        let with_key = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-test".to_owned());
        let embedder = from_config("openai:text-embedding-3-small", 1536, &with_key).unwrap();
        assert_eq!(embedder.dims(), 1536);
        for (embed, says) in [
            #[cfg(not(feature = "local"))]
            ("local:/models/minilm", "built without local models"),
            #[cfg(feature = "local")]
            ("local:/models/minilm", "does not exist"),
            ("./embed.py:embeddings", "is not supported"),
            ("openai:", "is not supported"),
            ("cohere:embed-v4", "is not supported"),
        ] {
            let error = from_config(embed, 8, &none).unwrap_err();
            assert!(error.contains(says), "{embed}: {error}");
        }
    }

    #[test]
    fn the_openai_endpoint_needs_a_key_unless_another_base_url_is_set() {
        let error = from_config("openai:m", 8, &none).unwrap_err();
        assert!(error.contains("OPENAI_API_KEY"), "{error}");
        let local =
            |name: &str| (name == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_owned());
        assert!(from_config("openai:m", 8, &local).is_ok());
    }
}
