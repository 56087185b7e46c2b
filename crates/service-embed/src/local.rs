//! A sentence-transformers model run in-process (`"embed": "local:<dir>"`): a BERT
//! encoder from `model.safetensors` + `config.json`, its `tokenizer.json`, and the
//! pooling the directory declares (`1_Pooling/config.json`: mean or CLS; a
//! `Normalize` module in `modules.json` makes vectors unit length). Pure Rust
//! (candle, tokenizers): nothing is downloaded and no runtime is installed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use serde::Deserialize;
use service_store::{Embedder, StoreError, StoreResult};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Texts encoded in one forward pass: bounds the padded batch's memory.
const BATCH: usize = 32;

/// The token limit when the directory names none (BERT's position table).
const DEFAULT_MAX_TOKENS: usize = 512;

/// A loaded model; cheap to share (the weights sit behind one `Arc`).
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Loaded>,
}

struct Loaded {
    directory: PathBuf,
    model: BertModel,
    tokenizer: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    dims: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pooling {
    Mean,
    Cls,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("directory", &self.inner.directory)
            .field("dims", &self.inner.dims)
            .field("pooling", &self.inner.pooling)
            .field("normalize", &self.inner.normalize)
            .finish()
    }
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct Module {
    #[serde(rename = "type")]
    kind: String,
}

impl LocalEmbedder {
    /// Loads the model in `directory`, which must produce vectors of `dims`. The error
    /// names the file that is missing or wrong, for a boot error.
    pub fn load(directory: &Path, dims: usize) -> Result<Self, String> {
        let at = |file: &str| directory.join(file);
        if !directory.is_dir() {
            return Err(format!(
                "local model directory {} does not exist",
                directory.display()
            ));
        }
        let config: Config = read_json(&at("config.json"))?;
        let weights = std::fs::read(at("model.safetensors")).map_err(|error| {
            format!("cannot read {}: {error}", at("model.safetensors").display())
        })?;
        let vars = VarBuilder::from_buffered_safetensors(weights, DTYPE, &Device::Cpu)
            .map_err(|error| format!("{}: {error}", at("model.safetensors").display()))?;
        let model = BertModel::load(vars, &config).map_err(|error| {
            format!(
                "{} is not a BERT encoder this server can run: {error}",
                directory.display()
            )
        })?;
        let model_dims = hidden_size(&at("config.json"))?;
        if model_dims != dims {
            return Err(format!(
                "the model in {} produces {model_dims}-dimensional vectors but store.index.dims is {dims}",
                directory.display()
            ));
        }

        let pooling = match optional_json::<PoolingConfig>(&at("1_Pooling/config.json"))? {
            None => Pooling::Mean,
            Some(pooling) if pooling.pooling_mode_cls_token => Pooling::Cls,
            Some(pooling)
                if pooling.pooling_mode_max_tokens || pooling.pooling_mode_mean_sqrt_len_tokens =>
            {
                return Err(format!(
                    "{}: only mean and CLS pooling are supported",
                    at("1_Pooling/config.json").display()
                ));
            }
            Some(pooling) if pooling.pooling_mode_mean_tokens => Pooling::Mean,
            Some(_) => Pooling::Mean,
        };
        let normalize = optional_json::<Vec<Module>>(&at("modules.json"))?.is_some_and(|modules| {
            modules
                .iter()
                .any(|module| module.kind.ends_with(".Normalize"))
        });
        let max_tokens = optional_json::<SentenceBertConfig>(&at("sentence_bert_config.json"))?
            .and_then(|config| config.max_seq_length)
            .unwrap_or(DEFAULT_MAX_TOKENS);

        let mut tokenizer = Tokenizer::from_file(at("tokenizer.json"))
            .map_err(|error| format!("cannot load {}: {error}", at("tokenizer.json").display()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|error| format!("{}: {error}", at("tokenizer.json").display()))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));

        Ok(Self {
            inner: Arc::new(Loaded {
                directory: directory.to_owned(),
                model,
                tokenizer,
                pooling,
                normalize,
                dims,
            }),
        })
    }
}

impl Loaded {
    fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|error| format!("tokenizing failed: {error}"))?;
        let rows = encodings.len();
        let width = encodings.first().map_or(0, |encoding| encoding.len());
        let flat = |pick: fn(&tokenizers::Encoding) -> &[u32]| {
            let values: Vec<u32> = encodings.iter().flat_map(|e| pick(e).to_vec()).collect();
            Tensor::from_vec(values, (rows, width), &Device::Cpu)
        };
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = flat(tokenizers::Encoding::get_ids)?;
            let types = flat(tokenizers::Encoding::get_type_ids)?;
            let mask = flat(tokenizers::Encoding::get_attention_mask)?;
            let hidden = self.model.forward(&ids, &types, Some(&mask))?;
            let pooled = match self.pooling {
                Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
                Pooling::Mean => {
                    // Padding tokens must not count: average over the real ones only.
                    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
                    let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
                    summed.broadcast_div(&counts)?
                }
            };
            let pooled = if self.normalize {
                let norms = pooled
                    .sqr()?
                    .sum_keepdim(1)?
                    .sqrt()?
                    .clamp(1e-12, f64::MAX)?;
                pooled.broadcast_div(&norms)?
            } else {
                pooled
            };
            pooled.to_vec2::<f32>()
        };
        run().map_err(|error| format!("the model failed: {error}"))
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn dims(&self) -> usize {
        self.inner.dims
    }

    async fn embed(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // Inference is CPU-bound for milliseconds per batch: off the async workers.
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        let vectors = tokio::task::spawn_blocking(move || {
            let mut vectors = Vec::with_capacity(texts.len());
            for batch in texts.chunks(BATCH) {
                vectors.extend(inner.embed_batch(batch)?);
            }
            Ok::<_, String>(vectors)
        })
        .await
        .map_err(|error| StoreError::unexpected(format!("local embedder: {error}")))?
        .map_err(|error| StoreError::unexpected(format!("local embedder: {error}")))?;
        Ok(vectors)
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, String> {
    optional_json(path)?.ok_or_else(|| format!("{} is missing", path.display()))
}

fn optional_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| format!("{} is not valid: {error}", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}

/// `hidden_size` from config.json (candle's `Config` keeps it private).
fn hidden_size(path: &Path) -> Result<usize, String> {
    #[derive(Deserialize)]
    struct Sizes {
        hidden_size: usize,
    }
    read_json::<Sizes>(path).map(|sizes| sizes.hidden_size)
}
