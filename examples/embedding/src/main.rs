//! Serves the embedding example on 127.0.0.1:3000: `/health` is the host app's own
//! route; the agent service answers under `/agents` (point an SDK client at
//! `http://127.0.0.1:3000/agents`).

use axum::serve::ListenerExt;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}/agents", listener.local_addr()?);
    // Streamed answers are written in small pieces: without TCP_NODELAY each waits
    // ~40 ms for the client's delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, service_example_embedding::app().await).await
}
