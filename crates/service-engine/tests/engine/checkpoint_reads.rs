//! Which runs read their thread's latest checkpoint as they start: a run made with its
//! thread skips it when its claim found no checkpoint there, however it reached its
//! worker (created claimed, or queued and claimed by id or with a settle).

use crate::observed::*;
use crate::support::*;
use service_graph::checkpoint::{HookedSaver, SaverHooks};

/// Each read of a thread's latest checkpoint: (thread, found one).
#[derive(Default)]
struct LatestReads(std::sync::Mutex<Vec<(String, bool)>>);

impl SaverHooks for LatestReads {
    fn latest_read(&self, thread_id: &str, found: bool) {
        self.0.lock().unwrap().push((thread_id.to_owned(), found));
    }
}

type Reads = HookedSaver<LatestReads>;

/// Runs on a memory store whose claims see `reads`' saver's checkpoints.
fn runs_seeing(reads: &Reads) -> ObservedRuns {
    let options = MemoryOptions::new(test_clock()).with_checkpoints(reads.saver.clone());
    ObservedRuns {
        store: Some(memory_store(options)),
        ..ObservedRuns::default()
    }
}

/// The reads of `thread`'s latest checkpoint: (found nothing, found one).
fn reads_of(reads: &Reads, thread: Uuid) -> (usize, usize) {
    let thread = thread.to_string();
    let reads = reads.hooks.0.lock().unwrap();
    let of_thread = reads.iter().filter(|(read, _)| *read == thread);
    of_thread.fold((0, 0), |(empty, found), (_, hit)| {
        if *hit {
            (empty, found + 1)
        } else {
            (empty + 1, found)
        }
    })
}

/// An `echo` run of `text`.
fn echo(text: &str) -> RunCreate {
    run_body(
        "echo",
        json!({"messages": [{"type": "human", "content": text}]}),
    )
}

/// An `echo` run of `text` on a thread made for it.
fn echo_on_new_thread(text: &str) -> (RunTarget, RunCreate) {
    let mut body = echo(text);
    body.if_not_exists = Some(IfNotExists::Create);
    (RunTarget::Thread(Uuid::now_v7()), body)
}

/// The texts of a finished run's messages.
async fn messages_of(engine: &Engine, run: &Run) -> Vec<String> {
    let result = result_of(engine, run.run_id).await;
    let messages = result["messages"].as_array().cloned().unwrap_or_default();
    let text = |message: &Value| message["content"].as_str().unwrap_or_default().to_owned();
    messages.iter().map(text).collect()
}

/// Runs queued behind a busy worker on threads made for them, claimed with their
/// predecessor's settle or by id, read no checkpoint as they start; a run queued on a
/// thread made before it does.
#[tokio::test]
async fn a_queued_run_on_a_thread_it_made_reads_no_checkpoint() {
    let reads = Arc::new(Reads::default());
    let (engine, runs) = one_worker_with(runs_seeing(&reads), reads.clone()).await;
    let slow = running_slow_run(&engine, new_thread(&engine).await).await;
    let mut made = Vec::new();
    for text in ["one", "two"] {
        let (target, body) = echo_on_new_thread(text);
        made.push(unscoped(&engine).runs().create(target, body).await.unwrap());
    }
    let existing = new_thread(&engine).await;
    let on_existing = unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(existing), echo("three"))
        .await
        .unwrap();
    unscoped(&engine)
        .runs()
        .cancel(slow.thread_id, slow.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    assert_eq!(
        messages_of(&engine, &on_existing).await,
        ["three", "echo: three"]
    );
    // The worker is idle: the next run is queued and claimed by id.
    idle_workers(&engine, 1).await;
    let (target, body) = echo_on_new_thread("four");
    made.push(unscoped(&engine).runs().create(target, body).await.unwrap());

    for (run, text) in made.iter().zip(["one", "two", "four"]) {
        assert_eq!(
            messages_of(&engine, run).await,
            [text.to_owned(), format!("echo: {text}")]
        );
        assert_eq!(
            reads_of(&reads, run.thread_id).0,
            0,
            "{text} read an empty thread"
        );
    }
    assert_eq!(
        (
            runs.claimed_by_id.load(SeqCst),
            runs.claimed_in_settle.load(SeqCst)
        ),
        (2, 3),
        "slow and four by id, the others with a settle"
    );
    assert_eq!(
        reads_of(&reads, existing).0,
        1,
        "a run on a thread made before it reads it"
    );
}

/// A run queued on a thread made for it, overtaken there by a run queued later that
/// another instance started first, reads what that run wrote, though that run was
/// deleted since (its checkpoints stay).
#[tokio::test]
async fn a_queued_run_overtaken_on_its_thread_reads_what_the_other_run_wrote() {
    let reads = Arc::new(Reads::default());
    let (busy, _) = one_worker_with(runs_seeing(&reads), reads.clone()).await;
    let store = busy.system().store().clone();
    let (free, _) = engine_on_runs(
        ObservedRuns {
            store: Some(store),
            searches_find_nothing: true,
            ..ObservedRuns::default()
        },
        test_clock(),
        EngineConfig::default(),
        reads.clone(),
    )
    .await;
    let slow = running_slow_run(&busy, new_thread(&busy).await).await;
    let (target, body) = echo_on_new_thread("first");
    let made = unscoped(&busy).runs().create(target, body).await.unwrap();
    let mut enqueued = echo("second");
    enqueued.multitask_strategy = Some(MultitaskStrategy::Enqueue);
    let overtaking = unscoped(&free)
        .runs()
        .create(RunTarget::Thread(made.thread_id), enqueued)
        .await
        .unwrap();
    assert_eq!(
        messages_of(&free, &overtaking).await,
        ["second", "echo: second"]
    );
    settled(&free, &overtaking).await;
    unscoped(&free)
        .runs()
        .delete(made.thread_id, overtaking.run_id)
        .await
        .unwrap();

    unscoped(&busy)
        .runs()
        .cancel(slow.thread_id, slow.run_id, CancelAction::Interrupt)
        .await
        .unwrap();
    assert_eq!(
        messages_of(&busy, &made).await,
        ["second", "echo: second", "first", "echo: first"]
    );
    assert_eq!(
        reads_of(&reads, made.thread_id).0,
        1,
        "only the overtaking run found the thread empty"
    );
}
