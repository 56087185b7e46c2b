//! The OpenAI-compatible embedder against a fake endpoint on 127.0.0.1: real HTTP, the
//! real client.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine as _;
use serde_json::{Value, json};
use service_embed::{OpenAiEmbedder, OpenAiOptions};
use service_store::{Embedder, ErrorKind};

/// How the fake endpoint answers.
#[derive(Clone, Copy)]
enum Answer {
    /// base64, in reverse index order.
    Base64,
    /// Float arrays, whatever was asked.
    Floats,
    /// A status with OpenAI's error body.
    Fail(u16),
}

/// Each request's authorization header and body.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

#[derive(Clone)]
struct Fake {
    answer: Answer,
    seen: Seen,
}

/// The vector the fake gives `text`: its length, then 1, then zeros.
fn vector_of(text: &str) -> Vec<f32> {
    vec![text.len() as f32, 1.0, 0.0]
}

async fn embeddings(
    State(fake): State<Fake>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    let body: Value = serde_json::from_str(&body).expect("a JSON body");
    let auth = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    fake.seen.lock().unwrap().push((auth, body.clone()));
    let inputs: Vec<String> = serde_json::from_value(body["input"].clone()).expect("inputs");
    let data: Vec<Value> = match fake.answer {
        Answer::Fail(status) => {
            let error = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}});
            return (StatusCode::from_u16(status).unwrap(), error.to_string());
        }
        Answer::Base64 => inputs
            .iter()
            .enumerate()
            .rev()
            .map(|(index, text)| {
                let bytes: Vec<u8> = vector_of(text)
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect();
                let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
                json!({"object": "embedding", "index": index, "embedding": encoded})
            })
            .collect(),
        Answer::Floats => inputs
            .iter()
            .enumerate()
            .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": vector_of(text)}))
            .collect(),
    };
    let answer = json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}});
    (StatusCode::OK, answer.to_string())
}

/// Serves the fake on a free port; returns its base URL and what it saw.
async fn serve(answer: Answer) -> (String, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let fake = Fake {
        answer,
        seen: seen.clone(),
    };
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/v1"), seen)
}

fn embedder(base_url: &str, batch_size: usize) -> OpenAiEmbedder {
    OpenAiEmbedder::new(OpenAiOptions {
        base_url: base_url.to_owned(),
        api_key: Some("sk-test".into()),
        model: "text-embedding-3-small".into(),
        dims: 3,
        batch_size,
        timeout: Duration::from_secs(5),
    })
    .unwrap()
}

fn texts(list: &[&str]) -> Vec<String> {
    list.iter().map(|text| (*text).to_owned()).collect()
}

#[tokio::test]
async fn the_endpoint_is_asked_for_base64_with_the_key_and_answers_in_input_order() {
    let (url, seen) = serve(Answer::Base64).await;
    let vectors = embedder(&url, 100)
        .embed(&texts(&["a", "bbb", "cc"]))
        .await
        .unwrap();
    assert_eq!(vectors, [vector_of("a"), vector_of("bbb"), vector_of("cc")]);
    let seen = seen.lock().unwrap();
    let (auth, body) = &seen[0];
    assert_eq!(auth.as_deref(), Some("Bearer sk-test"));
    assert_eq!(
        body,
        &json!({"model": "text-embedding-3-small", "input": ["a", "bbb", "cc"], "encoding_format": "base64"})
    );
}

#[tokio::test]
async fn float_answers_are_read_as_well() {
    let (url, _) = serve(Answer::Floats).await;
    let vectors = embedder(&url, 100).embed(&texts(&["xy"])).await.unwrap();
    assert_eq!(vectors, [vector_of("xy")]);
}

#[tokio::test]
async fn a_batch_above_the_request_cap_is_split_in_order() {
    let (url, seen) = serve(Answer::Base64).await;
    let inputs = texts(&["a", "bb", "ccc", "dddd", "eeeee"]);
    let vectors = embedder(&url, 2).embed(&inputs).await.unwrap();
    let want: Vec<Vec<f32>> = inputs.iter().map(|text| vector_of(text)).collect();
    assert_eq!(vectors, want);
    let sizes: Vec<usize> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, body)| body["input"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(sizes, [2, 2, 1]);
}

#[tokio::test]
async fn an_endpoint_refusal_fails_with_its_status_and_message() {
    let (url, _) = serve(Answer::Fail(401)).await;
    let error = embedder(&url, 10).embed(&texts(&["a"])).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Unexpected);
    assert!(error.message.contains("401"), "{}", error.message);
    assert!(
        error.message.contains("Incorrect API key provided"),
        "{}",
        error.message
    );
    let (url, _) = serve(Answer::Fail(429)).await;
    let error = embedder(&url, 10).embed(&texts(&["a"])).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Transient, "a rate limit may pass");
    let (url, _) = serve(Answer::Fail(400)).await;
    let error = embedder(&url, 10).embed(&texts(&["a"])).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Invalid, "the input was refused");
}

#[tokio::test]
async fn an_unreachable_endpoint_is_transient() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let error = embedder(&format!("http://{address}/v1"), 10)
        .embed(&texts(&["a"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Transient);
    assert!(error.message.contains("unreachable"), "{}", error.message);
}
