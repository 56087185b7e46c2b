//! `/metrics` counts the protocol WebSocket: open sockets and the frames sent to them.

mod support;

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use service_axum::RouterOptions;
use tokio_tungstenite::tungstenite::Message;
use tower::ServiceExt;

async fn sample(app: &Router, series: &str) -> Option<f64> {
    let request = Request::get(service_axum::METRICS_PATH)
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

#[tokio::test]
async fn websockets_are_counted_while_open_with_the_frames_they_are_sent() {
    let app = support::app_with(RouterOptions {
        metrics: true,
        ..RouterOptions::default()
    })
    .await;
    let create = Request::post("/threads")
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .unwrap();
    let created = app.clone().oneshot(create).await.unwrap();
    let bytes = created.into_body().collect().await.unwrap().to_bytes();
    let thread: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let served = app.clone();
    tokio::spawn(async move { axum::serve(listener, served).await });
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let url = format!(
        "ws://{address}/threads/{}/stream/events",
        thread["thread_id"].as_str().unwrap()
    );
    let (mut socket, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
    for command in [
        "nope",
        r#"{"id": 2, "method": "input.inject", "params": {}}"#,
    ] {
        socket.send(Message::text(command)).await.unwrap();
        let answer = socket.next().await.unwrap().unwrap();
        assert!(answer.to_text().unwrap().contains("error"), "{answer}");
    }
    assert_eq!(sample(&app, "service_ws_subscribers").await, Some(1.0));
    assert_eq!(
        sample(&app, "service_ws_frames_sent_total").await,
        Some(2.0)
    );
    socket.close(None).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while sample(&app, "service_ws_subscribers").await != Some(0.0) {
        assert!(Instant::now() < deadline, "a closed socket is counted out");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
