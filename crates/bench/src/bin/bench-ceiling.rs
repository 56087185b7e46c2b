//! `bench-ceiling`: the raw-HTTP reference. A minimal axum server (same runtime shape
//! as the service server: multi-threaded tokio, `axum::serve`) whose only work is to
//! answer any POST with a small JSON object, so the load tool can measure what plain
//! HTTP gets on this machine with the same load pattern as S1.

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
