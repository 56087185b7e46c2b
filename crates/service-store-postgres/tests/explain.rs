//! The EXPLAIN check: the hot statements are served by indexes.
//!
//! Each plan is taken on the exact SQL the driver sends (`plans::explain_all`):
//! claim next run, thread search by metadata, latest run of a thread, checkpoint
//! history page, store search by namespace, active runs of a thread, running runs
//! across threads (what recovery reads), store search by an equality filter over a
//! namespace of many items (bench S5's shape: the fields' index walked newest first,
//! not the value's GIN index, which finds every item with the value and sorts them,
//! nor a scan of the namespace), a settle with the next run's claim (both claims'
//! busy checks must probe the one-running-per-thread index by the thread) and the
//! earliest delayed run. Each is planned twice: with the sample parameters'
//! values, and generically (`plan_cache_mode = force_generic_plan`), the plan
//! PostgreSQL may keep for a prepared statement after its first executions.
//!
//! - `hot_statements_use_indexes_on_populated_tables`: tables filled with a
//!   realistic spread (10k threads, 50k runs of which 2% pending and 10% of threads
//!   busy, 1k threads x 50 checkpoints with writes on every fifth, 20k items under
//!   1000 users), ANALYZEd; the planner's own choice must be the named index and
//!   no statement may scan a table.
//! - `hot_statements_can_use_indexes`: on empty tables a sequential scan is always
//!   cheapest, so the session sets `enable_seqscan = off`; this proves each
//!   statement's predicates and order match an index (no Sort where the index
//!   gives the order).
//! - `claiming_from_a_backlog_reads_the_queue_in_order`: statistics that count
//!   many pending runs (a backlog); the claim must still read the queue's index, not
//!   scan the table for a pending run.
//! - `a_settle_reads_its_runs_by_id_whatever_the_statistics_say`: statistics taken
//!   before a backlog was queued; the settle must still read its run and the next
//!   one by the primary key, not walk the backlog in a partial index.

mod support;

use std::sync::Arc;

use service_store::{Clock, SystemClock};
use service_store_postgres::plans::{self, Planning};

/// Each planning's plans of the checked statements, on a fresh schema after `setup`
/// ran in the planning session.
async fn plans_after(setup: &str) -> Vec<(Planning, Vec<(&'static str, String)>)> {
    let backend = support::fresh_store(Arc::new(SystemClock), 1000).await;
    let client = backend.pools().store.get().await.expect("connection");
    client.batch_execute(setup).await.unwrap();
    let mut planned = Vec::new();
    for planning in [Planning::Custom, Planning::Generic] {
        let plans = plans::explain_all(&client, planning, SystemClock.now())
            .await
            .unwrap();
        planned.push((planning, plans));
    }
    planned
}

/// The plan of the statement `name`, printed.
fn plan_named<'a>(plans: &'a [(&str, String)], name: &str, planning: Planning) -> &'a str {
    let (_, plan) = plans.iter().find(|(named, _)| *named == name).unwrap();
    println!("-- {name} ({planning:?})\n{plan}\n");
    plan
}

#[tokio::test]
async fn hot_statements_can_use_indexes() {
    for (planning, plans) in plans_after("SET enable_seqscan = off").await {
        check_indexed(&plans, planning);
    }
}

/// The statements the driver builds per call, now prepared once per shape, so their
/// generic plan may serve them: PostgreSQL switches a prepared statement to it when
/// its estimated cost is not much above the custom plans' average. The static
/// statements have always run prepared and are checked with their values, as before
/// (the history page's generic plan, for one, sorts where its custom plans do not).
const BUILT_AT_RUN_TIME: [&str; 4] = [
    "thread search by metadata",
    "store search by namespace",
    "running runs across threads",
    "store search by filter",
];

/// What both tests ask of every plan (`planning` names the failing case): each
/// statement uses its index and scans no table, and the ordered reads need no sort.
fn check_indexed(plans: &[(&str, String)], planning: Planning) {
    let expected = [
        ("claim next run", "runs_pending_queue"),
        ("thread search by metadata", "threads_metadata_gin"),
        ("latest run of a thread", "runs_thread_created"),
        ("checkpoint history page", "checkpoints_pkey"),
        ("store search by namespace", "store_items_pkey"),
        ("active runs of a thread", "runs_active_by_thread"),
        ("running runs across threads", "runs_one_running_per_thread"),
        ("store search by filter", "store_item_fields_by_value"),
        (
            "settle, mirror and claim the next run",
            "runs_one_running_per_thread",
        ),
        ("next delayed run", "runs_delayed_by_availability"),
    ];
    for ((name, plan), (wanted_name, index)) in plans.iter().zip(expected) {
        assert_eq!(*name, wanted_name);
        println!("-- {name} ({planning:?})\n{plan}\n");
        if planning == Planning::Generic && !BUILT_AT_RUN_TIME.contains(name) {
            continue;
        }
        assert!(
            plan.contains(index),
            "{name} ({planning:?}) should use {index}:\n{plan}"
        );
        assert!(
            !plan.contains("Seq Scan"),
            "{name} ({planning:?}) scans a table:\n{plan}"
        );
    }
    // Both claims probe the one-running-per-thread index by the candidate's thread,
    // in every plan: read whole, that partial index holds an entry for every claim
    // since the last vacuum.
    for (name, plan) in plans.iter().filter(|(name, _)| name.contains("claim")) {
        assert!(
            scans_with_condition(
                plan,
                &["using runs_one_running_per_thread on runs busy"],
                "thread_id = "
            ),
            "{name} ({planning:?}) reads the running runs whole:\n{plan}"
        );
    }
    if planning == Planning::Generic {
        return;
    }
    // Latest run, history page and a thread's active runs read the index in order:
    // no sort.
    for ordered in [2, 3, 5] {
        assert!(
            !plans[ordered].1.contains("Sort"),
            "{planning:?}: {}",
            plans[ordered].1
        );
    }
    // The filtered search walks the fields' index to its page: no bitmap of every item
    // with the value.
    assert!(
        !plans[7].1.contains("Bitmap"),
        "{planning:?}: {}",
        plans[7].1
    );
}

/// True when the plan has an index scan naming one of `scans` (e.g. `using INDEX on
/// TABLE ALIAS`) whose index condition starts with `condition` (`column = `): a probe
/// by that column, not a walk of the index with it as a filter or join condition.
fn scans_with_condition(plan: &str, scans: &[&str], condition: &str) -> bool {
    let lines: Vec<&str> = plan.lines().map(str::trim).collect();
    lines.windows(2).any(|pair| {
        scans.iter().any(|scan| pair[0].contains(scan))
            && pair[1]
                .strip_prefix("Index Cond: (")
                .is_some_and(|cond| cond.starts_with(condition))
    })
}

/// Rows with a realistic spread, then ANALYZE.
const POPULATE: &str = "
INSERT INTO threads SELECT gen_random_uuid(), now(), now() - (i || ' s')::interval, now(),
    jsonb_build_object('owner', 'u' || (i % 500)),
    CASE WHEN i % 10 = 0 THEN 'busy' ELSE 'idle' END, '{}', NULL, '{}', NULL, NULL, NULL, NULL
FROM generate_series(1, 10000) i;
INSERT INTO runs SELECT gen_random_uuid(), t.thread_id, gen_random_uuid(),
    now() - (g || ' s')::interval, now(),
    CASE WHEN g % 50 = 0 THEN 'pending' WHEN g = 1 AND t.status = 'busy' THEN 'running'
         ELSE 'success' END,
    '{}', NULL, '{}', NULL, now(), true, false
FROM threads t, generate_series(1, 5) g;
INSERT INTO checkpoints SELECT t.thread_id::text, '', lpad(g::text, 8, '0'), NULL,
    jsonb_build_object('step', g), now(), json_build_object('v', repeat('x', 100))
FROM (SELECT thread_id FROM threads LIMIT 1000) t, generate_series(1, 50) g;
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, channel, value)
SELECT thread_id, checkpoint_ns, checkpoint_id, 'task', 'ch' || k, '1'
FROM checkpoints, generate_series(1, 2) k WHERE (metadata ->> 'step')::int % 5 = 0;
INSERT INTO store_items SELECT 'users.u' || (i % 1000) || '.mem', 'k' || i,
    ARRAY['users', 'u' || (i % 1000), 'mem'], jsonb_build_object('n', i), now(),
    now() - (i || ' s')::interval, NULL, NULL
FROM generate_series(1, 20000) i;
-- Only this schema's tables: a database-wide ANALYZE would also visit (and deadlock
-- with) the schemas of tests running in parallel.
ANALYZE threads, runs, checkpoints, checkpoint_writes, store_items, store_item_fields;
";

#[tokio::test]
async fn hot_statements_use_indexes_on_populated_tables() {
    for (planning, plans) in plans_after(POPULATE).await {
        check_indexed(&plans, planning);
    }
}

/// A backlog: two runs in five pending, the older ones terminal, then ANALYZE.
const BACKLOG: &str = "
INSERT INTO threads SELECT gen_random_uuid(), now(), now(), now(), '{}', 'busy', '{}', NULL,
    '{}', NULL, NULL, NULL, NULL
FROM generate_series(1, 4000) i;
INSERT INTO runs SELECT gen_random_uuid(), t.thread_id, gen_random_uuid(),
    now() - ((10 - g) || ' s')::interval, now(),
    CASE WHEN g % 5 < 2 THEN 'pending' ELSE 'success' END,
    '{}', NULL, '{}', NULL, now(), false, false
FROM threads t, generate_series(1, 5) g;
ANALYZE threads, runs;
";

#[tokio::test]
async fn claiming_from_a_backlog_reads_the_queue_in_order() {
    for (planning, plans) in plans_after(BACKLOG).await {
        for (name, index) in [
            ("claim next run", "runs_pending_queue"),
            ("next delayed run", "runs_delayed_by_availability"),
        ] {
            let plan = plan_named(&plans, name, planning);
            assert!(
                plan.contains(index) && !plan.contains("Seq Scan"),
                "{name} ({planning:?}) should read {index} and scan no table:\n{plan}"
            );
        }
    }
}

/// Statistics of a quiet queue, then a backlog they do not know of.
const BACKLOG_AFTER_ANALYZE: &str = "
INSERT INTO threads SELECT gen_random_uuid(), now(), now(), now(), '{}', 'idle', '{}', NULL,
    '{}', NULL, NULL, NULL, NULL
FROM generate_series(1, 5000) i;
INSERT INTO runs SELECT gen_random_uuid(), t.thread_id, gen_random_uuid(),
    now() - interval '1 hour', now(), 'success', '{}', NULL, '{}', NULL, now(), true, false
FROM threads t, generate_series(1, 4) g;
ANALYZE threads, runs;
INSERT INTO runs SELECT gen_random_uuid(), t.thread_id, gen_random_uuid(), now(), now(),
    'pending', '{}', NULL, '{}', NULL, now(), false, false
FROM threads t;
";

#[tokio::test]
async fn a_settle_reads_its_runs_by_id_whatever_the_statistics_say() {
    for (planning, plans) in plans_after(BACKLOG_AFTER_ANALYZE).await {
        let name = "settle, mirror and claim the next run";
        let plan = plan_named(&plans, name, planning);
        // A run read by its id through a partial index of active runs is a walk of
        // the whole index.
        let through_partial = [
            "using runs_active_by_thread on",
            "using runs_pending_queue on",
        ];
        assert!(
            !scans_with_condition(plan, &through_partial, "run_id = "),
            "{name} ({planning:?}) walks a partial index for a run's id:\n{plan}"
        );
    }
}
