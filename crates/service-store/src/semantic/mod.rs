//! Semantic search (SPEC "Store": `store.index`): the [`Embedder`] seam, which texts of
//! an item are embedded ([`SemanticIndex`]), and the similarity and order every driver
//! ranks by. Embedding happens before a driver is called, outside any database
//! transaction; drivers only store vectors and rank candidates by them.

mod path;

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use service_types::{Item, Metadata};

pub use path::texts_at_path;

use crate::{StoreError, StoreResult, compare_items};

/// Turns texts into vectors: what `store.index.embed` names. Every text of one write
/// (or one query) comes in one batch.
#[async_trait]
pub trait Embedder: Send + Sync + fmt::Debug {
    /// The length of every vector it returns (`store.index.dims`).
    fn dims(&self) -> usize;

    /// One vector per text, in order. A failure says what failed and why in its
    /// message: `Transient` when a retry may cure it (unreachable, rate-limited,
    /// 5xx), `Invalid` when the input was refused, `Unexpected` otherwise.
    async fn embed(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>>;
}

/// What a driver needs to hold vectors: their length and whether an approximate
/// (HNSW) index is built over them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexSpec {
    /// Dimensions of every vector.
    pub dims: usize,
    /// Build an approximate nearest-neighbour index (may change which rows a search
    /// returns); off means an exact scan.
    pub hnsw: bool,
}

/// One vector of an item: the field path it was embedded from (`path.N` when the path
/// yields several texts) and the vector.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldVector {
    /// The field path, as LangGraph names it.
    pub field: String,
    /// The embedding.
    pub vector: Vec<f32>,
}

/// Which texts of a put are embedded: the put's `index` as LangGraph reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IndexFields {
    /// `store.index.fields` (absent `index`).
    #[default]
    Configured,
    /// The put's own field paths (`index: [...]`).
    Paths(Vec<String>),
    /// No vector at all (`index: false`): the item is never ranked above a scored one.
    Skip,
}

impl IndexFields {
    /// Reads a request's `index`: absent or `null` is the configured fields, `false`
    /// skips, a list of strings names the paths; anything else is `Invalid`.
    pub fn from_request(index: Option<&Value>) -> StoreResult<Self> {
        match index {
            None | Some(Value::Null) => Ok(Self::Configured),
            Some(Value::Bool(false)) => Ok(Self::Skip),
            Some(Value::Array(paths)) => paths
                .iter()
                .map(|path| path.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Self::Paths)
                .ok_or_else(index_refused),
            Some(_) => Err(index_refused()),
        }
    }
}

fn index_refused() -> StoreError {
    StoreError::invalid("index must be false or a list of field paths")
}

/// The configured index: the embedder, the default fields and the driver's spec.
#[derive(Clone, Debug)]
pub struct SemanticIndex {
    embedder: Arc<dyn Embedder>,
    fields: Vec<String>,
    spec: IndexSpec,
}

impl SemanticIndex {
    /// An index embedding `fields` (LangGraph's default is `["$"]`, the whole value)
    /// with `embedder`, whose dims the vectors have.
    pub fn new(embedder: Arc<dyn Embedder>, fields: Vec<String>, hnsw: bool) -> Self {
        let spec = IndexSpec {
            dims: embedder.dims(),
            hnsw,
        };
        Self {
            embedder,
            fields,
            spec,
        }
    }

    /// What the driver is built with.
    pub fn spec(&self) -> IndexSpec {
        self.spec
    }

    /// The default field paths.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// The vectors of a value: every text its paths pick, embedded in one batch.
    /// `Skip` (or paths that pick nothing) embeds nothing and calls no embedder.
    pub async fn vectors(
        &self,
        value: &Metadata,
        which: &IndexFields,
    ) -> StoreResult<Vec<FieldVector>> {
        let paths = match which {
            IndexFields::Skip => return Ok(Vec::new()),
            IndexFields::Configured => &self.fields,
            IndexFields::Paths(paths) => paths,
        };
        let value = Value::Object(value.clone());
        let mut fields = Vec::new();
        let mut texts = Vec::new();
        for path in paths {
            let found = texts_at_path(&value, path);
            let several = found.len() > 1;
            for (n, text) in found.into_iter().enumerate() {
                fields.push(if several {
                    format!("{path}.{n}")
                } else {
                    path.clone()
                });
                texts.push(text);
            }
        }
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.embed(&texts).await?;
        Ok(fields
            .into_iter()
            .zip(vectors)
            .map(|(field, vector)| FieldVector { field, vector })
            .collect())
    }

    /// The vector of a search's `query` text.
    pub async fn query(&self, text: &str) -> StoreResult<Vec<f32>> {
        let mut vectors = self.embed(&[text.to_owned()]).await?;
        vectors
            .pop()
            .ok_or_else(|| StoreError::unexpected("the embedder returned no vector"))
    }

    /// One call to the embedder, its answer checked: one vector per text, each of the
    /// configured dims. Every failure reads `embedding failed: <cause>`; an answer of
    /// the wrong shape is `Unexpected` (the embedder or `dims` is misconfigured).
    async fn embed(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
        let failed = |mut error: StoreError| {
            error.message = format!("embedding failed: {}", error.message);
            error
        };
        let vectors = self.embedder.embed(texts).await.map_err(failed)?;
        if vectors.len() != texts.len() {
            return Err(failed(StoreError::unexpected(format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                texts.len()
            ))));
        }
        for vector in &vectors {
            check_vector(vector, self.spec.dims).map_err(|error| {
                failed(StoreError::unexpected(format!(
                    "the embedder's answer: {}",
                    error.message
                )))
            })?;
        }
        Ok(vectors)
    }
}

/// Refuses a vector a driver cannot rank by: another length than `dims`, a non-finite
/// component, or no direction (all zeros, whose cosine is undefined).
pub fn check_vector(vector: &[f32], dims: usize) -> StoreResult<()> {
    if vector.len() != dims {
        return Err(StoreError::invalid(format!(
            "a vector has {} dimensions; store.index.dims is {dims}",
            vector.len()
        )));
    }
    if vector.iter().any(|x| !x.is_finite()) {
        return Err(StoreError::invalid("a vector has a non-finite component"));
    }
    if vector.iter().all(|x| *x == 0.0) {
        return Err(StoreError::invalid(
            "a vector is all zeros: it has no direction to rank by",
        ));
    }
    Ok(())
}

/// Cosine similarity, computed as pgvector does (single-precision sums, one
/// double-precision division, clamped to [-1, 1]) so both drivers score alike. The sums
/// run in eight lanes, the order pgvector's own vectorized build adds in, which lets the
/// compiler use SIMD; integer-valued vectors (the test embedder's) sum exactly in any order.
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f64 {
    similarity_from_parts(dot(a, b), dot(a, a), dot(b, b))
}

/// The similarity from a dot product and the two squared norms (see
/// [`cosine_similarity`]); a search computes a stored vector's norm once, not per query.
pub fn similarity_from_parts(dot: f32, norm_a_squared: f32, norm_b_squared: f32) -> f64 {
    let similarity =
        f64::from(dot) / (f64::from(norm_a_squared) * f64::from(norm_b_squared)).sqrt();
    similarity.clamp(-1.0, 1.0)
}

/// The single-precision dot product, summed in eight lanes.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let len = a.len().min(b.len());
    let (a_chunks, a_rest) = a[..len].as_chunks::<LANES>();
    let (b_chunks, b_rest) = b[..len].as_chunks::<LANES>();
    let mut lanes = [0.0f32; LANES];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for lane in 0..LANES {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}

/// The order of a semantic search: best score first, every scored item before every
/// unscored one (no vector), ties and unscored items in the plain search order.
pub fn compare_scored(a: (Option<f64>, &Item), b: (Option<f64>, &Item)) -> Ordering {
    match (a.0, b.0) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
    .then_with(|| compare_items(a.1, b.1))
}

/// A deterministic embedder for tests and demos: each word (lowercased, split on
/// anything not alphanumeric) adds one to a bucket chosen by its FNV-1a hash, so
/// texts sharing words point alike. No model, no network.
#[derive(Clone, Copy, Debug)]
pub struct WordHashEmbedder {
    dims: usize,
}

impl WordHashEmbedder {
    /// Vectors of `dims` buckets (at least 1).
    pub fn new(dims: usize) -> Self {
        Self { dims: dims.max(1) }
    }

    /// The vector of one text; a text without words gets the last bucket, so no
    /// vector is all zeros.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0; self.dims];
        let words = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty());
        let mut any = false;
        for word in words {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in word.to_lowercase().bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
            vector[(hash % self.dims as u64) as usize] += 1.0;
            any = true;
        }
        if !any {
            vector[self.dims - 1] = 1.0;
        }
        vector
    }
}

#[async_trait]
impl Embedder for WordHashEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }

    async fn embed(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|text| self.vector(text)).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Metadata {
        match value {
            Value::Object(map) => map,
            _ => Metadata::new(),
        }
    }

    /// Answers every text with a vector of its given length, right or wrong.
    #[derive(Debug)]
    struct Fixed(usize);

    #[async_trait]
    impl Embedder for Fixed {
        fn dims(&self) -> usize {
            4
        }

        async fn embed(&self, texts: &[String]) -> StoreResult<Vec<Vec<f32>>> {
            Ok(texts.iter().map(|_| vec![1.0; self.0]).collect())
        }
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        // The embedders here never wait: one poll finishes them.
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        match future.as_mut().poll(&mut context) {
            std::task::Poll::Ready(output) => output,
            std::task::Poll::Pending => panic!("a test embedder never waits"),
        }
    }

    #[test]
    fn a_put_embeds_each_text_its_paths_pick_naming_several_by_position() {
        let index = SemanticIndex::new(
            Arc::new(WordHashEmbedder::new(8)),
            vec!["text".into()],
            false,
        );
        let value = object(json!({"text": "a cat", "tags": ["x", "y"]}));
        let vectors = block_on(index.vectors(&value, &IndexFields::Configured)).unwrap();
        assert_eq!(vectors.len(), 1);
        assert_eq!(vectors[0].field, "text");
        let own = IndexFields::Paths(vec!["tags[*]".into()]);
        let vectors = block_on(index.vectors(&value, &own)).unwrap();
        let fields: Vec<&str> = vectors.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["tags[*].0", "tags[*].1"]);
        assert!(
            block_on(index.vectors(&value, &IndexFields::Skip))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn index_reads_false_a_list_of_paths_or_nothing() {
        assert_eq!(
            IndexFields::from_request(None).unwrap(),
            IndexFields::Configured
        );
        assert_eq!(
            IndexFields::from_request(Some(&json!(false))).unwrap(),
            IndexFields::Skip
        );
        assert_eq!(
            IndexFields::from_request(Some(&json!(["a", "b.c"]))).unwrap(),
            IndexFields::Paths(vec!["a".into(), "b.c".into()])
        );
        for bad in [json!(true), json!("a"), json!([1])] {
            let error = IndexFields::from_request(Some(&bad)).unwrap_err();
            assert_eq!(error.kind, crate::ErrorKind::Invalid, "{bad}");
        }
    }

    #[test]
    fn an_embedder_answering_another_dimensionality_is_refused() {
        let index = SemanticIndex::new(Arc::new(Fixed(3)), vec!["$".into()], false);
        let error = block_on(index.query("q")).unwrap_err();
        assert_eq!(
            error.message,
            "embedding failed: the embedder's answer: a vector has 3 dimensions; store.index.dims is 4"
        );
        assert_eq!(error.kind, crate::ErrorKind::Unexpected);
    }

    #[test]
    fn cosine_similarity_is_one_for_one_direction_and_zero_for_orthogonal() {
        assert!((cosine_similarity(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-9);
        assert!(cosine_similarity(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-9);
        assert!((cosine_similarity(&[1.0, 0.0], &[-1.0, 0.0]) + 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_word_hash_embedder_points_shared_words_alike() {
        let embedder = WordHashEmbedder::new(64);
        let cat = embedder.vector("The cat");
        let close = cosine_similarity(&cat, &embedder.vector("a CAT sat"));
        let far = cosine_similarity(&cat, &embedder.vector("stock prices"));
        assert!(close > far, "{close} > {far}");
        assert_eq!(embedder.vector("").iter().sum::<f32>(), 1.0);
    }
}
