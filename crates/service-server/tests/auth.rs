//! Owner scoping with API keys, on the binary, in memory and on PostgreSQL: two
//! principals, and neither can read, list, count, search, stream, join, cancel, copy,
//! patch, delete or see in history anything of the other's; the other's ids answer
//! 404 and totals leave them out.

mod support;

use serde_json::{Value, json};
use support::{ConfigFile, Database, Instance, Reply, call, spawn};

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef00";

/// A config file giving alice and bob keys and owner scoping; bob's comes from the
/// environment.
fn config(label: &str) -> ConfigFile {
    let config = json!({
        "auth": {
            "api_keys": {"alice": ALICE, "bob": {"env": "TEST_BOB_KEY"}},
            "scoping": "owner",
        }
    });
    ConfigFile::write(&format!("auth-{label}"), &config)
}

struct Client<'a> {
    instance: &'a Instance,
    key: &'a str,
}

impl Client<'_> {
    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        call(
            self.instance,
            method,
            path,
            &[("x-api-key", self.key)],
            body,
        )
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

    fn not_found(&self, method: &str, path: &str, body: Option<Value>) {
        let reply = self.send(method, path, body);
        assert_eq!(reply.status, 404, "{method} {path}: {}", reply.body);
    }
}

fn id(value: &Value, field: &str) -> String {
    value[field].as_str().expect(field).to_owned()
}

/// Everything alice made, and the checks that bob reaches none of it.
fn isolation(instance: &Instance) {
    let alice = Client {
        instance,
        key: ALICE,
    };
    let bob = Client { instance, key: BOB };
    let anonymous = call(instance, "POST", "/threads/search", &[], Some(json!({})));
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.header("www-authenticate").is_some());

    // Alice's things.
    let thread = alice.ok("POST", "/threads", Some(json!({"metadata": {"k": 1}})));
    let thread_id = id(&thread, "thread_id");
    assert_eq!(thread["metadata"]["owner"], json!("key:alice"));
    let waited = alice.ok(
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        Some(json!({"assistant_id": "echo", "input": {"messages": [{"role": "user", "content": "hi"}]}})),
    );
    assert!(waited.is_object(), "{waited}");
    let runs = alice.ok("GET", &format!("/threads/{thread_id}/runs"), None);
    let run_id = id(&runs[0], "run_id");
    assert_eq!(runs[0]["metadata"]["owner"], json!("key:alice"));
    let delayed = alice.ok(
        "POST",
        "/runs",
        Some(json!({"assistant_id": "echo", "input": {}, "after_seconds": 3600})),
    );
    let stateless_run = id(&delayed, "run_id");
    let assistant = alice.ok(
        "POST",
        "/assistants",
        Some(json!({"graph_id": "echo", "name": "alice's"})),
    );
    let assistant_id = id(&assistant, "assistant_id");
    let cron = alice.ok(
        "POST",
        "/runs/crons",
        Some(json!({"assistant_id": "echo", "schedule": "0 0 1 1 *", "input": {}})),
    );
    let cron_id = id(&cron, "cron_id");
    alice.ok(
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["notes"], "key": "x", "value": {"v": "alice"}})),
    );

    // Threads, their state, history, streams and runs: bob's answer is 404.
    let t = format!("/threads/{thread_id}");
    for (method, path, body) in [
        ("GET", t.clone(), None),
        ("PATCH", t.clone(), Some(json!({"metadata": {"k": 2}}))),
        ("POST", format!("{t}/copy"), None),
        ("GET", format!("{t}/state"), None),
        ("POST", format!("{t}/state"), Some(json!({"values": {}}))),
        ("PATCH", format!("{t}/state"), Some(json!({"metadata": {}}))),
        ("GET", format!("{t}/history"), None),
        ("POST", format!("{t}/history"), Some(json!({}))),
        ("GET", format!("{t}/stream"), None),
        ("GET", format!("{t}/runs"), None),
        (
            "POST",
            format!("{t}/runs"),
            Some(json!({"assistant_id": "echo", "input": {}})),
        ),
        (
            "POST",
            format!("{t}/runs/wait"),
            Some(json!({"assistant_id": "echo", "input": {}, "if_not_exists": "create"})),
        ),
        ("GET", format!("{t}/runs/{run_id}"), None),
        ("GET", format!("{t}/runs/{run_id}/join"), None),
        ("GET", format!("{t}/runs/{run_id}/stream"), None),
        ("POST", format!("{t}/runs/{run_id}/cancel"), None),
        ("GET", format!("{t}/runs/{run_id}/deliveries"), None),
        ("DELETE", format!("{t}/runs/{run_id}"), None),
        ("GET", format!("/runs/{stateless_run}/stream"), None),
        (
            "POST",
            "/runs/cancel".to_owned(),
            Some(json!({"thread_id": thread_id, "run_ids": [run_id]})),
        ),
        (
            "POST",
            "/threads/prune".to_owned(),
            Some(json!({"thread_ids": [thread_id]})),
        ),
        (
            "POST",
            format!("{t}/runs/crons"),
            Some(json!({"assistant_id": "echo", "schedule": "0 0 1 1 *"})),
        ),
        ("DELETE", t.clone(), None),
    ] {
        bob.not_found(method, &path, body);
    }
    // Bob's searches and counts leave alice's threads out.
    assert_eq!(
        bob.ok("POST", "/threads/search", Some(json!({}))),
        json!([])
    );
    assert_eq!(bob.ok("POST", "/threads/count", Some(json!({}))), json!(0));
    let filtered = json!({"metadata": {"k": 1}});
    assert_eq!(
        bob.ok("POST", "/threads/count", Some(filtered.clone())),
        json!(0)
    );
    assert_eq!(alice.ok("POST", "/threads/count", Some(filtered)), json!(1));
    // A filter naming alice as owner collides with bob's own scope: nothing.
    let as_alice = json!({"metadata": {"owner": "key:alice"}});
    assert_eq!(bob.ok("POST", "/threads/count", Some(as_alice)), json!(0));
    // Bob's cancel-all does not reach alice's waiting run; alice's does.
    bob.not_found("POST", "/runs/cancel", Some(json!({"status": "pending"})));
    let waiting = format!(
        "/threads/{}/runs/{stateless_run}",
        id(&delayed, "thread_id")
    );
    assert_eq!(alice.ok("GET", &waiting, None)["status"], json!("pending"));
    // A thread id of alice's cannot be taken over by creating it.
    let taken = bob.send(
        "POST",
        "/threads",
        Some(json!({"thread_id": thread_id, "if_exists": "do_nothing"})),
    );
    assert_eq!(taken.status, 409, "{}", taken.body);

    // Assistants: bob sees the system ones, not alice's.
    let a = format!("/assistants/{assistant_id}");
    for (method, path, body) in [
        ("GET", a.clone(), None),
        ("PATCH", a.clone(), Some(json!({"name": "bob's now"}))),
        ("POST", format!("{a}/versions"), Some(json!({}))),
        ("POST", format!("{a}/latest"), Some(json!({"version": 1}))),
        ("GET", format!("{a}/graph"), None),
        ("GET", format!("{a}/schemas"), None),
        ("GET", format!("{a}/subgraphs"), None),
        (
            "POST",
            "/runs/wait".to_owned(),
            Some(json!({"assistant_id": assistant_id, "input": {}})),
        ),
        ("DELETE", a.clone(), None),
    ] {
        bob.not_found(method, &path, body);
    }
    let search = bob.send("POST", "/assistants/search", Some(json!({"limit": 100})));
    let names: Vec<&str> = search
        .body
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|a| a["metadata"]["created_by"].as_str())
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|by| *by == "system"),
        "{}",
        search.body
    );
    let total: usize = search
        .header("x-pagination-total")
        .expect("total")
        .parse()
        .expect("a number");
    assert_eq!(total, names.len(), "the total leaves alice's out");
    let bobs = bob.ok("POST", "/assistants/count", Some(json!({})));
    let alices = alice.ok("POST", "/assistants/count", Some(json!({})));
    assert_eq!(alices, json!(bobs.as_u64().expect("a count") + 1));
    bob.ok("GET", "/assistants/echo", None);
    let system = bob.send("PATCH", "/assistants/echo", Some(json!({"name": "mine"})));
    assert_eq!(
        system.status, 404,
        "system assistants are read-only to principals"
    );

    // Crons.
    let c = format!("/runs/crons/{cron_id}");
    bob.not_found("GET", &c, None);
    bob.not_found("PATCH", &c, Some(json!({"enabled": false})));
    bob.not_found("DELETE", &c, None);
    let crons = bob.send("POST", "/runs/crons/search", Some(json!({})));
    assert_eq!(crons.body, json!([]));
    assert_eq!(crons.header("x-pagination-total"), Some("0"));
    assert_eq!(
        bob.ok("POST", "/runs/crons/count", Some(json!({}))),
        json!(0)
    );
    assert_eq!(
        alice.ok("POST", "/runs/crons/count", Some(json!({}))),
        json!(1)
    );

    // The store: bob's namespace of the same name is his own.
    let item = "/store/items?namespace=notes&key=x";
    assert_eq!(bob.ok("GET", item, None), Value::Null);
    let found = bob.ok(
        "POST",
        "/store/items/search",
        Some(json!({"namespace_prefix": []})),
    );
    assert_eq!(found, json!({"items": []}));
    let spaces = bob.ok("POST", "/store/namespaces", Some(json!({})));
    assert_eq!(spaces, json!({"namespaces": []}));
    bob.ok(
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["notes"], "key": "x", "value": {"v": "bob"}})),
    );
    let mine = alice.ok("GET", item, None);
    assert_eq!(mine["value"], json!({"v": "alice"}));
    assert_eq!(
        mine["namespace"],
        json!(["notes"]),
        "the tenant prefix is not shown"
    );
    let spaces = alice.ok("POST", "/store/namespaces", Some(json!({})));
    assert_eq!(spaces, json!({"namespaces": [["notes"]]}));

    // An Idempotency-Key is the principal's own.
    let key = [("idempotency-key", "same-key")];
    let first = call(
        instance,
        "POST",
        "/threads",
        &[key[0], ("x-api-key", ALICE)],
        Some(json!({})),
    );
    let other = call(
        instance,
        "POST",
        "/threads",
        &[key[0], ("x-api-key", BOB)],
        Some(json!({})),
    );
    let again = call(
        instance,
        "POST",
        "/threads",
        &[key[0], ("x-api-key", ALICE)],
        Some(json!({})),
    );
    assert_ne!(first.body["thread_id"], other.body["thread_id"]);
    assert_eq!(first.body["thread_id"], again.body["thread_id"]);
    assert_eq!(other.body["metadata"]["owner"], json!("key:bob"));

    // Alice's things are all still there, and her patch cannot hand them over.
    let patched = alice.ok("PATCH", &t, Some(json!({"metadata": {"owner": "key:bob"}})));
    assert_eq!(patched["metadata"]["owner"], json!("key:alice"));
    alice.ok("GET", &format!("{t}/history"), None);
    alice.ok("GET", &a, None);
    alice.ok("GET", &c, None);
    alice.ok("POST", "/runs/cancel", Some(json!({"status": "pending"})));
}

#[test]
fn principals_are_isolated_in_memory() {
    let config = config("memory");
    let instance = spawn(
        &["dev", "--port", "0", "--config", &config.path()],
        &[("TEST_BOB_KEY", BOB)],
    );
    isolation(&instance);
}

#[tokio::test]
async fn principals_are_isolated_on_postgres() {
    let database = Database::create("auth").await;
    let config = config("postgres");
    let url = database.url();
    let instance = spawn(
        &["start", "--port", "0", "--config", &config.path()],
        &[("TEST_BOB_KEY", BOB), ("DATABASE_URL", &url)],
    );
    tokio::task::spawn_blocking(move || isolation(&instance))
        .await
        .expect("isolation holds");
    database.drop().await;
}
