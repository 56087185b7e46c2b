//! The run queue under concurrency: N claimers over M queued runs claim each run
//! exactly once, and never start two runs of one thread.

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use service_store::{ManualClock, NewRun, NewThread, Store};
use service_types::{IfExists, RunStatus, ThreadStatus, Timestamp};
use tokio_postgres::NoTls;
use uuid::Uuid;

const CLAIMERS: usize = 8;
const THREADS: usize = 12;
const RUNS_PER_THREAD: usize = 4;

/// A new thread's id.
async fn thread(store: &Store) -> Uuid {
    let thread_id = Uuid::new_v4();
    store
        .threads()
        .create(
            NewThread {
                thread_id,
                metadata: Default::default(),
                status: ThreadStatus::Idle,
                ttl: None,
            },
            IfExists::Raise,
        )
        .await
        .unwrap();
    thread_id
}

/// A new pending run's id on `thread_id`, due at `now`.
async fn run_on(store: &Store, thread_id: Uuid, now: Timestamp) -> Uuid {
    store
        .runs()
        .create(
            NewRun {
                run_id: Uuid::now_v7(),
                thread_id,
                assistant_id: Uuid::nil(),
                metadata: Default::default(),
                multitask_strategy: None,
                kwargs: json!({}),
                available_at: now,
                assistant_as_read: None,
                claimed: false,
                traceparent: None,
            },
            Default::default(),
        )
        .await
        .unwrap()
        .run_id
}

async fn queue(store: &Store, now: Timestamp) -> HashSet<Uuid> {
    let mut queued = HashSet::new();
    for _ in 0..THREADS {
        let thread_id = thread(store).await;
        for _ in 0..RUNS_PER_THREAD {
            queued.insert(run_on(store, thread_id, now).await);
        }
    }
    queued
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_claim_each_queued_run_exactly_once() {
    let clock = Arc::new(ManualClock::new(
        Timestamp::parse("2025-01-15T12:00:00Z").unwrap(),
    ));
    let backend = support::fresh_store(clock.clone(), 1000).await;
    let store = backend.store();
    let now = service_store::Clock::now(clock.as_ref());
    let queued = queue(&store, now).await;

    let mut claimed = Vec::new();
    // Rounds: every claimer claims until the queue looks empty, then the running
    // runs settle and the next round may start the threads' next runs.
    loop {
        let mut workers = Vec::new();
        for _ in 0..CLAIMERS {
            let store = store.clone();
            workers.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                while let Some(claimed) = store.runs().claim_next(now).await.unwrap() {
                    mine.push(claimed.run);
                }
                mine
            }));
        }
        let mut round = Vec::new();
        for worker in workers {
            round.extend(worker.await.unwrap());
        }
        if round.is_empty() {
            break;
        }
        // Within a round, at most one run per thread started.
        let threads: HashSet<Uuid> = round.iter().map(|run| run.thread_id).collect();
        assert_eq!(threads.len(), round.len(), "two runs of one thread started");
        for run in &round {
            store
                .runs()
                .settle(
                    run.run_id,
                    service_store::Settlement {
                        status: service_types::RunStatus::Success,
                        error: None,
                        interrupted: false,
                        webhook: None,
                    },
                )
                .await
                .unwrap();
        }
        claimed.extend(round.into_iter().map(|run| run.run_id));
    }
    let unique: HashSet<Uuid> = claimed.iter().copied().collect();
    assert_eq!(unique.len(), claimed.len(), "a run was claimed twice");
    assert_eq!(unique, queued, "every queued run was claimed");
}

/// A settle that claims the next run in the same statement loses that claim, not the
/// settle, when another claimer starts a run of the next run's thread after the
/// statement's snapshot: the unique index refuses the claim, and the run settles alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_whose_next_claim_loses_a_race_still_settles() {
    let clock = Arc::new(ManualClock::new(
        Timestamp::parse("2025-01-15T12:00:00Z").unwrap(),
    ));
    let backend = support::fresh_store(clock.clone(), 1000).await;
    let store = backend.store();
    let now = service_store::Clock::now(clock.as_ref());
    let settling = run_on(&store, thread(&store).await, now).await;
    let claimed = store.runs().claim_next(now).await.unwrap().unwrap();
    assert_eq!(claimed.run.run_id, settling);
    let contested = thread(&store).await;
    let first = run_on(&store, contested, now).await;
    let next = run_on(&store, contested, now).await;

    // Another claimer starts the contested thread's first run and has not committed.
    let schema = backend.options().schema.clone().unwrap();
    let (other, connection) = tokio_postgres::connect(&support::database_url(), NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    other
        .batch_execute(&format!(
            "SET search_path = {schema}; BEGIN;
             UPDATE runs SET status = 'running', started = true WHERE run_id = '{first}';"
        ))
        .await
        .unwrap();
    let settle = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .runs()
                .settle_and_mirror(
                    settling,
                    service_store::Settlement {
                        status: RunStatus::Success,
                        error: None,
                        interrupted: false,
                        webhook: None,
                    },
                    service_store::ThreadMirror {
                        status: ThreadStatus::Idle,
                        values: None,
                        interrupts: Default::default(),
                        error: None,
                    },
                    Some(service_store::ClaimNext { run_id: next, now }),
                )
                .await
        }
    });
    // The settle's claim now waits on the other claimer's index entry.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    other.batch_execute("COMMIT").await.unwrap();

    let outcome = settle.await.unwrap().expect("the settle lands");
    assert!(outcome.settled.changed);
    assert_eq!(outcome.settled.run.status, RunStatus::Success);
    assert_eq!(outcome.next, None, "the claim lost the race");
    let status = |run_id| {
        let store = store.clone();
        async move { store.runs().get(run_id).await.unwrap().unwrap().status }
    };
    assert_eq!(status(settling).await, RunStatus::Success);
    assert_eq!(status(first).await, RunStatus::Running);
    assert_eq!(status(next).await, RunStatus::Pending);
}
