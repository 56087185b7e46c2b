//! The caps on one client (`ClientLimits`): runs per batch, streams per principal,
//! subscriptions and message size on a protocol WebSocket.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use service_axum::auth::{Auth, Authenticator, Unauthenticated};
use service_axum::{ClientLimits, RouterOptions};
use service_engine::auth::Principal;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tower::ServiceExt;
use uuid::Uuid;

const BOUND: Duration = Duration::from_secs(10);

/// Accepts `x-api-key: key-<identity>`.
struct Keys;

#[async_trait::async_trait]
impl Authenticator for Keys {
    async fn authenticate(
        &self,
        request: &axum::http::request::Parts,
    ) -> Result<Arc<Principal>, Unauthenticated> {
        let key = request
            .headers
            .get("x-api-key")
            .and_then(|value| value.to_str().ok());
        match key.and_then(|key| key.strip_prefix("key-")) {
            Some(identity) => Ok(Arc::new(Principal::new(identity))),
            None => Err(Unauthenticated::new("Missing API key")),
        }
    }
}

async fn app(limits: ClientLimits, authenticated: bool) -> Router {
    let authenticator: Option<Arc<dyn Authenticator>> = authenticated.then(|| Arc::new(Keys) as _);
    support::app_with(RouterOptions {
        limits,
        auth: Auth {
            authenticator,
            authorizer: None,
        },
        ..RouterOptions::default()
    })
    .await
}

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    who: &str,
    body: Option<Value>,
) -> Response<Body> {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("x-api-key", format!("key-{who}"))
        .body(body.map_or_else(Body::empty, |body| Body::from(body.to_string())))
        .unwrap();
    app.clone().oneshot(request).await.unwrap()
}

async fn json_of(response: Response<Body>) -> Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// A thread alice made, by id.
async fn thread(app: &Router) -> Uuid {
    let response = call(app, "POST", "/threads", "alice", Some(json!({}))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let thread = json_of(response).await;
    thread["thread_id"].as_str().unwrap().parse().unwrap()
}

/// Opens `GET /threads/{id}/stream` as `who`; the response holds the stream open.
async fn open_stream(app: &Router, thread: Uuid, who: &str) -> Response<Body> {
    call(app, "GET", &format!("/threads/{thread}/stream"), who, None).await
}

fn hi() -> Value {
    json!({"messages": [{"type": "human", "content": "hi"}]})
}

// Runs per batch.

#[tokio::test]
async fn a_batch_over_the_cap_is_refused_before_any_run_is_created() {
    let limits = ClientLimits {
        max_batch_runs: 3,
        ..ClientLimits::default()
    };
    let app = app(limits, false).await;
    let item = json!({"assistant_id": "echo", "input": hi()});
    let over = Value::Array(vec![item.clone(); 4]);
    let response = call(&app, "POST", "/runs/batch", "anyone", Some(over)).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = json_of(response).await;
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("SERVICE_MAX_BATCH_RUNS"), "{message}");
    assert!(message.contains('3') && message.contains('4'), "{message}");
    // A stateless run makes a thread: none was made.
    let threads = call(&app, "POST", "/threads/search", "anyone", Some(json!({}))).await;
    assert_eq!(json_of(threads).await, json!([]));

    let at_cap = Value::Array(vec![item; 3]);
    let response = call(&app, "POST", "/runs/batch", "anyone", Some(at_cap)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(json_of(response).await.as_array().unwrap().len(), 3);
}

// Streams per principal.

#[tokio::test]
async fn a_principal_over_its_stream_cap_gets_429_until_one_of_its_streams_closes() {
    let limits = ClientLimits {
        max_streams_per_principal: 2,
        ..ClientLimits::default()
    };
    let app = app(limits, true).await;
    let thread = thread(&app).await;
    let first = open_stream(&app, thread, "alice").await;
    let second = open_stream(&app, thread, "alice").await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let refused = open_stream(&app, thread, "alice").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = json_of(refused).await;
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("SERVICE_MAX_STREAMS_PER_PRINCIPAL"),
        "{message}"
    );
    assert!(message.contains('2'), "{message}");
    // Another principal has its own count.
    let bob = open_stream(&app, thread, "bob").await;
    assert_eq!(bob.status(), StatusCode::OK);
    // Every kind of stream counts: a run stream too.
    let run = json!({"assistant_id": "echo", "input": hi()});
    let uri = format!("/threads/{thread}/runs/stream");
    let refused = call(&app, "POST", &uri, "alice", Some(run)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

    drop(first);
    let again = open_stream(&app, thread, "alice").await;
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "a closed stream frees its slot"
    );
    drop(second);
}

#[tokio::test]
async fn a_run_stream_holds_its_slot_until_the_server_lets_go_of_its_body() {
    let limits = ClientLimits {
        max_streams_per_principal: 1,
        ..ClientLimits::default()
    };
    let app = app(limits, true).await;
    let thread = thread(&app).await;
    let run = json!({"assistant_id": "echo", "input": hi()});
    let uri = format!("/threads/{thread}/runs/stream");
    for _ in 0..2 {
        let response = call(&app, "POST", &uri, "alice", Some(run.clone())).await;
        assert_eq!(response.status(), StatusCode::OK);
        let meanwhile = open_stream(&app, thread, "alice").await;
        assert_eq!(meanwhile.status(), StatusCode::TOO_MANY_REQUESTS);
        // Read to its end, then let go of it as the server does once it is sent.
        let mut body = response.into_body();
        tokio::time::timeout(BOUND, async { while body.frame().await.is_some() {} })
            .await
            .expect("the run's stream ends");
        drop(body);
    }
}

#[tokio::test]
async fn without_an_authenticator_streams_are_not_capped_per_principal() {
    let limits = ClientLimits {
        max_streams_per_principal: 1,
        ..ClientLimits::default()
    };
    let app = app(limits, false).await;
    let thread = thread(&app).await;
    let first = open_stream(&app, thread, "anyone").await;
    let second = open_stream(&app, thread, "anyone").await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
}

// The protocol WebSocket.

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// Serves `app` on a local port; its address.
async fn serve(app: Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

/// A WebSocket on the thread's protocol event stream as `who`, or the handshake's
/// refusal status.
async fn websocket(
    address: std::net::SocketAddr,
    thread: Uuid,
    who: &str,
) -> Result<Socket, StatusCode> {
    let url = format!("ws://{address}/threads/{thread}/stream/events");
    let mut request = url.into_client_request().unwrap();
    let key = format!("key-{who}").parse().unwrap();
    request.headers_mut().insert("x-api-key", key);
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    match tokio_tungstenite::client_async(request, stream).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status()),
        Err(other) => panic!("handshake failed: {other}"),
    }
}

/// The next JSON text frame (bounded).
async fn receive(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(BOUND, socket.next())
            .await
            .expect("a frame in time")
            .expect("the socket is open")
            .expect("a frame");
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

async fn subscribe(socket: &mut Socket, id: i64) -> Value {
    subscribe_to(socket, id, &["lifecycle"]).await
}

async fn subscribe_to(socket: &mut Socket, id: i64, channels: &[&str]) -> Value {
    let subscribe = json!({"id": id, "method": "subscription.subscribe",
                           "params": {"channels": channels}});
    socket
        .send(Message::text(subscribe.to_string()))
        .await
        .unwrap();
    receive(socket).await
}

#[tokio::test]
async fn a_subscription_over_the_socket_cap_is_refused_with_limit_exceeded() {
    let limits = ClientLimits {
        max_ws_subscriptions: 3,
        ..ClientLimits::default()
    };
    let app = app(limits, true).await;
    let thread = thread(&app).await;
    let mut socket = websocket(serve(app).await, thread, "alice").await.unwrap();
    let mut ids = Vec::new();
    for id in 1..=3 {
        let answer = subscribe(&mut socket, id).await;
        assert_eq!(answer["type"], "success", "{answer}");
        ids.push(answer["result"]["subscription_id"].clone());
    }
    let refused = subscribe(&mut socket, 4).await;
    assert_eq!(
        (&refused["type"], &refused["id"], &refused["error"]),
        (&json!("error"), &json!(4), &json!("limit_exceeded"))
    );
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("SERVICE_MAX_WS_SUBSCRIPTIONS"),
        "{message}"
    );
    assert!(message.contains('3'), "{message}");

    let unsubscribe = json!({"id": 5, "method": "subscription.unsubscribe",
                             "params": {"subscription_id": ids[0]}});
    socket
        .send(Message::text(unsubscribe.to_string()))
        .await
        .unwrap();
    assert_eq!(receive(&mut socket).await["type"], "success");
    assert_eq!(subscribe(&mut socket, 6).await["type"], "success");
}

#[tokio::test]
async fn a_websocket_message_larger_than_the_body_limit_ends_the_socket() {
    let app = support::app_with(RouterOptions {
        max_body_bytes: 1024,
        auth: Auth {
            authenticator: Some(Arc::new(Keys)),
            authorizer: None,
        },
        ..RouterOptions::default()
    })
    .await;
    let thread = thread(&app).await;
    let mut socket = websocket(serve(app).await, thread, "alice").await.unwrap();
    assert_eq!(subscribe(&mut socket, 1).await["type"], "success");
    let padded = json!({"id": 2, "method": "subscription.subscribe",
                        "params": {"channels": ["lifecycle"], "pad": "x".repeat(2048)}});
    // The send itself may already fail once the server drops the connection.
    let _ = socket.send(Message::text(padded.to_string())).await;
    let next = tokio::time::timeout(BOUND, socket.next())
        .await
        .expect("the server acts in time");
    assert!(
        matches!(next, None | Some(Err(_)) | Some(Ok(Message::Close(_)))),
        "no answer to an oversized message: {next:?}"
    );
}

#[tokio::test]
async fn a_websocket_holds_a_stream_slot_of_its_principal_until_it_closes() {
    let limits = ClientLimits {
        max_streams_per_principal: 1,
        ..ClientLimits::default()
    };
    let app = app(limits, true).await;
    let thread = thread(&app).await;
    let address = serve(app.clone()).await;
    let mut socket = websocket(address, thread, "alice").await.unwrap();
    assert_eq!(subscribe(&mut socket, 1).await["type"], "success");
    let refused = websocket(address, thread, "alice").await;
    assert_eq!(refused.err(), Some(StatusCode::TOO_MANY_REQUESTS));
    let refused = open_stream(&app, thread, "alice").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

    socket.close(None).await.unwrap();
    // The server ends the session when it reads the close: poll, bounded.
    let freed = tokio::time::timeout(BOUND, async {
        loop {
            let response = open_stream(&app, thread, "alice").await;
            if response.status() == StatusCode::OK {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(freed.is_ok(), "a closed socket frees its slot");
}

#[tokio::test]
async fn a_later_subscription_replays_only_what_the_replay_buffer_holds() {
    let limits = ClientLimits {
        ws_replay_events: 2,
        ..ClientLimits::default()
    };
    let app = app(limits, true).await;
    let thread = thread(&app).await;
    let mut socket = websocket(serve(app).await, thread, "alice").await.unwrap();
    let channels = ["lifecycle", "values", "updates", "messages"];
    assert_eq!(
        subscribe_to(&mut socket, 1, &channels).await["type"],
        "success"
    );
    let start = json!({"id": 2, "method": "run.start",
                       "params": {"assistant_id": "echo", "input": hi()}});
    socket.send(Message::text(start.to_string())).await.unwrap();
    let mut events = 0;
    loop {
        let frame = receive(&mut socket).await;
        if frame["type"] != "event" {
            continue;
        }
        events += 1;
        let (params, data) = (&frame["params"], &frame["params"]["data"]);
        let root = params["namespace"] == json!([]);
        if frame["method"] == "lifecycle" && root && data["event"] == "completed" {
            break;
        }
    }
    assert!(events > 2, "more events passed than the buffer holds");
    let answer = subscribe_to(&mut socket, 3, &channels).await;
    assert_eq!(answer["result"]["replayed_events"], 2, "{answer}");
}
