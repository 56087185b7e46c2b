//! Group commit of run frames: the frames that runs publish while one script call is
//! in flight go to Redis together, in one call of [`keys::APPEND_RUNS`], in the order
//! they were published. A run publishes one frame at a time, so a batch holds frames of
//! different runs; each publisher still gets its own frame's id. Under load this turns
//! one script call per frame into one per batch, which is most of Redis's work and the
//! server's per-frame round trip; alone, a frame goes as it did.

use std::sync::{Arc, Weak};

use bytes::Bytes;
use service_engine::bus::{EventId, Frame, Topic};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::{Shared, keys, parsed};

/// The most frames one call carries (the script's arguments grow with it).
const MAX_BATCH: usize = 64;

/// A run frame waiting for the next call.
pub(crate) struct Append {
    pub(crate) run: Uuid,
    pub(crate) thread: Uuid,
    pub(crate) event: String,
    pub(crate) data: Bytes,
    pub(crate) done: oneshot::Sender<redis::RedisResult<EventId>>,
}

/// Sends batches until the bus is dropped.
pub(crate) async fn write(shared: Weak<Shared>, mut queue: mpsc::UnboundedReceiver<Append>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        send(&shared, std::mem::take(&mut batch)).await;
    }
}

async fn send(shared: &Arc<Shared>, batch: Vec<Append>) {
    let mut call = keys::APPEND_RUNS.prepare_invoke();
    call.arg(shared.options.max_len)
        .arg(shared.options.idle_ttl.as_millis() as u64)
        .arg(shared.keys.channel())
        .arg(&shared.origin);
    let mut streams = Vec::with_capacity(batch.len());
    for append in &batch {
        let (run, thread) = (Topic::Run(append.run), Topic::Thread(append.thread));
        let run_stream = shared.keys.stream(run);
        call.key(&run_stream)
            .key(shared.keys.meta(run))
            .key(shared.keys.watch(run))
            .key(shared.keys.stream(thread))
            .key(shared.keys.meta(thread))
            .key(shared.keys.watch(thread))
            .arg(&append.event)
            .arg(append.data.as_ref());
        streams.push((run_stream, shared.keys.stream(thread)));
    }
    let answered: redis::RedisResult<Vec<(String, u64)>> =
        call.invoke_async(&mut shared.connection.clone()).await;
    let appended = match answered {
        Ok(appended) if appended.len() == batch.len() => appended,
        Ok(appended) => {
            let error = redis::RedisError::from((
                redis::ErrorKind::Parse,
                "Redis answered another number of entries than frames appended",
                format!("{} for {}", appended.len(), batch.len()),
            ));
            return fail(batch, &error);
        }
        Err(error) => return fail(batch, &error),
    };
    for ((append, (id, n)), (run_stream, thread_stream)) in
        batch.into_iter().zip(appended).zip(streams)
    {
        let id = match parsed(id) {
            Ok(id) => id,
            Err(error) => {
                let _ = append.done.send(Err(error));
                continue;
            }
        };
        let frame = Frame {
            id,
            event: append.event,
            data: append.data,
        };
        shared.wake(&run_stream, Some((n, frame)));
        // The thread entry's number is not known here: its subscribers read it back.
        shared.wake(&thread_stream, None);
        let _ = append.done.send(Ok(id));
    }
}

/// Every frame of a failed call fails with the call's error.
fn fail(batch: Vec<Append>, error: &redis::RedisError) {
    for append in batch {
        let copy = redis::RedisError::from((
            redis::ErrorKind::Io,
            "appending frames to Redis failed",
            error.to_string(),
        ));
        let _ = append.done.send(Err(copy));
    }
}
