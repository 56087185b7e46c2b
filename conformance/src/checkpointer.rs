//! The shared checkpointer suite: every `service_graph::Checkpointer` (the in-memory
//! saver, the PostgreSQL saver, a user's own) is held to the same behaviours. A saver
//! runs them all from one test file with [`checkpointer_tests!`](crate::checkpointer_tests),
//! given an async factory returning a fresh [`SaverUnderTest`].

use std::any::Any;
use std::sync::Arc;

use serde_json::{Value, json};
use service_graph::{
    CheckpointConfig, CheckpointListOptions, CheckpointTuple, Checkpointer, GraphError, NamedStep,
    new_checkpoint_id,
};
use service_types::{JsonText, Metadata, PruneStrategy};

/// A fresh, empty saver, plus whatever must stay alive while it is used (a
/// database schema, a pool).
pub struct SaverUnderTest {
    /// The saver.
    pub saver: Arc<dyn Checkpointer>,
    /// Dropped when the test ends.
    pub guard: Box<dyn Any + Send>,
}

impl std::fmt::Debug for SaverUnderTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaverUnderTest").finish_non_exhaustive()
    }
}

fn meta(value: Value) -> Metadata {
    value.as_object().cloned().unwrap_or_default()
}

/// Puts one checkpoint per run id, each the parent of the next.
async fn chain(saver: &dyn Checkpointer, thread: &str, runs: &[&str]) -> Vec<CheckpointConfig> {
    let mut parent = CheckpointConfig::new(thread, None);
    let mut written = Vec::new();
    for (step, run) in runs.iter().enumerate() {
        parent = saver
            .put(
                &parent,
                body(json!({"step": step})),
                meta(json!({"step": step, "run_id": run})),
            )
            .await
            .expect("put");
        written.push(parent.clone());
    }
    written
}

async fn all(saver: &dyn Checkpointer, thread: &str) -> Vec<CheckpointTuple> {
    saver
        .list(
            &CheckpointConfig::new(thread, None),
            CheckpointListOptions::default(),
        )
        .await
        .expect("list")
}

/// The latest checkpoint is the last put; parents link back; unknown threads have none.
pub async fn latest_is_the_last_put_and_parents_link_back(saver: &dyn Checkpointer) {
    let written = chain(saver, "t", &["r1", "r1", "r2"]).await;
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.config, written[2]);
    assert_eq!(latest.parent_config, Some(written[1].clone()));
    assert_eq!(latest.checkpoint, json!({"step": 2}));
    let first = saver.get_tuple(&written[0]).await.unwrap().unwrap();
    assert_eq!(first.parent_config, None);
    let nobody = saver
        .get_tuple(&CheckpointConfig::new("nobody", None))
        .await
        .unwrap();
    assert!(nobody.is_none());
}

/// Listing is newest first and honours `before`, `limit` and the metadata filter; a
/// checkpoint id in the config lists only that checkpoint.
pub async fn list_is_newest_first_with_before_limit_and_filter(saver: &dyn Checkpointer) {
    let written = chain(saver, "t", &["r1", "r1", "r2", "r2"]).await;
    let ids: Vec<_> = all(saver, "t")
        .await
        .iter()
        .map(|t| t.config.clone())
        .collect();
    assert_eq!(ids, written.iter().rev().cloned().collect::<Vec<_>>());
    let options = CheckpointListOptions {
        before: written[3].checkpoint_id.clone(),
        limit: Some(2),
        filter: None,
    };
    let page = saver
        .list(&CheckpointConfig::new("t", None), options)
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
        vec![written[2].clone(), written[1].clone()]
    );
    let options = CheckpointListOptions {
        filter: Some(meta(json!({"run_id": "r1"}))),
        ..CheckpointListOptions::default()
    };
    let filtered = saver
        .list(&CheckpointConfig::new("t", None), options)
        .await
        .unwrap();
    assert_eq!(filtered.len(), 2);
    let one = saver
        .list(&written[1], CheckpointListOptions::default())
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].config, written[1]);
}

/// Subgraph namespaces of one thread are kept apart.
pub async fn namespaces_are_kept_apart(saver: &dyn Checkpointer) {
    chain(saver, "t", &["r1"]).await;
    let sub = CheckpointConfig {
        thread_id: "t".into(),
        checkpoint_ns: "child".into(),
        checkpoint_id: None,
    };
    let written = saver
        .put(&sub, body(json!({"sub": true})), Metadata::new())
        .await
        .unwrap();
    let latest_sub = saver.get_tuple(&sub).await.unwrap().unwrap();
    assert_eq!(latest_sub.config, written);
    assert_eq!(all(saver, "t").await.len(), 1);
}

/// A task's writes to a channel replace its earlier ones; writes to an unknown
/// checkpoint are `NotFound`.
pub async fn writes_of_a_task_and_channel_replace_earlier_ones(saver: &dyn Checkpointer) {
    let written = chain(saver, "t", &["r"]).await;
    saver
        .put_writes(&written[0], "task", vec![("a".into(), json!(1))])
        .await
        .unwrap();
    saver
        .put_writes(
            &written[0],
            "task",
            vec![("a".into(), json!(2)), ("b".into(), json!(3))],
        )
        .await
        .unwrap();
    let tuple = saver.get_tuple(&written[0]).await.unwrap().unwrap();
    let values: Vec<_> = tuple
        .pending_writes
        .iter()
        .map(|w| w.value.clone())
        .collect();
    assert_eq!(values, vec![json!(2), json!(3)]);
    // Within one call too: a repeated channel keeps its last value, at its last place.
    saver
        .put_writes(
            &written[0],
            "task",
            vec![
                ("c".into(), json!(4)),
                ("a".into(), json!(5)),
                ("c".into(), json!(6)),
            ],
        )
        .await
        .unwrap();
    let tuple = saver.get_tuple(&written[0]).await.unwrap().unwrap();
    let writes: Vec<_> = tuple
        .pending_writes
        .iter()
        .map(|w| (w.channel.as_str(), w.value.clone()))
        .collect();
    assert_eq!(
        writes,
        vec![("b", json!(3)), ("a", json!(5)), ("c", json!(6))]
    );
    let unknown = CheckpointConfig::new("t", Some("nope".into()));
    for writes in [Vec::new(), vec![("a".to_owned(), json!(1))]] {
        assert!(matches!(
            saver.put_writes(&unknown, "task", writes).await,
            Err(GraphError::NotFound(_))
        ));
    }
}

/// A checkpoint stored under the runtime's own id is found by it, links to its
/// parent, and counts as the latest; storing the id again replaces body and metadata
/// and keeps the writes made against it.
pub async fn named_checkpoints_keep_the_runtime_id(saver: &dyn Checkpointer) {
    let root = CheckpointConfig::new("t", None);
    let first = saver
        .put_named(
            &root,
            "1f0-a",
            body(json!({"n": 1})),
            meta(json!({"step": 0})),
        )
        .await
        .unwrap();
    assert_eq!(first.checkpoint_id.as_deref(), Some("1f0-a"));
    let second = saver
        .put_named(
            &first,
            "1f0-b",
            body(json!({"n": 2})),
            meta(json!({"step": 1})),
        )
        .await
        .unwrap();
    saver
        .put_writes(&second, "task", vec![("0:out".into(), json!("w"))])
        .await
        .unwrap();
    let latest = saver.get_tuple(&root).await.unwrap().unwrap();
    assert_eq!(latest.config, second);
    assert_eq!(latest.parent_config, Some(first.clone()));
    let again = saver
        .put_named(
            &first,
            "1f0-b",
            body(json!({"n": 3})),
            meta(json!({"step": 9})),
        )
        .await
        .unwrap();
    assert_eq!(again, second);
    let replaced = saver.get_tuple(&second).await.unwrap().unwrap();
    assert_eq!(replaced.checkpoint, json!({"n": 3}));
    assert_eq!(replaced.metadata.get("step"), Some(&json!(9)));
    assert_eq!(replaced.pending_writes.len(), 1);
    assert_eq!(all(saver, "t").await.len(), 2);
}

/// The end of a superstep: each task's writes land on the parent, and the new
/// checkpoint follows it; an unknown parent stores nothing.
pub async fn put_after_writes_records_the_writes_then_the_checkpoint(saver: &dyn Checkpointer) {
    let parent = chain(saver, "t", &["r"]).await.remove(0);
    let task_writes = vec![
        ("a".to_owned(), vec![("out".to_owned(), json!(1))]),
        (
            "b".to_owned(),
            vec![("out".to_owned(), json!(2)), ("out".to_owned(), json!(3))],
        ),
    ];
    let written = saver
        .put_after_writes(
            &parent,
            task_writes,
            body(json!({"step": 1})),
            meta(json!({"step": 1})),
        )
        .await
        .unwrap();
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.config, latest.parent_config),
        (written, Some(parent.clone()))
    );
    assert_eq!(latest.checkpoint, json!({"step": 1}));
    let writes: Vec<_> = saver
        .get_tuple(&parent)
        .await
        .unwrap()
        .unwrap()
        .pending_writes
        .iter()
        .map(|w| (w.task_id.clone(), w.value.clone()))
        .collect();
    assert_eq!(writes, vec![("a".into(), json!(1)), ("b".into(), json!(3))]);

    let unknown = CheckpointConfig::new("t", Some("nope".into()));
    let task_writes = vec![("a".to_owned(), vec![("out".to_owned(), json!(1))])];
    assert!(matches!(
        saver
            .put_after_writes(&unknown, task_writes, body(json!({})), Metadata::new())
            .await,
        Err(GraphError::NotFound(_))
    ));
    assert_eq!(all(saver, "t").await.len(), 2, "nothing stored");
}

/// Supersteps written behind a run: each step follows the one before it (the first
/// the named checkpoint) under the id the runtime minted, and its writes land on its
/// parent, a rewrite of a task and channel keeping the last value; on a new thread the
/// first step has no parent. A first step with writes on an unknown parent stores
/// nothing.
pub async fn put_steps_stores_each_step_after_the_one_before(saver: &dyn Checkpointer) {
    let parent = chain(saver, "t", &["r"]).await.remove(0);
    let ids = [new_checkpoint_id(), new_checkpoint_id()];
    let step = |id: &str, n: i64, task_writes: Vec<(String, Vec<(String, Value)>)>| NamedStep {
        task_writes,
        checkpoint_id: id.to_owned(),
        checkpoint: body(json!({"step": n})),
        metadata: meta(json!({"step": n})),
    };
    let output = |task: &str, values: &[i64]| {
        (
            task.to_owned(),
            values
                .iter()
                .map(|value| ("out".to_owned(), json!(value)))
                .collect(),
        )
    };
    saver
        .put_steps(
            &parent,
            vec![
                step(&ids[0], 1, vec![output("a", &[1, 2]), output("b", &[3])]),
                step(&ids[1], 2, vec![output("a", &[4])]),
            ],
        )
        .await
        .unwrap();
    let tuples = all(saver, "t").await;
    let links: Vec<_> = tuples
        .iter()
        .map(|t| (t.id().to_owned(), t.parent_config.clone()))
        .collect();
    let at = |id: &str| Some(CheckpointConfig::new("t", Some(id.to_owned())));
    assert_eq!(
        links,
        vec![
            (ids[1].clone(), at(&ids[0])),
            (ids[0].clone(), Some(parent.clone())),
            (parent.checkpoint_id.clone().unwrap(), None),
        ]
    );
    assert_eq!(tuples[0].checkpoint, json!({"step": 2}));
    assert_eq!(tuples[0].metadata, meta(json!({"step": 2})));
    let writes = |tuple: &CheckpointTuple| -> Vec<(String, Value)> {
        tuple
            .pending_writes
            .iter()
            .map(|w| (w.task_id.clone(), w.value.clone()))
            .collect()
    };
    assert!(writes(&tuples[0]).is_empty());
    assert_eq!(writes(&tuples[1]), vec![("a".into(), json!(4))]);
    assert_eq!(
        writes(&tuples[2]),
        vec![("a".into(), json!(2)), ("b".into(), json!(3))]
    );

    let unknown = CheckpointConfig::new("t", Some("nope".into()));
    let refused = saver
        .put_steps(
            &unknown,
            vec![step(&new_checkpoint_id(), 9, vec![output("a", &[1])])],
        )
        .await;
    assert!(
        matches!(refused, Err(GraphError::NotFound(_))),
        "{refused:?}"
    );
    assert_eq!(all(saver, "t").await.len(), 3, "nothing stored");

    // A run's start on a new thread: its input checkpoint has no parent, and the
    // `__start__` writes land on it.
    let (input, next) = (new_checkpoint_id(), new_checkpoint_id());
    saver
        .put_steps(
            &CheckpointConfig::new("fresh", None),
            vec![
                step(&input, -1, vec![]),
                step(&next, 0, vec![output("start", &[5])]),
            ],
        )
        .await
        .unwrap();
    let tuples = all(saver, "fresh").await;
    let at = |id: &str| Some(CheckpointConfig::new("fresh", Some(id.to_owned())));
    assert_eq!(
        tuples
            .iter()
            .map(|t| (t.id().to_owned(), t.parent_config.clone()))
            .collect::<Vec<_>>(),
        vec![(next.clone(), at(&input)), (input.clone(), None)]
    );
    assert_eq!(writes(&tuples[1]), vec![("start".into(), json!(5))]);
}

/// Merged metadata replaces the same keys and keeps the others, on the named checkpoint
/// only; it is what history filters and rollback then see. Unknown: `NotFound`.
pub async fn merged_metadata_replaces_keys_of_one_checkpoint(saver: &dyn Checkpointer) {
    let written = chain(saver, "t", &["r1", "r2"]).await;
    saver
        .merge_metadata(&written[1], meta(json!({"step": 7, "reviewed": true})))
        .await
        .unwrap();
    let tuples = all(saver, "t").await;
    assert_eq!(
        Value::Object(tuples[0].metadata.clone()),
        json!({"step": 7, "run_id": "r2", "reviewed": true})
    );
    assert_eq!(
        Value::Object(tuples[1].metadata.clone()),
        json!({"step": 0, "run_id": "r1"})
    );
    let reviewed = saver
        .list(
            &CheckpointConfig::new("t", None),
            CheckpointListOptions {
                filter: Some(meta(json!({"reviewed": true}))),
                ..CheckpointListOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(reviewed.len(), 1);
    // A merged run_id moves the checkpoint to that run for rollback.
    saver
        .merge_metadata(&written[0], meta(json!({"run_id": "r3"})))
        .await
        .unwrap();
    saver.delete_run("t", "r3").await.unwrap();
    assert_eq!(all(saver, "t").await.len(), 1);
    let unknown = CheckpointConfig::new("t", Some("nope".into()));
    assert!(matches!(
        saver.merge_metadata(&unknown, Metadata::new()).await,
        Err(GraphError::NotFound(_))
    ));
}

/// Thread copy keeps checkpoints and writes; rollback drops a run's checkpoints;
/// keep-latest prune and delete do what they say.
pub async fn copy_prune_and_rollback(saver: &dyn Checkpointer) {
    let written = chain(saver, "t", &["r1", "r2", "r2"]).await;
    saver
        .put_writes(&written[2], "task", vec![("a".into(), json!(1))])
        .await
        .unwrap();
    saver.copy_thread("t", "u").await.unwrap();
    let copied = all(saver, "u").await;
    assert_eq!(copied.len(), 3);
    assert_eq!(copied[0].pending_writes.len(), 1);
    saver.delete_run("t", "r2").await.unwrap();
    assert_eq!(all(saver, "t").await.len(), 1);
    saver.prune("u", PruneStrategy::KeepLatest).await.unwrap();
    let kept = all(saver, "u").await;
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].metadata.get("step"), Some(&json!(2)));
    saver.delete_thread("u").await.unwrap();
    assert!(all(saver, "u").await.is_empty());
    saver.prune("t", PruneStrategy::Delete).await.unwrap();
    assert!(all(saver, "t").await.is_empty());
}

/// Large checkpoint bodies come back unchanged.
pub async fn large_bodies_round_trip(saver: &dyn Checkpointer) {
    let big = json!({"messages": vec!["x".repeat(1000); 200]});
    let config = saver
        .put(
            &CheckpointConfig::new("t", None),
            body(big.clone()),
            Metadata::new(),
        )
        .await
        .unwrap();
    let tuple = saver.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint, big);
}

/// The list filter is per-key equality, not containment.
pub async fn filter_is_per_key_equality_not_containment(saver: &dyn Checkpointer) {
    let root = CheckpointConfig::new("t", None);
    saver
        .put(
            &root,
            body(json!({})),
            meta(json!({"tags": ["a", "b"], "n": 1})),
        )
        .await
        .unwrap();
    let root = &root;
    let count = |filter: Value| async move {
        let options = CheckpointListOptions {
            filter: Some(meta(filter)),
            ..CheckpointListOptions::default()
        };
        saver.list(root, options).await.unwrap().len()
    };
    assert_eq!(count(json!({"tags": ["a", "b"]})).await, 1);
    assert_eq!(count(json!({"tags": ["a"]})).await, 0);
    assert_eq!(count(json!({"n": 2})).await, 0);
    assert_eq!(count(json!({"missing": null})).await, 0);
}

/// Expands to one `#[tokio::test]` per checkpointer behaviour, each on a fresh saver
/// from `$factory` (an `async fn() -> SaverUnderTest`).
#[macro_export]
macro_rules! checkpointer_tests {
    ($factory:expr) => {
        $crate::__checkpointer_suite!(($factory) [
            latest_is_the_last_put_and_parents_link_back,
            list_is_newest_first_with_before_limit_and_filter,
            namespaces_are_kept_apart,
            writes_of_a_task_and_channel_replace_earlier_ones,
            copy_prune_and_rollback,
            large_bodies_round_trip,
            filter_is_per_key_equality_not_containment,
            merged_metadata_replaces_keys_of_one_checkpoint,
            put_after_writes_records_the_writes_then_the_checkpoint,
            put_steps_stores_each_step_after_the_one_before,
            named_checkpoints_keep_the_runtime_id,
        ]);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __checkpointer_suite {
    (($factory:expr) [$($name:ident),* $(,)?]) => {
        mod checkpointer {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    let under_test: $crate::checkpointer::SaverUnderTest = ($factory)().await;
                    $crate::checkpointer::$name(under_test.saver.as_ref()).await;
                    drop(under_test.guard);
                }
            )*
        }
    };
}

/// A checkpoint body as savers take it.
fn body(value: Value) -> JsonText {
    JsonText::new(&value)
}
