//! Two server instances on one PostgreSQL database: a run created on either is
//! executed exactly once by some instance, a thread's runs never overlap, and a
//! cancel through one instance reaches a run executing on the other at once.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use service_coordinator_postgres::{PgCoordinator, PgCoordinatorOptions};
use service_engine::bus::MemoryBus;
use service_engine::coordination::{CoordinationTuning, Coordinator};
use service_engine::{Engine, EngineConfig, EngineParts, RunTarget};
use service_store::{Clock, SystemClock};
use service_store_postgres::{PgOptions, PostgresStore};
use service_types::{CancelAction, RunCreate, RunStatus, ThreadCreate};
use support::{Database, Instance, request, start};

#[tokio::test(flavor = "multi_thread")]
async fn runs_created_on_two_instances_execute_once_each_and_never_overlap_on_a_thread() {
    let database = Database::create("overlap").await;
    let first = start(&database.url());
    let second = start(&database.url());
    let thread = request(&first, "POST", "/threads", Some(json!({})))["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let runs = 10;
    for i in 0..runs {
        let instance = if i % 2 == 0 { &first } else { &second };
        let body = json!({
            "assistant_id": "echo",
            "input": {"messages": [{"type": "human", "content": format!("m{i}")}]},
            "multitask_strategy": "enqueue",
        });
        request(
            instance,
            "POST",
            &format!("/threads/{thread}/runs"),
            Some(body),
        );
    }

    let started = Instant::now();
    loop {
        let listed = request(
            &second,
            "GET",
            &format!("/threads/{thread}/runs?limit=100"),
            None,
        );
        let statuses: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses.len(), runs);
        assert!(
            statuses
                .iter()
                .all(|status| ["pending", "running", "success"].contains(status)),
            "{statuses:?}"
        );
        if statuses.iter().all(|status| *status == "success") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "runs did not finish: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Each echo run appends its input and a reply to what the previous run left: had
    // two runs of the thread overlapped, one would have lost the other's messages.
    let state = request(&first, "GET", &format!("/threads/{thread}/state"), None);
    let messages = state["values"]["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        2 * runs,
        "every run executed exactly once, one at a time"
    );
    for pair in messages.chunks(2) {
        let asked = pair[0]["content"].as_str().unwrap();
        assert_eq!(pair[1]["content"], format!("echo: {asked}"));
    }
    drop((first, second));
    database.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_queued_on_an_instance_that_stops_is_executed_by_another() {
    let database = Database::create("handover").await;
    let creator = start(&database.url());
    let other = start(&database.url());
    let thread = request(&creator, "POST", "/threads", Some(json!({})))["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Not due for a moment: the creator is gone before it could start it.
    let body = json!({
        "assistant_id": "echo",
        "input": {"messages": [{"type": "human", "content": "handover"}]},
        "after_seconds": 1,
    });
    let run = request(
        &creator,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(body),
    );
    drop(creator);

    let started = Instant::now();
    let run_path = format!("/threads/{thread}/runs/{}", run["run_id"].as_str().unwrap());
    loop {
        let status = request(&other, "GET", &run_path, None)["status"]
            .as_str()
            .unwrap()
            .to_owned();
        if status == "success" {
            break;
        }
        assert!(
            ["pending", "running"].contains(&status.as_str()),
            "{status}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the other instance never ran it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let state = request(&other, "GET", &format!("/threads/{thread}/state"), None);
    assert_eq!(state["values"]["messages"][1]["content"], "echo: handover");
    drop(other);
    database.drop().await;
}

/// The status of a GET.
fn status_of(instance: &Instance, path: &str) -> String {
    let mut stream = TcpStream::connect(&instance.address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.get(9..12).unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn check_db_asks_the_database_and_answers_503_once_it_is_gone() {
    let database = Database::create("health").await;
    let instance = start(&database.url());
    assert_eq!(status_of(&instance, "/ok?check_db=1"), "200");
    database.drop().await;
    assert_eq!(status_of(&instance, "/ok?check_db=1"), "503");
    assert_eq!(status_of(&instance, "/ok"), "200");
}

/// An engine on `url` as `service-server start` builds one, with `tuning`; its
/// coordinator is returned too, to tell when it listens.
async fn engine_on(url: &str, tuning: CoordinationTuning) -> (Engine, Arc<PgCoordinator>) {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let backend = PostgresStore::connect(PgOptions::new(url), clock.clone())
        .await
        .expect("the database");
    let pools = backend.pools().clone();
    let listen = url.parse().expect("a database URL");
    let mut options = PgCoordinatorOptions::new(listen, pools.store, pools.claim);
    options.tuning = tuning;
    let coordinator = Arc::new(PgCoordinator::start(options).expect("coordinator"));
    let config = EngineConfig::default();
    let engine = Engine::with_coordinator(
        EngineParts {
            store: backend.store(),
            graphs: Box::new(service_example_graphs::registry),
            checkpointer: backend.checkpointer(),
            bus: MemoryBus::new(config.bus),
            clock,
            webhooks: None,
            config,
        },
        coordinator.clone(),
    )
    .expect("example graphs");
    engine
        .system()
        .ensure_system_assistants()
        .await
        .expect("assistants");
    (engine, coordinator)
}

/// Two engines in this process on one database, as two instances are: a run
/// executing on one stops once the other records its cancel, although the executing
/// instance would look for the cancel in the store only after an hour. Only the
/// announcement over PostgreSQL can have stopped it.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_cancelled_through_another_instance_stops_without_waiting_for_the_check_interval() {
    let database = Database::create("cancel").await;
    let tuning = CoordinationTuning {
        check_interval: Duration::from_secs(3600),
        ..CoordinationTuning::default()
    };
    let (executing, listening) = engine_on(&database.url(), tuning).await;
    let (requesting, announcing) = engine_on(&database.url(), tuning).await;
    // Only this one executes runs.
    executing.start();

    // The executing instance listens once an announcement reaches it.
    let mut cancels = listening.announced_cancels();
    let started = Instant::now();
    loop {
        let probe = uuid::Uuid::new_v4();
        announcing.announce_cancel(probe).await;
        let arrived = cancels.by_ref().any(|run| std::future::ready(run == probe));
        if tokio::time::timeout(Duration::from_millis(200), arrived)
            .await
            .unwrap_or(false)
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never listened"
        );
    }

    let thread = executing
        .system()
        .view()
        .threads()
        .create(ThreadCreate::default())
        .await
        .unwrap()
        .thread_id;
    let body = RunCreate {
        assistant_id: "slow".into(),
        input: Some(json!({"delay_ms": 60_000})),
        ..RunCreate::default()
    };
    let run = executing
        .system()
        .view()
        .runs()
        .create(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    let status = || async {
        executing
            .system()
            .view()
            .runs()
            .get(thread, run.run_id)
            .await
            .unwrap()
            .status
    };
    let started = Instant::now();
    while status().await != RunStatus::Running {
        assert!(started.elapsed() < Duration::from_secs(10), "never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    requesting
        .system()
        .view()
        .runs()
        .cancel(thread, run.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    let started = Instant::now();
    while !status().await.is_terminal() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the run did not stop"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status().await, RunStatus::Cancelled);
    executing.shutdown().await;
    requesting.shutdown().await;
    database.drop().await;
}
