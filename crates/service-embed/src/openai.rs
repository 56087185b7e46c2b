//! An OpenAI-compatible embeddings endpoint (`POST {base}/embeddings`), configured as
//! OpenAI's own clients are: `OPENAI_BASE_URL` (default `https://api.openai.com/v1`)
//! and `OPENAI_API_KEY`. It asks for `base64` encodings as the official clients do
//! (a quarter of the bytes of decimal floats) and reads `float` arrays as well, which
//! some compatible servers send regardless.

use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use service_store::{Embedder, StoreError, StoreResult};

/// OpenAI's documented endpoint, used when `OPENAI_BASE_URL` is unset.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The most inputs OpenAI takes in one request; larger batches are split.
pub const MAX_INPUTS_PER_REQUEST: usize = 2048;

/// Where and how to ask.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiOptions {
    /// The API root, e.g. `https://api.openai.com/v1` (no trailing `/embeddings`).
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; `None` sends no header (local servers).
    pub api_key: Option<String>,
    /// The `model` of every request.
    pub model: String,
    /// The dims every answer must have.
    pub dims: usize,
    /// Inputs per request (at most [`MAX_INPUTS_PER_REQUEST`]).
    pub batch_size: usize,
    /// Limit of one request.
    pub timeout: Duration,
}

impl std::fmt::Debug for OpenAiOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("OpenAiOptions")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("dims", &self.dims)
            .finish_non_exhaustive()
    }
}

impl OpenAiOptions {
    /// Options for `model` read from the environment: the key is required for
    /// OpenAI's own endpoint, optional for another base URL.
    pub fn from_env(
        model: &str,
        dims: usize,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let set = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let base_url = set("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let api_key = set("OPENAI_API_KEY");
        if api_key.is_none() && base_url == DEFAULT_BASE_URL {
            return Err(
                "store.index.embed names an OpenAI model but OPENAI_API_KEY is not set (or set OPENAI_BASE_URL to an OpenAI-compatible endpoint that needs none)"
                    .to_owned(),
            );
        }
        Ok(Self {
            base_url,
            api_key,
            model: model.to_owned(),
            dims,
            batch_size: MAX_INPUTS_PER_REQUEST,
            timeout: Duration::from_secs(60),
        })
    }
}

/// The embedder of an OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    url: String,
    options: OpenAiOptions,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Encoded,
}

/// An embedding as `float` (a JSON array) or `base64` (little-endian f32 bytes).
#[derive(Deserialize)]
#[serde(untagged)]
enum Encoded {
    Floats(Vec<f32>),
    Base64(String),
}

impl Encoded {
    fn decode(self) -> Result<Vec<f32>, String> {
        match self {
            Self::Floats(floats) => Ok(floats),
            Self::Base64(text) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text.as_bytes())
                    .map_err(|error| format!("an embedding is not valid base64: {error}"))?;
                if bytes.len() % 4 != 0 {
                    return Err(format!(
                        "a base64 embedding has {} bytes, not a whole number of floats",
                        bytes.len()
                    ));
                }
                Ok(bytes
                    .chunks_exact(4)
                    .map(|four| f32::from_le_bytes([four[0], four[1], four[2], four[3]]))
                    .collect())
            }
        }
    }
}

impl OpenAiEmbedder {
    /// An embedder with `options`; fails only when no HTTP client can be built.
    pub fn new(mut options: OpenAiOptions) -> Result<Self, String> {
        options.batch_size = options.batch_size.clamp(1, MAX_INPUTS_PER_REQUEST);
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|error| format!("cannot build the embeddings HTTP client: {error}"))?;
        let url = format!("{}/embeddings", options.base_url.trim_end_matches('/'));
        Ok(Self {
            client,
            url,
            options,
        })
    }

    /// One request: the vectors of `texts`, in their order.
    async fn request(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
        let body = json!({
            "model": self.options.model,
            "input": texts,
            "encoding_format": "base64",
        });
        let mut request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(key) = &self.options.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|error| {
            StoreError::transient(format!(
                "the embeddings endpoint {} is unreachable",
                self.url
            ))
            .with_source(error)
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|error| {
            StoreError::transient(format!(
                "the embeddings endpoint {} broke off its answer",
                self.url
            ))
            .with_source(error)
        })?;
        if !status.is_success() {
            return Err(refusal(status, &bytes));
        }
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|error| {
            StoreError::unexpected(format!(
                "the embeddings endpoint's answer is not an embeddings list: {error}"
            ))
        })?;
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for datum in answer.data {
            let vector = datum.embedding.decode().map_err(StoreError::unexpected)?;
            match vectors.get_mut(datum.index) {
                Some(slot @ None) => *slot = Some(vector),
                _ => {
                    return Err(StoreError::unexpected(format!(
                        "the embeddings endpoint answered index {} twice or out of range",
                        datum.index
                    )));
                }
            }
        }
        vectors
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                StoreError::unexpected("the embeddings endpoint left some inputs unanswered")
            })
    }
}

/// A non-2xx answer: its status and the endpoint's own message (OpenAI's
/// `{"error": {"message"}}`, else the start of the body). Rate limits and server
/// errors may pass; a refused input is the caller's; anything else (a bad key, an
/// unknown model) is the configuration's.
fn refusal(status: reqwest::StatusCode, body: &[u8]) -> StoreError {
    let said = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|value| {
            value
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    let message = format!("the embeddings endpoint answered {status}: {said}");
    if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        StoreError::transient(message)
    } else if status == reqwest::StatusCode::BAD_REQUEST {
        StoreError::invalid(message)
    } else {
        StoreError::unexpected(message)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn dims(&self) -> usize {
        self.options.dims
    }

    async fn embed(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.options.batch_size) {
            vectors.extend(self.request(batch).await?);
        }
        Ok(vectors)
    }
}
