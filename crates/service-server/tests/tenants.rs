//! Two tenants on the binary (API keys, owner scoping), in memory and on PostgreSQL.
//! The walk is generated from the router's own route table: for every route, with
//! the resources alice made, bob's request is refused (403, 404, 409, 422, or a 400
//! that names nothing of hers) or answers an empty result, and afterwards every one
//! of alice's resources is as it was. A route added without a case fails the walk.
//! Then one test per leak a hostile second tenant found, each failing before the
//! engine decided scope itself.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use serde_json::{Value, json};
use service_axum::auth::Access;
use service_axum::{RouteInfo, RouterOptions};
use support::{ConfigFile, Database, Instance, Reply, call, spawn};

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef00";
const STAR: &str = "star-key-0123456789abcdef0";
const MEMORIES: &str = "memories-key-0123456789abc";

/// The secret of the walk's channel route (its inbound route is public; the inventory
/// is walked as a guarded route).
const CHANNEL_SECRET: (&str, &str) = ("TENANTS_OPS_SECRET", "tenants-ops-secret-0123");

fn config(label: &str, extra: Value) -> ConfigFile {
    let mut config = json!({
        "auth": {
            "api_keys": {"alice": ALICE, "bob": BOB, "*": STAR, "memories": MEMORIES},
            "scoping": "owner",
        },
        "service": {"channels": [{"name": "ops", "provider": "generic", "assistant": "echo",
            "secret_env": CHANNEL_SECRET.0}]},
    });
    if let (Some(auth), Value::Object(extra)) = (config["auth"].as_object_mut(), extra) {
        auth.extend(extra);
    }
    ConfigFile::write(&format!("tenants-{label}"), &config)
}

fn dev(label: &str, extra: Value) -> (Instance, ConfigFile) {
    let config = config(label, extra);
    let instance = spawn(
        &["dev", "--port", "0", "--config", &config.path()],
        &[CHANNEL_SECRET],
    );
    (instance, config)
}

struct Tenant<'a> {
    instance: &'a Instance,
    key: &'a str,
}

impl Tenant<'_> {
    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        self.send_with(method, path, &[], body)
    }

    fn send_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> Reply {
        let mut all = vec![("x-api-key", self.key)];
        all.extend_from_slice(headers);
        call(self.instance, method, path, &all, body)
    }

    fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let reply = self.send(method, path, body);
        assert!(
            (200..300).contains(&reply.status),
            "{method} {path}: {} {}",
            reply.status,
            reply.body
        );
        reply.body
    }
}

fn alice_and_bob(instance: &Instance) -> (Tenant<'_>, Tenant<'_>) {
    let tenant = |key| Tenant { instance, key };
    (tenant(ALICE), tenant(BOB))
}

fn id(value: &Value, field: &str) -> String {
    value[field].as_str().expect(field).to_owned()
}

/// What alice made.
struct Alices {
    thread: String,
    run: String,
    pending: String,
    stateless: String,
    assistant: String,
    cron: String,
}

fn make_alices(alice: &Tenant<'_>) -> Alices {
    let thread = id(
        &alice.ok("POST", "/threads", Some(json!({"metadata": {"k": 1}}))),
        "thread_id",
    );
    alice.ok(
        "POST",
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "echo", "input": {"messages": [{"role": "user", "content": "alice's secret"}]}})),
    );
    let runs = alice.ok("GET", &format!("/threads/{thread}/runs"), None);
    let run = id(&runs[0], "run_id");
    let pending = id(
        &alice.ok(
            "POST",
            &format!("/threads/{thread}/runs"),
            Some(json!({"assistant_id": "echo", "input": {}, "after_seconds": 3600})),
        ),
        "run_id",
    );
    let stateless = id(
        &alice.ok(
            "POST",
            "/runs",
            Some(json!({"assistant_id": "echo", "input": {}, "after_seconds": 3600})),
        ),
        "run_id",
    );
    let assistant = id(
        &alice.ok(
            "POST",
            "/assistants",
            Some(json!({"graph_id": "echo", "name": "alice's", "config": {"configurable": {"secret": 1}}})),
        ),
        "assistant_id",
    );
    let cron = id(
        &alice.ok(
            "POST",
            "/runs/crons",
            Some(json!({"assistant_id": assistant, "schedule": "0 0 1 1 *", "input": {}})),
        ),
        "cron_id",
    );
    alice.ok(
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["notes"], "key": "x", "value": {"v": "alice"}})),
    );
    Alices {
        thread,
        run,
        pending,
        stateless,
        assistant,
        cron,
    }
}

/// What alice can see of her things, compared before and after bob's walk.
fn snapshot(alice: &Tenant<'_>, a: &Alices) -> Value {
    let t = &a.thread;
    let mut thread = alice.ok("GET", &format!("/threads/{t}"), None);
    thread["updated_at"] = Value::Null;
    let runs: Vec<Value> = alice
        .ok("GET", &format!("/threads/{t}/runs"), None)
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|run| json!([run["run_id"], run["status"], run["assistant_id"]]))
        .collect();
    let mut cron = alice.ok("GET", &format!("/runs/crons/{}", a.cron), None);
    cron["updated_at"] = Value::Null;
    json!({
        "thread": thread,
        "state": alice.ok("GET", &format!("/threads/{t}/state"), None)["values"],
        "history": alice.ok("GET", &format!("/threads/{t}/history"), None).as_array().map(Vec::len),
        "runs": runs,
        "assistant": alice.ok("GET", &format!("/assistants/{}", a.assistant), None),
        "versions": alice.ok("POST", &format!("/assistants/{}/versions", a.assistant), Some(json!({}))),
        "cron": cron,
        "item": alice.ok("GET", "/store/items?namespace=notes&key=x", None)["value"],
        "threads": alice.ok("POST", "/threads/count", Some(json!({}))),
        "assistants": alice.ok("POST", "/assistants/count", Some(json!({}))),
        "crons": alice.ok("POST", "/runs/crons/count", Some(json!({}))),
    })
}

/// What bob's request to a route may answer.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// A 4xx that names nothing of alice's.
    Refused,
    /// 2xx, and nothing of alice's in it (a list, count or page of bob's own and the
    /// shared system assistants).
    OnlyOwn,
}

/// Bob's request to `route`, aimed at alice's things. Every route of the table needs
/// a case: a route added later without one fails here.
fn bobs_request(route: &RouteInfo, a: &Alices) -> (String, Option<Value>, Expect) {
    use Expect::{OnlyOwn, Refused};
    let (t, r, p, s) = (&a.thread, &a.run, &a.pending, &a.stateless);
    let (asst, c) = (&a.assistant, &a.cron);
    let runs_on = |path: &str| format!("/threads/{t}/runs{path}");
    let run_body = json!({"assistant_id": asst, "input": {}});
    match (route.method.as_str(), route.path) {
        ("POST", "/assistants") => (
            "/assistants".into(),
            Some(json!({"graph_id": "echo", "assistant_id": asst, "if_exists": "do_nothing"})),
            Refused,
        ),
        ("POST", "/assistants/search") => ("/assistants/search".into(), Some(json!({})), OnlyOwn),
        ("POST", "/assistants/count") => ("/assistants/count".into(), Some(json!({})), OnlyOwn),
        ("GET", "/assistants/{assistant_id}") => (format!("/assistants/{asst}"), None, Refused),
        ("PATCH", "/assistants/{assistant_id}") => (
            format!("/assistants/{asst}"),
            Some(json!({"name": "bob's"})),
            Refused,
        ),
        ("DELETE", "/assistants/{assistant_id}") => (format!("/assistants/{asst}"), None, Refused),
        ("POST", "/assistants/{assistant_id}/versions") => (
            format!("/assistants/{asst}/versions"),
            Some(json!({})),
            Refused,
        ),
        ("POST", "/assistants/{assistant_id}/latest") => (
            format!("/assistants/{asst}/latest"),
            Some(json!({"version": 1})),
            Refused,
        ),
        ("GET", "/assistants/{assistant_id}/graph") => {
            (format!("/assistants/{asst}/graph"), None, Refused)
        }
        ("GET", "/assistants/{assistant_id}/subgraphs") => {
            (format!("/assistants/{asst}/subgraphs"), None, Refused)
        }
        ("GET", "/assistants/{assistant_id}/subgraphs/{namespace}") => {
            (format!("/assistants/{asst}/subgraphs/x"), None, Refused)
        }
        ("GET", "/assistants/{assistant_id}/schemas") => {
            (format!("/assistants/{asst}/schemas"), None, Refused)
        }
        ("POST", "/runs/crons") => ("/runs/crons".into(), Some(cron_body(asst)), Refused),
        ("POST", "/threads/{thread_id}/runs/crons") => {
            (runs_on("/crons"), Some(cron_body("echo")), Refused)
        }
        ("POST", "/runs/crons/search") => ("/runs/crons/search".into(), Some(json!({})), OnlyOwn),
        ("POST", "/runs/crons/count") => ("/runs/crons/count".into(), Some(json!({})), OnlyOwn),
        ("GET", "/runs/crons/{cron_id}") => (format!("/runs/crons/{c}"), None, Refused),
        ("PATCH", "/runs/crons/{cron_id}") => (
            format!("/runs/crons/{c}"),
            Some(json!({"enabled": false})),
            Refused,
        ),
        ("DELETE", "/runs/crons/{cron_id}") => (format!("/runs/crons/{c}"), None, Refused),
        ("POST", "/threads") => (
            "/threads".into(),
            Some(json!({"thread_id": t, "if_exists": "do_nothing", "metadata": {"k": 2}})),
            Refused,
        ),
        ("POST", "/threads/search") => ("/threads/search".into(), Some(json!({})), OnlyOwn),
        ("POST", "/threads/count") => ("/threads/count".into(), Some(json!({})), OnlyOwn),
        ("POST", "/threads/prune") => (
            "/threads/prune".into(),
            Some(json!({"thread_ids": [t]})),
            Refused,
        ),
        ("GET", "/threads/{thread_id}") => (format!("/threads/{t}"), None, Refused),
        ("PATCH", "/threads/{thread_id}") => (
            format!("/threads/{t}"),
            Some(json!({"metadata": {"k": 3}})),
            Refused,
        ),
        ("DELETE", "/threads/{thread_id}") => (format!("/threads/{t}"), None, Refused),
        ("POST", "/threads/{thread_id}/copy") => (format!("/threads/{t}/copy"), None, Refused),
        ("GET", "/threads/{thread_id}/state") => (format!("/threads/{t}/state"), None, Refused),
        ("POST", "/threads/{thread_id}/state") => (
            format!("/threads/{t}/state"),
            Some(json!({"values": {"messages": []}})),
            Refused,
        ),
        ("PATCH", "/threads/{thread_id}/state") => (
            format!("/threads/{t}/state"),
            Some(json!({"metadata": {"k": 4}})),
            Refused,
        ),
        ("POST", "/threads/{thread_id}/state/checkpoint") => (
            format!("/threads/{t}/state/checkpoint"),
            Some(json!({"checkpoint": {"checkpoint_id": "x"}})),
            Refused,
        ),
        ("GET", "/threads/{thread_id}/state/{checkpoint_id}") => {
            (format!("/threads/{t}/state/x"), None, Refused)
        }
        ("GET", "/threads/{thread_id}/history") => (format!("/threads/{t}/history"), None, Refused),
        ("POST", "/threads/{thread_id}/history") => {
            (format!("/threads/{t}/history"), Some(json!({})), Refused)
        }
        ("GET", "/threads/{thread_id}/stream") => (format!("/threads/{t}/stream"), None, Refused),
        ("POST", "/threads/{thread_id}/runs") => (runs_on(""), Some(run_body), Refused),
        ("GET", "/threads/{thread_id}/runs") => (runs_on(""), None, Refused),
        ("POST", "/threads/{thread_id}/runs/stream") => {
            (runs_on("/stream"), Some(run_body), Refused)
        }
        ("POST", "/threads/{thread_id}/runs/wait") => (runs_on("/wait"), Some(run_body), Refused),
        ("GET", "/threads/{thread_id}/runs/{run_id}") => (runs_on(&format!("/{r}")), None, Refused),
        ("DELETE", "/threads/{thread_id}/runs/{run_id}") => {
            (runs_on(&format!("/{p}")), None, Refused)
        }
        ("POST", "/threads/{thread_id}/runs/{run_id}/cancel") => {
            (runs_on(&format!("/{p}/cancel")), None, Refused)
        }
        ("GET", "/threads/{thread_id}/runs/{run_id}/join") => {
            (runs_on(&format!("/{r}/join")), None, Refused)
        }
        ("GET", "/threads/{thread_id}/runs/{run_id}/stream") => {
            (runs_on(&format!("/{r}/stream")), None, Refused)
        }
        ("GET", "/threads/{thread_id}/runs/{run_id}/deliveries") => {
            (runs_on(&format!("/{r}/deliveries")), None, Refused)
        }
        ("POST", "/threads/{thread_id}/runs/{run_id}/deliveries/{delivery_id}/replay") => (
            runs_on(&format!("/{r}/deliveries/{r}/replay")),
            None,
            Refused,
        ),
        ("POST", "/runs") => ("/runs".into(), Some(run_body), Refused),
        ("POST", "/runs/stream") => ("/runs/stream".into(), Some(run_body), Refused),
        ("POST", "/runs/wait") => ("/runs/wait".into(), Some(run_body), Refused),
        ("POST", "/runs/batch") => ("/runs/batch".into(), Some(json!([run_body])), Refused),
        ("POST", "/runs/cancel") => (
            "/runs/cancel".into(),
            Some(json!({"thread_id": t, "run_ids": [p]})),
            Refused,
        ),
        ("GET", "/runs/{run_id}/stream") => (format!("/runs/{s}/stream"), None, Refused),
        ("PUT", "/store/items") => (
            "/store/items".into(),
            Some(
                json!({"namespace": ["@tenant", "alice", "notes"], "key": "x", "value": {"v": "bob"}}),
            ),
            Refused,
        ),
        ("GET", "/store/items") => ("/store/items?namespace=notes&key=x".into(), None, OnlyOwn),
        ("DELETE", "/store/items") => (
            "/store/items".into(),
            Some(json!({"namespace": ["@tenant", "alice", "notes"], "key": "x"})),
            Refused,
        ),
        ("POST", "/store/items/search") => ("/store/items/search".into(), Some(json!({})), OnlyOwn),
        ("POST", "/store/namespaces") => ("/store/namespaces".into(), Some(json!({})), OnlyOwn),
        ("POST", "/threads/{thread_id}/commands") => (
            format!("/threads/{t}/commands"),
            Some(json!({"id": 1, "method": "agent.getTree", "params": {}})),
            Refused,
        ),
        ("POST", "/threads/{thread_id}/stream/events") => (
            format!("/threads/{t}/stream/events"),
            Some(json!({"channels": ["values"]})),
            Refused,
        ),
        ("GET", "/threads/{thread_id}/stream/events") => {
            (format!("/threads/{t}/stream/events"), None, Refused)
        }
        // The inventory is the server's configuration, the same for every caller.
        ("GET", "/channels") => ("/channels".into(), None, OnlyOwn),
        ("POST", "/invoke/{graph_id}") => ("/invoke/nothing-here".into(), Some(json!({})), Refused),
        // Her assistant's UI is not found for bob, as if it had none.
        ("POST", "/ui/{assistant_id}") => {
            (format!("/ui/{asst}"), Some(json!({"name": "x"})), Refused)
        }
        // Her assistant is named "alice's": as a tool, `alices`. Bob has no such tool.
        ("POST", "/mcp") => (
            "/mcp".into(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "alices", "arguments": {}}})),
            Refused,
        ),
        // Bob writes into alice's context (her thread) through the shared `echo`.
        ("POST", "/a2a/{assistant_id}") => (
            "/a2a/echo".into(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {"messageId": "m", "role": "ROLE_USER", "contextId": t,
                    "parts": [{"text": "bob's"}]}}})),
            Refused,
        ),
        ("GET", "/a2a/{assistant_id}/.well-known/agent-card.json") => (
            format!("/a2a/{asst}/.well-known/agent-card.json"),
            None,
            Refused,
        ),
        ("GET", "/.well-known/agent-card.json") => (
            format!("/.well-known/agent-card.json?assistant_id={asst}"),
            None,
            Refused,
        ),
        (method, path) => panic!(
            "no two-tenant case for {method} {path}: add one to bobs_request, saying what \
             another owner's request must get"
        ),
    }
}

fn cron_body(assistant: &str) -> Value {
    json!({"assistant_id": assistant, "schedule": "0 0 1 1 *", "input": {}})
}

fn walk(instance: &Instance) {
    let (alice, bob) = alice_and_bob(instance);
    let a = make_alices(&alice);
    let before = snapshot(&alice, &a);
    let mut routes = service_axum::routes(&RouterOptions::default());
    routes.extend(service_axum::channel_routes());
    assert!(routes.len() > 60, "the walk covers the whole table");
    for route in routes.iter().filter(|route| route.access != Access::Public) {
        let (path, body, expect) = bobs_request(route, &a);
        let reply = bob.send(route.method.as_str(), &path, body);
        let what = format!("{} {path}: {} {}", route.method, reply.status, reply.body);
        // Ids bob sent may come back in a not-found message; her data may not.
        let text = reply.body.to_string();
        for secret in ["alice's secret", "\"secret\":1", "\"v\":\"alice\""] {
            assert!(!text.contains(secret), "{what} shows alice's {secret}");
        }
        match expect {
            Expect::Refused => {
                let refused = matches!(reply.status, 400 | 403 | 404 | 409 | 422)
                    || (reply.status == 200 && reply.body.get("__error__").is_some())
                    || (reply.status == 200 && reply.body.get("error").is_some());
                assert!(refused, "{what}: another owner's request must be refused");
            }
            Expect::OnlyOwn => {
                assert!((200..300).contains(&reply.status), "{what}");
                for theirs in [
                    &a.thread,
                    &a.run,
                    &a.pending,
                    &a.stateless,
                    &a.assistant,
                    &a.cron,
                ] {
                    assert!(
                        !text.contains(theirs.as_str()),
                        "{what} lists alice's {theirs}"
                    );
                }
            }
        }
    }
    assert_eq!(
        snapshot(&alice, &a),
        before,
        "bob changed nothing of alice's"
    );
}

/// `/metrics` is outside the route table: aggregate counts over every tenant, so any
/// authenticated caller may scrape it, and nothing in it names what a tenant made.
#[test]
fn metrics_need_a_key_and_name_nothing_of_alices() {
    let (instance, _config) = dev("metrics", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let a = make_alices(&alice);
    assert_eq!(call(&instance, "GET", "/metrics", &[], None).status, 401);
    let mut stream = TcpStream::connect(&instance.address).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nx-api-key: {}\r\n\r\n",
        bob.key
    )
    .unwrap();
    let mut scrape = String::new();
    stream.read_to_string(&mut scrape).unwrap();
    assert!(scrape.starts_with("HTTP/1.1 200"), "{scrape}");
    assert!(scrape.contains("service_runs_created_total"), "{scrape}");
    for alices in [
        &a.thread,
        &a.run,
        &a.pending,
        &a.stateless,
        &a.assistant,
        &a.cron,
    ] {
        assert!(!scrape.contains(alices.as_str()), "{alices} in {scrape}");
    }
    assert!(!scrape.contains("alice"), "{scrape}");
}

#[test]
fn every_route_refuses_another_owner_in_memory() {
    let (instance, _config) = dev("walk-memory", json!({}));
    walk(&instance);
}

#[tokio::test]
async fn every_route_refuses_another_owner_on_postgres() {
    let database = Database::create("tenants").await;
    let config = config("walk-postgres", json!({}));
    let url = database.url();
    let instance = spawn(
        &["start", "--port", "0", "--config", &config.path()],
        &[("DATABASE_URL", &url), CHANNEL_SECRET],
    );
    tokio::task::spawn_blocking(move || walk(&instance))
        .await
        .expect("the walk holds");
    database.drop().await;
}

/// MCP's tools are the assistants the caller may read: bob's list has none of
/// alice's, while hers has her assistant (the walk shows he cannot call it).
#[test]
fn mcp_lists_only_the_callers_own_assistants_as_tools() {
    let (instance, _config) = dev("mcp", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let a = make_alices(&alice);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let names = |tenant: &Tenant<'_>| -> Vec<String> {
        let answer = tenant.ok("POST", "/mcp", Some(list.clone()));
        answer["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect()
    };
    let (hers, his) = (names(&alice), names(&bob));
    assert!(hers.contains(&"alices".to_owned()), "{hers:?}");
    assert!(!his.contains(&"alices".to_owned()), "{his:?}");
    assert!(
        his.contains(&"echo".to_owned()),
        "the system assistants: {his:?}"
    );
    let called = bob.ok(
        "POST",
        "/mcp",
        Some(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "alices", "arguments": {}}})),
    );
    assert_eq!(called["error"]["code"], -32602, "{called}");
    assert!(!called.to_string().contains(&a.assistant), "{called}");
}

/// A2A tasks are runs on the caller's threads: bob cannot read alice's task, cancel
/// her pending one, or send into it, in either A2A version; each is an unknown task.
#[test]
fn a2a_tasks_of_another_owner_are_unknown() {
    let (instance, _config) = dev("a2a", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let a = make_alices(&alice);
    let before = snapshot(&alice, &a);
    let (done, pending) = (
        format!("{}:{}", a.thread, a.run),
        format!("{}:{}", a.thread, a.pending),
    );
    let message = |task: &str| json!({"messageId": "m", "role": "ROLE_USER", "taskId": task, "parts": [{"text": "bob's"}]});
    for (method, params) in [
        ("GetTask", json!({"id": done})),
        ("tasks/get", json!({"id": pending})),
        ("CancelTask", json!({"id": pending})),
        ("tasks/cancel", json!({"id": pending})),
        ("SendMessage", json!({"message": message(&pending)})),
        ("message/send", json!({"message": message(&done)})),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer = bob.ok("POST", "/a2a/echo", Some(body));
        assert_eq!(answer["error"]["code"], -32001, "{method}: {answer}");
        assert!(!answer.to_string().contains("alice's secret"), "{answer}");
    }
    // Alice reads her own task.
    let mine = alice.ok(
        "POST",
        "/a2a/echo",
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": done}})),
    );
    assert_eq!(
        mine["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{mine}"
    );
    assert_eq!(
        snapshot(&alice, &a),
        before,
        "bob changed nothing of alice's"
    );
}

/// `GET /threads/{own}/runs/{another's run}/join` and `.../stream` from the first
/// frame answered with that run's output while its topic was retained.
#[test]
fn a_run_not_on_the_paths_thread_is_unknown_to_join_and_stream() {
    let (instance, _config) = dev("join", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let a = make_alices(&alice);
    let own = id(&bob.ok("POST", "/threads", Some(json!({}))), "thread_id");
    let joined = bob.ok("GET", &format!("/threads/{own}/runs/{}/join", a.run), None);
    assert!(joined.get("__error__").is_some(), "{joined}");
    assert!(!joined.to_string().contains("alice's secret"), "{joined}");
    let stream = bob.send_with(
        "GET",
        &format!("/threads/{own}/runs/{}/stream", a.run),
        &[("last-event-id", "-1")],
        None,
    );
    assert!(
        !format!("{stream:?}").contains("alice's secret"),
        "{stream:?}"
    );
}

/// `POST /threads` naming another owner's thread with `if_exists: do_nothing` and
/// supersteps answered 409 after the supersteps were already applied to it.
#[test]
fn supersteps_on_another_owners_thread_are_refused_before_they_apply() {
    let (instance, _config) = dev("supersteps", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let thread = id(
        &alice.ok(
            "POST",
            "/threads",
            Some(json!({"metadata": {"graph_id": "echo"}})),
        ),
        "thread_id",
    );
    let before = alice.ok("GET", &format!("/threads/{thread}/state"), None);
    let planted = json!({"messages": [{"type": "ai", "content": "planted by bob"}]});
    let reply = bob.send(
        "POST",
        "/threads",
        Some(json!({
            "thread_id": thread,
            "if_exists": "do_nothing",
            "supersteps": [{"updates": [{"values": planted, "as_node": "echo"}]}],
        })),
    );
    assert_eq!(reply.status, 409, "{}", reply.body);
    let after = alice.ok("GET", &format!("/threads/{thread}/state"), None);
    assert_eq!(after["values"], before["values"]);
    assert!(!after.to_string().contains("planted by bob"));
}

/// `PATCH /runs/crons/{id}` could set an assistant the caller cannot read, and the
/// cron then ran with that assistant's config.
#[test]
fn a_cron_patch_cannot_name_an_assistant_the_caller_cannot_read() {
    let (instance, _config) = dev("cron-patch", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let a = make_alices(&alice);
    let cron = id(
        &bob.ok("POST", "/runs/crons", Some(cron_body("echo"))),
        "cron_id",
    );
    let reply = bob.send(
        "PATCH",
        &format!("/runs/crons/{cron}"),
        Some(json!({"assistant_id": a.assistant})),
    );
    assert_eq!(reply.status, 404, "{}", reply.body);
    let kept = bob.ok("GET", &format!("/runs/crons/{cron}"), None);
    assert_ne!(kept["payload"]["assistant_id"], json!(a.assistant));
}

/// Protocol v2's `input.respond` took the assistant from the thread's client-writable
/// `metadata.assistant_id`, and started a run of another owner's assistant.
#[test]
fn input_respond_never_runs_an_assistant_the_caller_cannot_read() {
    let (instance, _config) = dev("respond", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let alices = id(
        &alice.ok(
            "POST",
            "/assistants",
            Some(json!({"graph_id": "approval", "name": "alice's"})),
        ),
        "assistant_id",
    );
    let thread = id(&bob.ok("POST", "/threads", Some(json!({}))), "thread_id");
    bob.ok(
        "POST",
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "approval", "input": {"topic": "launch"}})),
    );
    let state = bob.ok("GET", &format!("/threads/{thread}/state"), None);
    let interrupt = state["interrupts"][0]["id"]
        .as_str()
        .expect("the run paused")
        .to_owned();
    bob.ok(
        "PATCH",
        &format!("/threads/{thread}"),
        Some(json!({"metadata": {"assistant_id": alices}})),
    );
    let answer = bob.ok(
        "POST",
        &format!("/threads/{thread}/commands"),
        Some(json!({"id": 1, "method": "input.respond",
            "params": {"interrupt_id": interrupt, "response": true}})),
    );
    let runs = bob.ok("GET", &format!("/threads/{thread}/runs"), None);
    for run in runs.as_array().expect("runs") {
        assert_ne!(run["assistant_id"], json!(alices), "{answer} {runs}");
    }
}

/// An assistant created with `metadata.created_by: "system"` was treated as a system
/// assistant: every tenant saw and ran it.
#[test]
fn the_system_mark_is_the_servers_to_write() {
    let (instance, _config) = dev("system-mark", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let forged = bob.send(
        "POST",
        "/assistants",
        Some(json!({"graph_id": "echo", "name": "fake", "metadata": {"created_by": "system"}})),
    );
    assert_eq!(forged.status, 422, "{}", forged.body);
    let own = id(
        &bob.ok("POST", "/assistants", Some(json!({"graph_id": "echo"}))),
        "assistant_id",
    );
    let patched = bob.send(
        "PATCH",
        &format!("/assistants/{own}"),
        Some(json!({"metadata": {"created_by": "system"}})),
    );
    assert_eq!(patched.status, 422, "{}", patched.body);
    let seen = alice.ok("POST", "/assistants/search", Some(json!({})));
    assert!(!seen.to_string().contains(&own), "{seen}");
    let system = seen
        .as_array()
        .expect("assistants")
        .iter()
        .filter(|assistant| assistant["metadata"]["created_by"] == json!("system"))
        .count();
    assert!(system > 0, "the graphs' system assistants stay everyone's");
}

/// Store scoping by identity text: an identity `*` was a wildcard seeing every
/// tenant's items, and an identity equal to a root graphs write (`memories`) saw
/// those items.
#[test]
fn a_tenants_store_is_its_own_whatever_its_identity_spells() {
    // Shared identities: the identities are the bare key names `*` and `memories`.
    let (instance, _config) = dev("store", json!({"shared_identities": true}));
    let tenant = |key| Tenant {
        instance: &instance,
        key,
    };
    let (alice, star, memories) = (tenant(ALICE), tenant(STAR), tenant(MEMORIES));
    alice.ok(
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["notes"], "key": "x", "value": {"v": "alice"}})),
    );
    // The example `memory` graph writes under `memories`, outside every tenant.
    let thread = id(&alice.ok("POST", "/threads", Some(json!({}))), "thread_id");
    alice.ok(
        "POST",
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "memory", "input": {"user": "u1", "key": "k", "text": "graph memory"}})),
    );
    star.ok(
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["mine"], "key": "y", "value": {"v": "star"}})),
    );
    for (who, visible) in [(&star, "star"), (&memories, "")] {
        let found = who.ok("POST", "/store/items/search", Some(json!({})));
        let values: Vec<&Value> = found["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| &item["value"]["v"])
            .collect();
        let expected: Vec<Value> = if visible.is_empty() {
            Vec::new()
        } else {
            vec![json!(visible)]
        };
        assert_eq!(
            values.into_iter().cloned().collect::<Vec<_>>(),
            expected,
            "{found}"
        );
        let namespaces = who.ok("POST", "/store/namespaces", Some(json!({})));
        assert!(!namespaces.to_string().contains("notes"), "{namespaces}");
        assert!(!namespaces.to_string().contains("@tenant"), "{namespaces}");
    }
    let reserved = alice.send(
        "PUT",
        "/store/items",
        Some(
            json!({"namespace": ["@tenant", "star", "mine"], "key": "y", "value": {"v": "forged"}}),
        ),
    );
    assert_eq!(reserved.status, 422, "{}", reserved.body);
}

/// A receiver that answers 200 to every POST, for runs that carry a webhook.
fn receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            answer(stream);
        }
    });
    format!("http://{address}/hook")
}

fn answer(mut stream: TcpStream) {
    let mut buffer = [0_u8; 8192];
    let _ = stream.read(&mut buffer);
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// Deliveries outlive their thread; after it was deleted, another owner could make a
/// thread with the same id and list and replay its deliveries.
#[test]
fn deliveries_stay_their_owners_when_a_thread_id_is_taken_again() {
    let (instance, _config) = dev("deliveries", json!({}));
    let (alice, bob) = alice_and_bob(&instance);
    let hook = receiver();
    let thread = id(&alice.ok("POST", "/threads", Some(json!({}))), "thread_id");
    alice.ok(
        "POST",
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "echo", "input": {}, "webhook": hook})),
    );
    let run = id(
        &alice.ok("GET", &format!("/threads/{thread}/runs"), None)[0],
        "run_id",
    );
    let deliveries = format!("/threads/{thread}/runs/{run}/deliveries");
    let listed = alice.ok("GET", &deliveries, None);
    let delivery = id(&listed[0], "delivery_id");
    alice.ok("DELETE", &format!("/threads/{thread}"), None);
    bob.ok("POST", "/threads", Some(json!({"thread_id": thread})));
    let seen = bob.ok("GET", &deliveries, None);
    assert_eq!(seen, json!([]), "bob lists none of alice's deliveries");
    let replay = bob.send("POST", &format!("{deliveries}/{delivery}/replay"), None);
    assert_eq!(replay.status, 404, "{}", replay.body);
}

/// The Idempotency-Key rejoin built its request without the caller, so the join's
/// guard ran unscoped: a principal that may start runs but not read them read one.
#[test]
fn an_idempotent_replay_is_authorized_as_its_caller() {
    let (instance, _config) = dev(
        "idempotency",
        json!({"permissions": {"threads:read": "threads:read"}}),
    );
    let bob = Tenant {
        instance: &instance,
        key: BOB,
    };
    let body = json!({"assistant_id": "echo", "input": {}});
    let headers = [("idempotency-key", "stream-once")];
    let first = bob.send_with("POST", "/runs/stream", &headers, Some(body.clone()));
    assert_eq!(first.status, 200);
    let replayed = bob.send_with("POST", "/runs/stream", &headers, Some(body));
    assert_eq!(
        replayed.status, 403,
        "the rejoin is a read, which bob may not do: {replayed:?}"
    );
}
