//! A run's superstep checkpoints, written behind the run (durability `async`, LangGraph's
//! default): a superstep hands its checkpoint over and the next one starts at once,
//! while a writer polled beside the run stores them in order, every step that queued
//! up while a write was under way in one saver call ([`Checkpointer::put_steps`], one
//! statement on PostgreSQL). The run waits for all of them before it ends (and before
//! any write that refers to a queued checkpoint), so whoever reads the thread after the
//! run sees every checkpoint; a crash loses at most the steps still queued, as with
//! LangGraph's async durability. The run's first hand-over (its input checkpoints)
//! waits up to [`FIRST_WINDOW`] for the next: a short first superstep's checkpoint then
//! goes in the same write, so a one-node run costs one write. A write that fails (the
//! run was fenced, the thread deleted) fails the run at its next hand-over or wait.
//! Durability `sync` writes each checkpoint before the next superstep; `exit` is
//! written as `async` is (every checkpoint kept, none awaited before the run ends).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use service_graph::{CheckpointConfig, Checkpointer, GraphError, NamedStep};
use service_types::Durability;
use tokio::sync::{mpsc, oneshot};

/// Steps queued at most before a hand-over waits for the writer: it bounds the memory
/// the bodies of a run far ahead of its database hold, and the size of one statement.
const QUEUED: usize = 32;

/// How long the run's first hand-over waits for the next before it is written alone:
/// long enough for a first node that computes, short enough that a reader of the
/// thread soon sees the input of a run whose first node waits on a model.
const FIRST_WINDOW: Duration = Duration::from_millis(10);

/// What the writer is handed.
enum Queued {
    /// A step and the coordinates of its parent.
    Step(CheckpointConfig, NamedStep),
    /// Answered once every step queued before it is stored.
    Flush(oneshot::Sender<()>),
}

/// The run's side: where supersteps hand their checkpoints over.
pub(crate) struct Checkpoints {
    saver: Arc<dyn Checkpointer>,
    /// `None` when each checkpoint is written before the next superstep.
    queue: Option<mpsc::Sender<Queued>>,
    /// Why the writer stopped, once it has.
    failed: Arc<Mutex<Option<GraphError>>>,
}

/// The checkpoints of one run loop and the writer to poll beside it (it ends once the
/// [`Checkpoints`] are dropped and what they queued is stored).
pub(crate) fn write_behind(
    saver: Arc<dyn Checkpointer>,
    durability: Durability,
) -> (Checkpoints, impl Future<Output = ()> + Send) {
    let failed = Arc::new(Mutex::new(None));
    let (queue, writer) = match durability {
        Durability::Sync => (None, None),
        Durability::Async | Durability::Exit => {
            let (sender, receiver) = mpsc::channel(QUEUED);
            (
                Some(sender),
                Some(write(Arc::clone(&saver), receiver, Arc::clone(&failed))),
            )
        }
    };
    let writer = async move {
        if let Some(writer) = writer {
            writer.await;
        }
    };
    (
        Checkpoints {
            saver,
            queue,
            failed,
        },
        writer,
    )
}

impl Checkpoints {
    /// Stores `steps` in order after the checkpoint `parent` names, or queues them for
    /// the writer.
    pub(crate) async fn put(
        &self,
        parent: &CheckpointConfig,
        steps: Vec<NamedStep>,
    ) -> Result<(), GraphError> {
        let Some(queue) = &self.queue else {
            return self.saver.put_steps(parent, steps).await;
        };
        let mut parent = parent.clone();
        for step in steps {
            let next = CheckpointConfig {
                checkpoint_id: Some(step.checkpoint_id.clone()),
                ..parent.clone()
            };
            if queue.send(Queued::Step(parent, step)).await.is_err() {
                return Err(self.failure());
            }
            parent = next;
        }
        Ok(())
    }

    /// Returns once every checkpoint handed over is stored, or with why one was not.
    pub(crate) async fn flush(&self) -> Result<(), GraphError> {
        let Some(queue) = &self.queue else {
            return Ok(());
        };
        let (done, stored) = oneshot::channel();
        if queue.send(Queued::Flush(done)).await.is_err() || stored.await.is_err() {
            return Err(self.failure());
        }
        Ok(())
    }

    fn failure(&self) -> GraphError {
        self.failed
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take()
            .unwrap_or_else(|| GraphError::checkpointer("the checkpoint writer stopped"))
    }
}

/// Stores the queued steps in order, all that queued up in one call, then answers the
/// flushes among them (the run sends nothing after a flush until it is answered); stops
/// at the first failure, leaving it in `failed` (the queue closes, so the run's next
/// hand-over or wait learns of it).
async fn write(
    saver: Arc<dyn Checkpointer>,
    mut queue: mpsc::Receiver<Queued>,
    failed: Arc<Mutex<Option<GraphError>>>,
) {
    let mut received = Vec::with_capacity(QUEUED);
    let mut first = true;
    while queue.recv_many(&mut received, QUEUED).await > 0 {
        let flushing = received
            .iter()
            .any(|queued| matches!(queued, Queued::Flush(_)));
        if std::mem::take(&mut first) && !flushing && received.len() < QUEUED {
            // recv_many is cancel safe: a timeout takes nothing from the queue.
            let room = QUEUED - received.len();
            let _ = tokio::time::timeout(FIRST_WINDOW, queue.recv_many(&mut received, room)).await;
        }
        let mut first_parent = None;
        let mut steps = Vec::with_capacity(received.len());
        let mut flushes = Vec::new();
        for queued in received.drain(..) {
            match queued {
                Queued::Step(parent, step) => {
                    first_parent.get_or_insert(parent);
                    steps.push(step);
                }
                Queued::Flush(done) => flushes.push(done),
            }
        }
        if let Some(parent) = first_parent
            && let Err(error) = saver.put_steps(&parent, steps).await
        {
            *failed.lock().unwrap_or_else(|poison| poison.into_inner()) = Some(error);
            queue.close();
            return;
        }
        for done in flushes {
            // The run may have stopped waiting (it was dropped).
            let _ = done.send(());
        }
    }
}
