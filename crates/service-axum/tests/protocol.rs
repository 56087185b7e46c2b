//! Protocol v2 (contract/protocol-v2.md): thread commands, the thread's events over
//! SSE, and the WebSocket that carries both.

mod support;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tower::ServiceExt;
use uuid::Uuid;

const BOUND: Duration = Duration::from_secs(10);

async fn app() -> Router {
    support::app_with(service_axum::RouterOptions::default()).await
}

async fn send(app: &Router, uri: &str, body: &str) -> (StatusCode, Value) {
    let request = Request::post(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn command(app: &Router, thread: Uuid, id: i64, method: &str, params: Value) -> Value {
    let body = json!({"id": id, "method": method, "params": params}).to_string();
    let (status, answer) = send(app, &format!("/threads/{thread}/commands"), &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["id"], id);
    answer
}

/// SSE frames as (event, data, id), read until `stop` holds for one (bounded).
async fn events_until(
    app: &Router,
    thread: Uuid,
    request: Value,
    stop: impl Fn(&Value) -> bool,
) -> Vec<(String, Value, String)> {
    let request = Request::post(format!("/threads/{thread}/stream/events"))
        .header("content-type", "application/json")
        .body(Body::from(request.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = response.into_body();
    let mut text = String::new();
    let mut frames = Vec::new();
    let read = async {
        while let Some(Ok(chunk)) = body.frame().await {
            let Ok(data) = chunk.into_data() else {
                continue;
            };
            text.push_str(std::str::from_utf8(&data).unwrap());
            while let Some(end) = text.find("\r\n\r\n") {
                let block: String = text.drain(..end + 4).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|line| line.strip_prefix(name))
                        .map(str::to_owned)
                };
                let (Some(event), Some(data), Some(id)) =
                    (field("event: "), field("data: "), field("id: "))
                else {
                    continue;
                };
                let data: Value = serde_json::from_str(&data).unwrap();
                let done = stop(&data);
                frames.push((event, data, id));
                if done {
                    return;
                }
            }
        }
    };
    tokio::time::timeout(BOUND, read)
        .await
        .expect("the stream reached the frame awaited");
    frames
}

fn root_lifecycle(event: &Value, which: &str) -> bool {
    event["method"] == "lifecycle"
        && event["params"]["namespace"] == json!([])
        && event["params"]["data"]["event"] == which
}

const HI: &str = r#"{"messages": [{"type": "human", "content": "hi"}]}"#;

fn hi() -> Value {
    serde_json::from_str(HI).unwrap()
}

#[tokio::test]
async fn run_start_creates_the_thread_and_the_stream_tells_the_run() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let answer = command(
        &app,
        thread,
        1,
        "run.start",
        json!({"assistant_id": "echo", "input": hi()}),
    )
    .await;
    assert_eq!(answer["type"], "success", "{answer}");
    assert!(Uuid::parse_str(answer["result"]["run_id"].as_str().unwrap()).is_ok());
    assert_eq!(answer["meta"]["applied_through_seq"], 0);

    let all = json!({"channels": ["lifecycle", "values", "messages", "updates"]});
    let frames = events_until(&app, thread, all, |e| root_lifecycle(e, "completed")).await;
    let (event, first, id) = &frames[0];
    assert_eq!((event.as_str(), id.as_str()), ("lifecycle", "1"));
    assert_eq!(first["type"], "event");
    assert_eq!(first["seq"], 1);
    assert_eq!(
        first["params"]["data"],
        json!({"event": "running", "graph_name": "echo"})
    );
    let seqs: Vec<u64> = frames
        .iter()
        .map(|(_, e, _)| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
    for (event, data, id) in &frames {
        assert_eq!(data["method"], *event);
        assert_eq!(data["seq"].to_string(), *id);
        assert!(data["params"]["timestamp"].as_i64().unwrap() > 0);
    }
    let text: String = frames
        .iter()
        .filter(|(_, e, _)| e["params"]["data"]["event"] == "content-block-delta")
        .map(|(_, e, _)| {
            e["params"]["data"]["delta"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "echo: hi");
    let last_values = frames
        .iter()
        .rev()
        .find(|(event, _, _)| event == "values")
        .unwrap();
    assert_eq!(
        last_values.1["params"]["data"]["messages"][1]["content"],
        "echo: hi"
    );

    // Another connection numbers the same events alike; `since` skips the first ones.
    let narrow = json!({"channels": ["lifecycle"], "since": 1});
    let again = events_until(&app, thread, narrow, |e| root_lifecycle(e, "completed")).await;
    assert_eq!(again.len(), 1);
    let completed = frames.last().unwrap();
    assert_eq!(again[0].1, completed.1);
}

#[tokio::test]
async fn an_interrupt_is_requested_then_answered_with_input_respond() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let start = json!({"assistant_id": "approval", "input": {"topic": "cats"}});
    command(&app, thread, 1, "run.start", start).await;
    let watch = json!({"channels": ["lifecycle", "input"]});
    let paused = events_until(&app, thread, watch.clone(), |e| {
        root_lifecycle(e, "interrupted")
    })
    .await;
    let (event, request, _) = paused
        .iter()
        .find(|(event, _, _)| event == "input.requested")
        .expect("an input request");
    assert_eq!(event, "input.requested");
    let data = &request["params"]["data"];
    assert_eq!(data["payload"]["question"], "approve?");
    assert_eq!(data["payload"]["draft"], "draft for cats");
    assert_eq!(
        data["payload"]["action_requests"][0]["args"],
        json!({"draft": "draft for cats"})
    );
    assert_eq!(data["value"], data["payload"]);

    let unknown = command(
        &app,
        thread,
        2,
        "input.respond",
        json!({"interrupt_id": "nope", "namespace": [], "response": true}),
    )
    .await;
    assert_eq!(unknown["error"], "no_such_interrupt", "{unknown}");

    let respond = json!({"interrupt_id": data["interrupt_id"], "namespace": [], "response": true});
    let answer = command(&app, thread, 3, "input.respond", respond).await;
    assert_eq!(answer["type"], "success", "{answer}");
    assert_eq!(answer["result"], json!({}));
    let since = paused.last().unwrap().1["seq"].as_u64().unwrap();
    let resumed = json!({"channels": ["lifecycle", "values"], "since": since});
    let frames = events_until(&app, thread, resumed, |e| root_lifecycle(e, "completed")).await;
    // The resuming run's own lifecycle follows the pause.
    assert!(
        frames.iter().any(|(_, e, _)| root_lifecycle(e, "running")),
        "{frames:?}"
    );
    let values = frames
        .iter()
        .rev()
        .find(|(event, _, _)| event == "values")
        .unwrap();
    assert_eq!(values.1["params"]["data"]["status"], "approved");

    let tree = command(&app, thread, 4, "agent.getTree", json!({})).await;
    assert_eq!(
        tree["result"]["tree"],
        json!({"namespace": [], "status": "completed", "graph_name": "approval"})
    );
}

#[tokio::test]
async fn a_subgraphs_events_carry_its_namespace() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let start = json!({"assistant_id": "nested", "input": {"topic": "cats"}});
    command(&app, thread, 1, "run.start", start).await;
    let inner = json!({"channels": ["lifecycle", "updates"], "namespaces": [["review"]]});
    let frames = events_until(&app, thread, inner, |e| e["method"] == "updates").await;
    let started = &frames[0].1;
    assert_eq!(
        started["params"]["data"],
        json!({"event": "started", "graph_name": "review"})
    );
    let namespace = started["params"]["namespace"][0].as_str().unwrap();
    assert!(namespace.starts_with("review:"), "{namespace}");
    let update = &frames.last().unwrap().1;
    assert_eq!(update["params"]["namespace"], json!([namespace]));
    assert_eq!(
        update["params"]["data"],
        json!({"node": "draft", "values": {"draft": "draft for cats"}})
    );

    // The update arrives before the run reaches its interrupt: wait until it has.
    let mut tree = Value::Null;
    for id in 2..250 {
        tree =
            command(&app, thread, id, "agent.getTree", json!({})).await["result"]["tree"].clone();
        if tree["status"] != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let tree = &tree;
    assert_eq!(tree["status"], "interrupted", "{tree}");
    assert_eq!(tree["children"][0]["namespace"], json!([namespace]));
    assert_eq!(tree["children"][0]["status"], "interrupted");
}

#[tokio::test]
async fn malformed_commands_are_refused() {
    let app = app().await;
    let uri = format!("/threads/{}/commands", Uuid::new_v4());
    let (status, body) = send(&app, &uri, "not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["detail"], "Invalid JSON body");
    for bad in [
        json!({"id": "1", "method": "run.start"}),
        json!({"id": 1, "method": 2}),
    ] {
        let (status, body) = send(&app, &uri, &bad.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"], "invalid_argument");
        assert_eq!(body["detail"], body["message"]);
    }
    let thread = Uuid::new_v4();
    let unknown = command(&app, thread, 7, "state.get", json!({})).await;
    assert_eq!(
        unknown,
        json!({"type": "error", "id": 7, "error": "unknown_command",
               "message": "Unknown protocol command: state.get"})
    );
    let subscribe = command(
        &app,
        thread,
        8,
        "subscription.subscribe",
        json!({"channels": ["values"]}),
    )
    .await;
    assert_eq!(subscribe["error"], "not_supported");
    let missing = command(&app, thread, 9, "run.start", json!({"input": {}})).await;
    assert_eq!(missing["error"], "invalid_argument", "{missing}");
    let nul = command(
        &app,
        thread,
        10,
        "run.start",
        json!({"assistant_id": "echo", "input": {"x": "\u{0}"}}),
    )
    .await;
    assert_eq!(nul["error"], "invalid_argument", "{nul}");
    let no_graph = command(
        &app,
        thread,
        11,
        "run.start",
        json!({"assistant_id": "nope"}),
    )
    .await;
    assert_eq!(no_graph["type"], "error", "{no_graph}");
    let tree = command(&app, Uuid::new_v4(), 12, "agent.getTree", json!({})).await;
    assert_eq!(tree["type"], "error", "{tree}");
}

#[tokio::test]
async fn an_event_stream_needs_known_channels_and_a_thread() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let uri = format!("/threads/{thread}/stream/events");
    for (body, words) in [
        ("{}", "channels is required"),
        (r#"{"channels": []}"#, "channels is required"),
        (r#"{"channels": ["values", "debug"]}"#, "debug"),
        (r#"{"channels": "values"}"#, "Invalid event stream request"),
        ("nope", "Invalid JSON body"),
    ] {
        let (status, reply) = send(&app, &uri, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(reply["detail"].as_str().unwrap().contains(words), "{reply}");
    }
    let (status, _) = send(&app, &uri, r#"{"channels": ["values"]}"#).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a thread that does not exist yet"
    );
}

#[tokio::test]
async fn the_websocket_route_answers_a_plain_get_with_a_json_error() {
    let app = app().await;
    let request = Request::get(format!("/threads/{}/stream/events", Uuid::new_v4()))
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("WebSocket"),
        "{body}"
    );
}

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

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

async fn send_json(socket: &mut Socket, value: Value) {
    socket.send(Message::text(value.to_string())).await.unwrap();
}

#[tokio::test]
async fn a_websocket_answers_commands_and_sends_its_subscriptions_events() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let start = json!({"assistant_id": "echo", "input": hi()});
    command(&app, thread, 1, "run.start", start).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let url = format!("ws://{address}/threads/{thread}/stream/events");
    let (mut socket, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();

    socket.send(Message::text("nope")).await.unwrap();
    let error = receive(&mut socket).await;
    assert_eq!(
        (error["type"].as_str(), error["id"].is_null()),
        (Some("error"), true)
    );
    assert_eq!(error["error"], "invalid_argument");
    send_json(
        &mut socket,
        json!({"id": 2, "method": "input.inject", "params": {}}),
    )
    .await;
    assert_eq!(receive(&mut socket).await["error"], "unknown_command");
    let bad =
        json!({"id": 3, "method": "subscription.subscribe", "params": {"channels": ["nope"]}});
    send_json(&mut socket, bad).await;
    assert_eq!(receive(&mut socket).await["error"], "invalid_argument");

    let subscribe = json!({"id": 4, "method": "subscription.subscribe",
                           "params": {"channels": ["lifecycle"], "namespaces": [[]], "depth": 0}});
    send_json(&mut socket, subscribe).await;
    let mut events = Vec::new();
    let answer = loop {
        let frame = receive(&mut socket).await;
        if frame["type"] == "success" {
            break frame;
        }
        events.push(frame);
    };
    assert_eq!(answer["id"], 4);
    let subscription = answer["result"]["subscription_id"]
        .as_str()
        .unwrap()
        .to_owned();
    while !events
        .last()
        .is_some_and(|e| root_lifecycle(e, "completed"))
    {
        events.push(receive(&mut socket).await);
    }
    assert!(
        events.iter().all(|e| e["method"] == "lifecycle"),
        "{events:?}"
    );
    assert!(root_lifecycle(&events[0], "running"));

    let unsubscribe = json!({"id": 5, "method": "subscription.unsubscribe",
                             "params": {"subscription_id": subscription}});
    send_json(&mut socket, unsubscribe.clone()).await;
    assert_eq!(receive(&mut socket).await["type"], "success");
    let mut again = unsubscribe;
    again["id"] = json!(6);
    send_json(&mut socket, again).await;
    assert_eq!(receive(&mut socket).await["error"], "no_such_subscription");

    // A run started over the socket.
    let start = json!({"id": 7, "method": "run.start",
                       "params": {"assistant_id": "echo", "input": hi()}});
    send_json(&mut socket, start).await;
    let answer = receive(&mut socket).await;
    assert_eq!(answer["type"], "success", "{answer}");
    socket.close(None).await.unwrap();
}

/// Accepts `x-api-key: key-<identity>`.
struct Keys;

#[async_trait::async_trait]
impl service_axum::auth::Authenticator for Keys {
    async fn authenticate(
        &self,
        request: &axum::http::request::Parts,
    ) -> Result<std::sync::Arc<service_engine::auth::Principal>, service_axum::auth::Unauthenticated>
    {
        let key = request
            .headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok());
        match key.and_then(|key| key.strip_prefix("key-")) {
            Some(identity) => Ok(std::sync::Arc::new(service_engine::auth::Principal::new(
                identity,
            ))),
            None => Err(service_axum::auth::Unauthenticated::new("Missing API key")),
        }
    }
}

#[tokio::test]
async fn the_websocket_handshake_authenticates_like_any_request() {
    let app = support::app_with(service_axum::RouterOptions {
        auth: service_axum::auth::Auth {
            authenticator: Some(std::sync::Arc::new(Keys)),
            authorizer: None,
        },
        ..service_axum::RouterOptions::default()
    })
    .await;
    let thread = Uuid::new_v4();
    let start = json!({"id": 1, "method": "run.start",
                       "params": {"assistant_id": "echo", "input": hi()}});
    let request = Request::post(format!("/threads/{thread}/commands"))
        .header("content-type", "application/json")
        .header("x-api-key", "key-alice")
        .body(Body::from(start.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("ws://{address}/threads/{thread}/stream/events");
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let refused = tokio_tungstenite::client_async(url.as_str(), stream).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        }
        other => panic!("a handshake without a key is refused: {other:?}"),
    }
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("x-api-key", "key-alice".parse().unwrap());
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut socket, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .unwrap();
    let subscribe = json!({"id": 2, "method": "subscription.subscribe",
                           "params": {"channels": ["lifecycle"]}});
    send_json(&mut socket, subscribe).await;
    assert_eq!(receive(&mut socket).await["id"], 2);
}

#[tokio::test]
async fn an_idempotency_key_on_an_event_stream_does_not_hold_it_back() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let start = json!({"assistant_id": "echo", "input": hi()});
    command(&app, thread, 1, "run.start", start).await;
    for _ in 0..2 {
        let request = Request::post(format!("/threads/{thread}/stream/events"))
            .header("content-type", "application/json")
            .header("idempotency-key", "same-key")
            .body(Body::from(r#"{"channels": ["lifecycle"]}"#))
            .unwrap();
        let response = tokio::time::timeout(BOUND, app.clone().oneshot(request))
            .await
            .expect("the stream's head comes at once")
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        let first = tokio::time::timeout(BOUND, body.frame()).await.unwrap();
        let bytes = first.unwrap().unwrap().into_data().unwrap();
        assert!(bytes.starts_with(b"event: lifecycle\r\n"), "{bytes:?}");
    }
}

/// Serves `app` on a local port; a WebSocket on `path` there.
async fn open_socket(app: Router, path: &str) -> Socket {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let request = format!("ws://{address}{path}")
        .into_client_request()
        .unwrap();
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (socket, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .expect("the handshake is accepted; access is answered after it");
    socket
}

/// The code the server closes the socket with (bounded).
async fn close_code(socket: &mut Socket) -> u16 {
    loop {
        let message = tokio::time::timeout(BOUND, socket.next())
            .await
            .expect("a close in time")
            .expect("a close frame before the end")
            .expect("a frame");
        if let Message::Close(frame) = message {
            return frame.map_or(1005, |frame| frame.code.into());
        }
    }
}

#[tokio::test]
async fn a_websocket_the_thread_refuses_is_closed_with_4000_plus_the_status() {
    let app = app().await;
    let mut socket = open_socket(app.clone(), "/threads/nope/stream/events").await;
    assert_eq!(close_code(&mut socket).await, 4422, "a malformed thread id");

    // A thread that does not exist yet may be one the client made up: only a run.start
    // may come first.
    let path = format!("/threads/{}/stream/events", Uuid::new_v4());
    let mut socket = open_socket(app.clone(), &path).await;
    send_json(
        &mut socket,
        json!({"id": 1, "method": "agent.getTree", "params": {}}),
    )
    .await;
    assert_eq!(close_code(&mut socket).await, 4404);
}

#[tokio::test]
async fn a_websocket_waits_for_the_run_start_that_makes_its_thread() {
    let thread = Uuid::new_v4();
    let path = format!("/threads/{thread}/stream/events");
    let mut socket = open_socket(app().await, &path).await;
    // A malformed frame is answered, not a reason to close.
    socket.send(Message::text("nope")).await.unwrap();
    assert_eq!(receive(&mut socket).await["error"], "invalid_argument");
    let start = json!({"id": 1, "method": "run.start",
                       "params": {"assistant_id": "echo", "input": hi()}});
    send_json(&mut socket, start).await;
    assert_eq!(receive(&mut socket).await["type"], "success");
    let subscribe = json!({"id": 2, "method": "subscription.subscribe",
                           "params": {"channels": ["lifecycle"]}});
    send_json(&mut socket, subscribe).await;
    let mut frames = vec![receive(&mut socket).await];
    while !frames.iter().any(|f| root_lifecycle(f, "completed")) {
        frames.push(receive(&mut socket).await);
    }
    assert!(
        frames.iter().any(|f| root_lifecycle(f, "running")),
        "{frames:?}"
    );
}

#[tokio::test]
async fn a_reconnect_replays_what_followed_since_under_the_clients_subscription_id() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let start = json!({"assistant_id": "echo", "input": hi()});
    command(&app, thread, 1, "run.start", start).await;
    let path = format!("/threads/{thread}/stream/events");
    let mut socket = open_socket(app, &path).await;
    // Everything the run sent, seen by the socket first.
    let subscribe = json!({"id": 2, "method": "subscription.subscribe",
                           "params": {"channels": ["lifecycle"]}});
    send_json(&mut socket, subscribe).await;
    let mut seen = Vec::new();
    while !seen.iter().any(|f| root_lifecycle(f, "completed")) {
        let frame = receive(&mut socket).await;
        if frame["type"] == "event" {
            seen.push(frame);
        }
    }
    let first = seen[0]["seq"].as_u64().unwrap();

    let no_since = json!({"id": 3, "method": "subscription.reconnect",
                          "params": {"channels": ["lifecycle"]}});
    send_json(&mut socket, no_since).await;
    let refused = receive(&mut socket).await;
    assert_eq!(refused["error"], "invalid_argument", "{refused}");

    let reconnect = json!({"id": 4, "method": "subscription.reconnect",
                           "params": {"channels": ["lifecycle"], "since": first,
                                      "subscription_id": "mine"}});
    send_json(&mut socket, reconnect).await;
    let answer = receive(&mut socket).await;
    assert_eq!(answer["type"], "success", "{answer}");
    assert_eq!(answer["result"]["subscription_id"], "mine");
    assert_eq!(answer["result"]["replayed_events"], seen.len() - 1);
    let mut replayed = Vec::new();
    for _ in 1..seen.len() {
        replayed.push(receive(&mut socket).await);
    }
    assert_eq!(replayed, seen[1..]);
    let unsubscribe = json!({"id": 5, "method": "subscription.unsubscribe",
                             "params": {"subscription_id": "mine"}});
    send_json(&mut socket, unsubscribe).await;
    assert_eq!(receive(&mut socket).await["type"], "success");
}

#[tokio::test]
async fn the_checkpoints_channel_carries_one_envelope_per_checkpoint() {
    let app = app().await;
    let thread = Uuid::new_v4();
    let start = json!({"assistant_id": "steps", "input": {"n": 2}});
    command(&app, thread, 1, "run.start", start).await;
    let request = json!({"channels": ["checkpoints", "lifecycle"]});
    let frames = events_until(&app, thread, request, |e| root_lifecycle(e, "completed")).await;
    let checkpoints: Vec<&Value> = frames
        .iter()
        .filter(|(event, _, _)| event == "checkpoints")
        .map(|(_, data, _)| &data["params"]["data"])
        .collect();
    assert!(checkpoints.len() >= 3, "{checkpoints:?}");
    assert_eq!(checkpoints[0]["source"], "input");
    assert_eq!(checkpoints[0]["step"], -1);
    assert!(checkpoints[0].get("parent_id").is_none());
    for pair in checkpoints.windows(2) {
        assert_eq!(pair[1]["parent_id"], pair[0]["id"], "{checkpoints:?}");
        assert!(pair[1]["step"].as_i64() > pair[0]["step"].as_i64());
    }
    // The last one is the thread's current checkpoint.
    let request = Request::get(format!("/threads/{thread}/state"))
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let state: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        checkpoints.last().unwrap()["id"],
        state["checkpoint"]["checkpoint_id"]
    );
}
