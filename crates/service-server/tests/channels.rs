//! Channel routes through the server binary: the inventory's shape and its
//! permission, inbound routes that bypass the service's authentication and rely on
//! the provider's signature, no credential in any answer or log line, and a reply
//! that survives a kill -9 between the run's settle and the provider's
//! acknowledgement (PostgreSQL).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use serde_json::{Value, json};
use support::{ConfigFile, Database, Instance, call, listening_address};
use tokio::sync::watch;

const TELEGRAM_SECRET: &str = "telegram-secret-token-0042";
const TELEGRAM_TOKEN: &str = "4242:telegram-bot-token-secret";
const READER_KEY: &str = "reader-key-0123456789abcdef";
const NOBODY_KEY: &str = "nobody-key-0123456789abcdef";

/// A fake Telegram Bot API that holds each request until opened, then records it as
/// acknowledged (a request held when its sender dies is answered 503, never counted).
#[derive(Clone)]
struct FakeTelegram {
    arrived: Arc<Mutex<Vec<Value>>>,
    acknowledged: Arc<Mutex<Vec<(String, Value)>>>,
    open: watch::Sender<bool>,
}

async fn telegram_api(
    State(fake): State<FakeTelegram>,
    uri: Uri,
    body: Bytes,
) -> (StatusCode, String) {
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.arrived.lock().unwrap().push(message.clone());
    let mut open = fake.open.subscribe();
    if *open.borrow_and_update() {
        fake.acknowledged
            .lock()
            .unwrap()
            .push((uri.path().to_owned(), message));
        return (StatusCode::OK, json!({"ok": true}).to_string());
    }
    let _ = open.wait_for(|open| *open).await;
    (StatusCode::SERVICE_UNAVAILABLE, String::new())
}

impl FakeTelegram {
    async fn start(open: bool) -> (Self, String) {
        let (open, _) = watch::channel(open);
        let fake = Self {
            arrived: Arc::default(),
            acknowledged: Arc::default(),
            open,
        };
        let app = axum::Router::new()
            .fallback(telegram_api)
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, url)
    }
}

/// The binary with every log line at `level` kept, for the no-secret check.
fn spawn_logged(
    args: &[&str],
    env: &[(&str, &str)],
    level: &str,
) -> (Instance, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_service-server"))
        .args(args)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", level)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let address = listening_address(&mut log);
    let kept = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in log.lines().map_while(Result::ok) {
            kept.lock().unwrap().push(line);
        }
    });
    let mut errors = BufReader::new(child.stderr.take().unwrap());
    let kept = Arc::clone(&lines);
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = errors.read_to_string(&mut text);
        kept.lock().unwrap().extend(text.lines().map(str::to_owned));
    });
    (Instance { child, address }, lines)
}

/// POSTs raw bytes with headers; status and JSON body.
fn post_raw(
    instance: &Instance,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Value) {
    let mut stream = TcpStream::connect(&instance.address).unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, raw) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (
        status,
        serde_json::from_str(raw.trim()).unwrap_or(Value::Null),
    )
}

fn telegram_update(update_id: i64, chat: i64, text: &str) -> Vec<u8> {
    json!({"update_id": update_id, "message": {"message_id": update_id, "text": text,
        "from": {"id": 7, "is_bot": false, "username": "ann"}, "chat": {"id": chat, "type": "private"}}})
    .to_string()
    .into_bytes()
}

fn channels_config(label: &str, api: &str, auth: Option<Value>) -> ConfigFile {
    let mut config = json!({"service": {"channels": [
        {"name": "tg", "provider": "telegram", "assistant": "echo", "allowed_assistants": ["reply"],
         "secret_env": "TG_SECRET", "token_env": "TG_TOKEN", "api_base_url": api},
        {"name": "ops", "provider": "generic", "assistant": "echo", "secret_env": "OPS_SECRET"},
    ]}});
    if let Some(auth) = auth {
        config["auth"] = auth;
    }
    ConfigFile::write(&format!("channels-{label}"), &config)
}

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inventory_needs_assistants_read_and_inbound_routes_need_only_the_signature() {
    let (fake, api) = FakeTelegram::start(true).await;
    let auth = json!({
        "api_keys": {
            "reader": {"key": READER_KEY, "permissions": ["assistants:read"]},
            "nobody": {"key": NOBODY_KEY, "permissions": []},
        },
        "permissions": {"assistants:read": "assistants:read"},
    });
    let config = channels_config("auth", &api, Some(auth));
    let env = [
        ("TG_SECRET", TELEGRAM_SECRET),
        ("TG_TOKEN", TELEGRAM_TOKEN),
        ("OPS_SECRET", "ops-secret-value-0042"),
    ];
    let (server, log) = spawn_logged(
        &["dev", "--port", "0", "--config", &config.path()],
        &env,
        "debug",
    );

    assert_eq!(call(&server, "GET", "/channels", &[], None).status, 401);
    let denied = call(
        &server,
        "GET",
        "/channels",
        &[("x-api-key", NOBODY_KEY)],
        None,
    );
    assert_eq!(denied.status, 403, "{:?}", denied.body);
    let inventory = call(
        &server,
        "GET",
        "/channels",
        &[("x-api-key", READER_KEY)],
        None,
    );
    assert_eq!(inventory.status, 200);
    assert_eq!(
        inventory.body,
        json!([
            {"name": "ops", "provider": "generic", "default_assistant": "echo",
             "allowed_assistants": ["echo"], "outbound": false},
            {"name": "tg", "provider": "telegram", "default_assistant": "echo",
             "allowed_assistants": ["echo", "reply"], "outbound": true},
        ])
    );
    let info = call(&server, "GET", "/info", &[], None);
    assert_eq!(info.body["flags"]["channels"], json!(true));

    // No API key: the provider's signature is the only authentication.
    let body = telegram_update(1, 31, "hello");
    let (status, _) = post_raw(&server, "/channels/tg", &[], &body);
    assert_eq!(status, 401, "an unsigned request is refused");
    let (status, _) = post_raw(
        &server,
        "/channels/tg",
        &[("x-telegram-bot-api-secret-token", "wrong-token")],
        &body,
    );
    assert_eq!(status, 401);
    let (status, answer) = post_raw(
        &server,
        "/channels/tg",
        &[("x-telegram-bot-api-secret-token", TELEGRAM_SECRET)],
        &body,
    );
    assert_eq!(status, 200, "{answer}");
    let (status, _) = post_raw(&server, "/channels/nope", &[], &body);
    assert_eq!(status, 404);
    wait_until(
        "the reply reaches the fake",
        Duration::from_secs(20),
        || !fake.acknowledged.lock().unwrap().is_empty(),
    )
    .await;
    let (path, message) = fake.acknowledged.lock().unwrap()[0].clone();
    assert_eq!(path, format!("/bot{TELEGRAM_TOKEN}/sendMessage"));
    assert_eq!(message, json!({"chat_id": "31", "text": "echo: hello"}));

    // The run's deliveries and webhook name the channel only.
    let thread = answer["thread_id"].as_str().unwrap();
    let run = answer["run_id"].as_str().unwrap();
    let read = call(
        &server,
        "GET",
        &format!("/threads/{thread}/runs/{run}"),
        &[("x-api-key", READER_KEY)],
        None,
    );
    let webhook = read.body["kwargs"]["webhook"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(webhook.starts_with("channel://tg/"), "{webhook}");

    drop(server);
    std::thread::sleep(Duration::from_millis(100));
    let lines = log.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|line| line.contains("channel request refused")),
        "the refusals are logged"
    );
    for line in &lines {
        for secret in [
            TELEGRAM_SECRET,
            TELEGRAM_TOKEN,
            "ops-secret-value-0042",
            READER_KEY,
        ] {
            assert!(!line.contains(secret), "a secret in the log: {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_unacknowledged_when_the_server_is_killed_arrives_after_the_restart() {
    let database = Database::create("channel_crash").await;
    let (fake, api) = FakeTelegram::start(false).await;
    let config = channels_config("crash", &api, None);
    let url = database.url();
    let env = [
        ("TG_SECRET", TELEGRAM_SECRET),
        ("TG_TOKEN", TELEGRAM_TOKEN),
        ("OPS_SECRET", "ops-secret-value-0042"),
        ("DATABASE_URL", url.as_str()),
        ("SERVICE_WEBHOOK_TIMEOUT_MS", "1000"),
    ];
    let args = ["start", "--port", "0", "--config", &config.path()];
    let (mut first, _) = spawn_logged(&args, &env, "info");
    let (status, answer) = post_raw(
        &first,
        "/channels/tg",
        &[("x-telegram-bot-api-secret-token", TELEGRAM_SECRET)],
        &telegram_update(5, 77, "survive"),
    );
    assert_eq!(status, 200, "{answer}");
    // The run settled and its reply is at the fake, which holds it unanswered.
    wait_until("the reply's first attempt", Duration::from_secs(30), || {
        !fake.arrived.lock().unwrap().is_empty()
    })
    .await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    fake.open.send_replace(true);
    assert!(fake.acknowledged.lock().unwrap().is_empty());

    let (second, _) = spawn_logged(&args, &env, "info");
    wait_until(
        "the reply after the restart",
        Duration::from_secs(60),
        || !fake.acknowledged.lock().unwrap().is_empty(),
    )
    .await;
    let (_, message) = fake.acknowledged.lock().unwrap()[0].clone();
    assert_eq!(message, json!({"chat_id": "77", "text": "echo: survive"}));
    drop(second);
    database.drop().await;
}

/// SPEC's burst through the binary over real HTTP: 200 signed messages over 20
/// conversations (each conversation's in order, the conversations at once) plus a
/// redelivery of each conversation's first. The acknowledgement times are reported;
/// the bound asserted is generous (Slack's deadline is 3 s).
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_200_messages_is_acknowledged_fast_and_runs_in_order_per_conversation() {
    let (fake, api) = FakeTelegram::start(true).await;
    let config = channels_config("burst", &api, None);
    let env = [
        ("TG_SECRET", TELEGRAM_SECRET),
        ("TG_TOKEN", TELEGRAM_TOKEN),
        ("OPS_SECRET", "ops-secret-value-0042"),
    ];
    let (server, _) = spawn_logged(
        &["dev", "--port", "0", "--config", &config.path()],
        &env,
        "info",
    );
    let server = Arc::new(server);
    let signed = [("x-telegram-bot-api-secret-token", TELEGRAM_SECRET)];
    let senders: Vec<_> = (0..20_i64)
        .map(|chat| {
            let server = Arc::clone(&server);
            std::thread::spawn(move || {
                let mut acks = Vec::new();
                let mut thread = String::new();
                for message in 0..10_i64 {
                    let body =
                        telegram_update(chat * 100 + message, 1000 + chat, &format!("m{message}"));
                    let started = Instant::now();
                    let (status, answer) = post_raw(&server, "/channels/tg", &signed, &body);
                    acks.push(started.elapsed());
                    assert_eq!(status, 200, "{answer}");
                    thread = answer["thread_id"].as_str().unwrap().to_owned();
                    if message == 0 {
                        let (_, again) = post_raw(&server, "/channels/tg", &signed, &body);
                        assert_eq!(again["duplicate"], json!(true));
                    }
                }
                (acks, thread)
            })
        })
        .collect();
    let mut acks = Vec::new();
    let mut threads = Vec::new();
    for sender in senders {
        let (times, thread) = sender.join().unwrap();
        acks.extend(times);
        threads.push(thread);
    }
    acks.sort();
    let p99 = acks[acks.len() * 99 / 100 - 1];
    println!(
        "burst over HTTP: {} acks, p50 {:?}, p99 {:?}, max {:?}",
        acks.len(),
        acks[acks.len() / 2],
        p99,
        acks[acks.len() - 1]
    );
    assert!(p99 < Duration::from_secs(2), "p99 {p99:?}");
    wait_until("a reply per message", Duration::from_secs(60), || {
        fake.acknowledged.lock().unwrap().len() >= 200
    })
    .await;
    for thread in &threads {
        let runs = call(
            &server,
            "GET",
            &format!("/threads/{thread}/runs"),
            &[],
            None,
        )
        .body;
        let mut texts: Vec<String> = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|run| {
                run["kwargs"]["input"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        texts.reverse();
        let expected: Vec<String> = (0..10).map(|m| format!("m{m}")).collect();
        assert_eq!(texts, expected, "thread {thread}");
    }
    assert_eq!(
        fake.acknowledged.lock().unwrap().len(),
        200,
        "no reply for a redelivery"
    );
}
