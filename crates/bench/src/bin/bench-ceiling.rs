//! `bench-ceiling`: the raw-HTTP reference. A minimal axum server (same runtime shape
//! as the service server: multi-threaded tokio, `axum::serve`) whose only work is to
//! answer any POST with a small JSON object, so the load tool can measure what plain
//! HTTP gets on this machine with the same load pattern as S1.
//!
//! It also answers `POST /v1/embeddings` as an OpenAI-compatible endpoint with cheap
//! deterministic vectors (words hashed into buckets), so the semantic store scenario
//! (S5q) measures the server's index and not a model: point the server's
//! `OPENAI_BASE_URL` at `http://<ceiling>/v1`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::Router;
use axum::routing::post;
use clap::Parser;
use serde_json::{Value, json};

/// Minimal axum server returning a small JSON object to any POST.
#[derive(Debug, Parser)]
#[command(name = "bench-ceiling")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 = any free port; the bound address is printed).
    #[arg(long, default_value_t = 8124)]
    port: u16,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Dimensions of the vectors `/v1/embeddings` answers (S5q's index has 384).
const EMBEDDING_DIMS: usize = 384;

/// A bag of hashed words, normalized: texts sharing words point the same way.
fn embed(text: &str) -> Vec<f32> {
    let mut vector = vec![0f32; EMBEDDING_DIMS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        // FNV-1a: stable across runs and platforms.
        let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        vector[(hash % EMBEDDING_DIMS as u64) as usize] += 1.0;
    }
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    } else {
        vector[0] = 1.0;
    }
    vector
}

async fn embeddings(Json(request): Json<Value>) -> Json<Value> {
    let texts: Vec<&str> = match &request["input"] {
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": embed(text)}))
        .collect();
    Json(json!({"object": "list", "data": data, "model": request["model"]}))
}

async fn handler() -> Json<Value> {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Json(json!({"thread_id": format!("ceiling-{n}"), "status": "idle", "metadata": {}}))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let app = Router::new()
            .route("/v1/embeddings", post(embeddings))
            .route("/{*path}", post(handler))
            .route("/", post(handler));
        let address = format!("{}:{}", args.host, args.port);
        let listener = match tokio::net::TcpListener::bind(&address).await {
            Ok(listener) => listener,
            Err(error) => {
                eprintln!("error: cannot listen on {address}: {error}");
                return ExitCode::FAILURE;
            }
        };
        match listener.local_addr() {
            Ok(local) => println!("bench-ceiling listening on http://{local}"),
            Err(error) => eprintln!("warning: cannot read the bound address: {error}"),
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    })
}
