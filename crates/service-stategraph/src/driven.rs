//! A run's chunk stream that runs the run itself: whoever reads the chunks polls the
//! supersteps, so a turn's frames reach the engine in the same task instead of being
//! handed from a spawned run task to the reader's task chunk by chunk.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::Stream;
use futures::future::BoxFuture;
use futures::task::AtomicWaker;
use service_graph::{Chunk, GraphError};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::mpsc::error::TryRecvError;
use tokio_util::sync::DropGuard;

type Item = Result<Chunk, GraphError>;

/// The chunks of `run`, which sends them on the channel `chunks` reads. The run only
/// advances while the stream is read; dropping the stream drops the run and cancels
/// what `stop` guards.
pub(crate) struct DrivenRun {
    run: Option<BoxFuture<'static, ()>>,
    chunks: UnboundedReceiver<Item>,
    waker: Arc<RunWaker>,
    _stop: DropGuard,
}

/// Notes that the run asked to be polled again, and wakes the reader's task.
///
/// The run is polled only after it asked: a run that yields after a turn of
/// supersteps (`tokio::task::yield_now`) is woken only once the reader's task has
/// returned to the scheduler, so the reader publishes the turn's chunks and lets
/// other tasks run before the next turn, as it would with the run in its own task.
struct RunWaker {
    woken: AtomicBool,
    reader: AtomicWaker,
}

impl Wake for RunWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.reader.wake();
    }
}

impl DrivenRun {
    pub(crate) fn new(
        run: impl Future<Output = ()> + Send + 'static,
        chunks: UnboundedReceiver<Item>,
        stop: DropGuard,
    ) -> Self {
        Self {
            run: Some(Box::pin(run)),
            chunks,
            waker: Arc::new(RunWaker {
                woken: AtomicBool::new(true),
                reader: AtomicWaker::new(),
            }),
            _stop: stop,
        }
    }
}

impl Stream for DrivenRun {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        loop {
            match this.chunks.try_recv() {
                Ok(item) => return Poll::Ready(Some(item)),
                Err(TryRecvError::Disconnected) => return Poll::Ready(None),
                Err(TryRecvError::Empty) => {}
            }
            let Some(run) = this.run.as_mut() else {
                // The run ended; a sender it handed out may still be sending.
                return this.chunks.poll_recv(cx);
            };
            this.waker.reader.register(cx.waker());
            if !this.waker.woken.swap(false, Ordering::AcqRel) {
                return Poll::Pending;
            }
            let waker = Waker::from(Arc::clone(&this.waker));
            if run
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready()
            {
                this.run = None;
            }
        }
    }
}
