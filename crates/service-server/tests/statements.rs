//! What one run of each kind asks of PostgreSQL, counted on the wire between the
//! server binary and the database (statements, round trips, transactions), and pinned:
//! a change that adds a statement to a run's path fails here, and one that removes
//! one updates the table below and docs/performance.md §14 together.
//!
//! Each kind runs sequentially (one client, on a server with one worker, so a kind can
//! queue its run behind another), after warm-up rounds that fill every pooled
//! connection's statement cache; a measurement lasts until the database has
//! been quiet for a moment (a webhook's delivery ends after the wait has answered).
//! The server's periodic work (recovery, the webhook outbox's poll, and on a machine so
//! loaded that a run outlasts a second, the check of a joined run) can fall into a
//! measurement and only ever adds to it, so each kind is measured five times and the
//! smallest reading is the run's own.

mod support;
#[path = "statements/wire.rs"]
mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};
use support::{Database, Instance, base_url, call, request, start_with};
use wire::{Counts, Proxy};

/// (statements, round trips, transactions) of one operation of each kind.
const EXPECTED: &[(&str, [u64; 3])] = &[
    ("stateless wait (echo)", [3, 3, 3]),
    (
        "thread wait, new thread (echo, if_not_exists=create)",
        [3, 3, 3],
    ),
    // Its count includes the end of the busy worker's run (its last checkpoint, and the
    // settle that claims this run).
    (
        "thread wait, new thread, queued behind a busy worker (echo, if_not_exists=create)",
        [6, 6, 6],
    ),
    ("thread wait, existing thread (echo)", [5, 5, 5]),
    (
        "stream, existing thread (steps n=5, values+updates+custom, durability=sync)",
        [10, 10, 10],
    ),
    (
        "stream, existing thread (steps n=10, values+updates+custom, durability=sync)",
        [15, 15, 15],
    ),
    ("interrupt + resume (approval, two waits)", [13, 13, 13]),
    ("stateless wait + webhook", [4, 4, 4]),
    ("thread wait, new thread + webhook", [4, 4, 4]),
    // A statement built at run time goes with its parameters' types: no describe first.
    (
        "store search (namespace prefix and equality filter)",
        [1, 1, 1],
    ),
];

/// Kinds whose count depends on how far the run gets ahead of its checkpoints (the
/// default durability, `async`: the supersteps that queue up while a checkpoint write
/// is under way go in one statement): (at least, at most) of each count. At most one
/// statement per superstep, as with `sync`; at least one for all of them.
const BOUNDED: &[(&str, [u64; 3], [u64; 3])] = &[
    (
        "stream, existing thread (steps n=5, values+updates+custom)",
        [5, 5, 5],
        [10, 10, 10],
    ),
    (
        "stream, existing thread (steps n=10, values+updates+custom)",
        [5, 5, 5],
        [15, 15, 15],
    ),
];

const QUIET: Duration = Duration::from_millis(300);
const MEASUREMENTS: usize = 5;
const WARM_UP: usize = 3;

const HI: &str = r#"{"messages":[{"type":"human","content":"hi"}]}"#;

/// How long the run that keeps the server's one worker busy sleeps: long enough for
/// the measured run to be queued behind it, short of the coordinator's claim delay (a
/// second), which would add the thread claim's statements.
const BUSY_MS: u64 = 700;

struct Bench<'a> {
    server: &'a Instance,
    hook: String,
    arrived: Arc<AtomicUsize>,
}

impl Bench<'_> {
    /// Keeps the server's one worker busy for [`BUSY_MS`]: a `slow` run, once its input
    /// checkpoint shows (nothing more of it reaches the database until it ends).
    fn busy_worker(&self) {
        let thread = self.new_thread();
        let body = json!({"assistant_id": "slow", "input": {"delay_ms": BUSY_MS}});
        request(
            self.server,
            "POST",
            &format!("/threads/{thread}/runs"),
            Some(body),
        );
        let state = format!("/threads/{thread}/state");
        let started = Instant::now();
        while request(self.server, "GET", &state, None)["values"]["delay_ms"] != BUSY_MS {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the busy run starts"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn new_thread(&self) -> String {
        request(self.server, "POST", "/threads", Some(json!({})))["thread_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn ok(&self, path: &str, body: Value) {
        let reply = call(self.server, "POST", path, &[], Some(body));
        assert_eq!(reply.status, 200, "POST {path}: {:?}", reply.body);
    }

    /// What runs outside the measurement (making the thread it uses), then the
    /// operation measured.
    fn operation(&self, kind: &str) -> impl FnOnce() + '_ {
        let input: Value = serde_json::from_str(HI).unwrap();
        let echo = json!({"assistant_id": "echo", "input": input});
        let with_hook = |mut body: Value| {
            body["webhook"] = json!(self.hook);
            body
        };
        let fresh = format!("/threads/{}/runs/wait", uuid::Uuid::new_v4());
        let create = |mut body: Value| {
            body["if_not_exists"] = json!("create");
            body
        };
        let sync = kind.contains("durability=sync");
        let stream = move |n: u64| {
            let mut body = json!({"assistant_id": "steps", "input": {"n": n},
                   "stream_mode": ["values", "updates", "custom"]});
            if sync {
                body["durability"] = json!("sync");
            }
            body
        };
        let kind = kind.to_owned();
        if kind.contains("queued behind a busy worker") {
            self.busy_worker();
        }
        let thread = (!kind.contains("new thread")
            && !kind.starts_with("stateless")
            && !kind.starts_with("store"))
        .then(|| self.new_thread());
        move || match kind.as_str() {
            "stateless wait (echo)" => self.ok("/runs/wait", echo),
            "thread wait, new thread (echo, if_not_exists=create)"
            | "thread wait, new thread, queued behind a busy worker (echo, if_not_exists=create)" => {
                self.ok(&fresh, create(echo))
            }
            "thread wait, existing thread (echo)" => {
                self.ok(&format!("/threads/{}/runs/wait", thread.unwrap()), echo)
            }
            streamed if streamed.starts_with("stream, existing thread (steps n=5,") => self.ok(
                &format!("/threads/{}/runs/stream", thread.unwrap()),
                stream(5),
            ),
            streamed if streamed.starts_with("stream, existing thread (steps n=10,") => self.ok(
                &format!("/threads/{}/runs/stream", thread.unwrap()),
                stream(10),
            ),
            "interrupt + resume (approval, two waits)" => {
                let path = format!("/threads/{}/runs/wait", thread.unwrap());
                self.ok(
                    &path,
                    json!({"assistant_id": "approval", "input": {"topic": "count"}}),
                );
                self.ok(
                    &path,
                    json!({"assistant_id": "approval", "command": {"resume": true}}),
                );
            }
            "stateless wait + webhook" => {
                let before = self.arrived.load(Ordering::SeqCst);
                self.ok("/runs/wait", with_hook(echo));
                self.delivered(before);
            }
            "thread wait, new thread + webhook" => {
                let before = self.arrived.load(Ordering::SeqCst);
                self.ok(&fresh, with_hook(create(echo)));
                self.delivered(before);
            }
            "store search (namespace prefix and equality filter)" => self.ok(
                "/store/items/search",
                json!({"namespace_prefix": ["memories"], "filter": {"group": 7}, "limit": 10}),
            ),
            other => panic!("no operation for {other}"),
        }
    }

    fn delivered(&self, before: usize) {
        let started = Instant::now();
        while self.arrived.load(Ordering::SeqCst) == before {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "delivery arrives"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Runs `operation` and counts until the database has been quiet for [`QUIET`], every
/// exchange answered.
fn measure(proxy: &Proxy, operation: impl FnOnce()) -> Counts {
    let before = proxy.counts();
    operation();
    let mut last = proxy.counts();
    let mut quiet_since = Instant::now();
    let started = Instant::now();
    while quiet_since.elapsed() < QUIET {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the database goes quiet"
        );
        std::thread::sleep(Duration::from_millis(10));
        let now = proxy.counts();
        if now.statements != last.statements
            || now.round_trips != last.round_trips
            || now.in_flight > 0
        {
            quiet_since = Instant::now();
        }
        last = now;
    }
    last.since(&before)
}

#[test]
fn each_run_kind_costs_the_database_what_the_table_says() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let database = runtime.block_on(Database::create("statements"));
    let config: tokio_postgres::Config = base_url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        other => panic!("TEST_DATABASE_URL must name a TCP host for this test, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let proxy = runtime.block_on(Proxy::start(format!("{host}:{port}")));
    let user = config.get_user().unwrap_or("postgres");
    let name = database.url().rsplit_once('/').unwrap().1.to_owned();
    let url = format!("postgres://{user}@127.0.0.1:{}/{name}", proxy.port);

    let arrived = Arc::new(AtomicUsize::new(0));
    let receiver = axum::Router::new().route(
        "/hook",
        post({
            let arrived = Arc::clone(&arrived);
            move || async move {
                arrived.fetch_add(1, Ordering::SeqCst);
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, receiver).await.unwrap() });

    // One worker, so a run can be queued behind another.
    let server = start_with(&url, &[("SERVICE_RUN_CONCURRENCY", "1")]);
    let bench = Bench {
        server: &server,
        hook,
        arrived,
    };
    let kinds: Vec<(&str, [u64; 3], [u64; 3])> = EXPECTED
        .iter()
        .map(|&(kind, expected)| (kind, expected, expected))
        .chain(BOUNDED.iter().copied())
        .collect();
    for _ in 0..WARM_UP {
        for (kind, _, _) in &kinds {
            bench.operation(kind)();
        }
    }

    let mut table = String::from(
        "| Run kind | statements | round trips | transactions |\n|---|---:|---:|---:|\n",
    );
    // STATEMENTS_SHOW=1 prints every kind's statements (and passes).
    let shown = std::env::var_os("STATEMENTS_SHOW").is_some();
    let mut wrong = Vec::new();
    for (kind, at_least, at_most) in &kinds {
        let mut readings: Vec<Counts> = (0..MEASUREMENTS)
            .map(|_| {
                let operation = bench.operation(kind);
                measure(&proxy, operation)
            })
            .collect();
        readings.sort_by_key(|counts| (counts.statements, counts.round_trips));
        let own = &readings[0];
        let got = [own.statements, own.round_trips, own.transactions];
        table.push_str(&format!(
            "| {kind} | {} | {} | {} |\n",
            got[0], got[1], got[2]
        ));
        let within = got
            .iter()
            .zip(at_least.iter().zip(at_most))
            .all(|(got, (least, most))| least <= got && got <= most);
        if !within || shown {
            let expected = if at_least == at_most {
                format!("{at_least:?}")
            } else {
                format!("from {at_least:?} to {at_most:?}")
            };
            wrong.push(format!(
                "{kind}: expected {expected}, counted {got:?} (and {} statement-cache \
                 fills, {} connections opened); its statements:\n  {}",
                own.cache_fills,
                own.connections,
                own.executed.join("\n  ")
            ));
        }
    }
    println!("{table}");
    if shown {
        println!("{}", wrong.join("\n\n"));
    }
    drop(server);
    runtime.block_on(database.drop());
    assert!(
        wrong.is_empty() || shown,
        "statements per run changed (update EXPECTED or BOUNDED and docs/performance.md §14):\n{table}\n{}",
        wrong.join("\n\n")
    );
}
