//! The run queue under concurrency: N claimers over M queued runs claim each run
//! exactly once, and never start two runs of one thread.

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use service_store::{ManualClock, NewRun, NewThread, Store};
use service_types::{IfExists, ThreadStatus, Timestamp};
use uuid::Uuid;

const CLAIMERS: usize = 8;
const THREADS: usize = 12;
const RUNS_PER_THREAD: usize = 4;

async fn queue(store: &Store, now: Timestamp) -> HashSet<Uuid> {
    let mut queued = HashSet::new();
    for _ in 0..THREADS {
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
        for _ in 0..RUNS_PER_THREAD {
            let run = store
                .runs()
                .create(NewRun {
                    run_id: Uuid::now_v7(),
                    thread_id,
                    assistant_id: Uuid::nil(),
                    metadata: Default::default(),
                    multitask_strategy: None,
                    kwargs: json!({}),
                    available_at: now,
                    assistant_as_read: None,
                })
                .await
                .unwrap();
            queued.insert(run.run_id);
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
