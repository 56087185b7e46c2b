//! The LISTEN connection: passes other instances' announcements of work on to the
//! waiters of [`Coordinator::other_work`](service_engine::coordination::Coordinator::other_work),
//! and every announced cancel to the subscribers of
//! [`Coordinator::announced_cancels`](service_engine::coordination::Coordinator::announced_cancels).

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::{Notify, broadcast};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The first pause before reconnecting; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a stopping session waits for the server to take its goodbye.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// How one LISTEN session ended.
enum Ended {
    /// Shutdown: do not reconnect.
    Stopped,
    /// The connection failed (or never listened): reconnect after a pause.
    Failed,
}

/// The channels one connection listens on.
pub(crate) struct Channels {
    pub(crate) work: String,
    pub(crate) cancel: String,
}

/// Whom the announcements are passed on to.
pub(crate) struct Receivers {
    pub(crate) work: Arc<Notify>,
    pub(crate) cancels: broadcast::Sender<Uuid>,
}

/// Keeps a LISTEN connection open until `stop`, reconnecting after failures.
pub(crate) async fn listen(
    config: Config,
    channels: Channels,
    instance: String,
    receivers: Receivers,
    stop: CancellationToken,
) {
    let mut backoff = MIN_BACKOFF;
    loop {
        match stop.run_until_cancelled(config.connect(NoTls)).await {
            None => return,
            Some(Ok((client, mut connection))) => {
                let messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                let session = Session {
                    channels: &channels,
                    instance: &instance,
                    receivers: &receivers,
                    stop: &stop,
                };
                match session.run(client, messages, &mut backoff).await {
                    Ended::Stopped => return,
                    Ended::Failed => {}
                }
            }
            Some(Err(error)) => tracing::warn!(%error, "cannot open the LISTEN connection"),
        }
        // Work queued while disconnected is found by the fallback poll, and cancels
        // announced meanwhile by the executing runs' store checks.
        receivers.work.notify_waiters();
        if stop
            .run_until_cancelled(tokio::time::sleep(backoff))
            .await
            .is_none()
        {
            return;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// What one connection listens for and whom it tells.
struct Session<'a> {
    channels: &'a Channels,
    instance: &'a str,
    receivers: &'a Receivers,
    stop: &'a CancellationToken,
}

impl Session<'_> {
    /// Listens on `client` until the connection fails or `stop`; resets `backoff` once
    /// listening.
    async fn run<M>(self, client: Client, mut messages: M, backoff: &mut Duration) -> Ended
    where
        M: Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Unpin,
    {
        // A validated channel is a plain identifier; quoted, it keeps its case, as
        // pg_notify's text argument does.
        let statement = format!(
            "LISTEN \"{}\"; LISTEN \"{}\"",
            self.channels.work, self.channels.cancel
        );
        let mut listening = Box::pin(client.batch_execute(&statement));
        // The connection must be polled for LISTEN to complete.
        let listened = loop {
            tokio::select! {
                result = &mut listening => break result,
                message = messages.next() => if message.is_none() { return Ended::Failed },
                () = self.stop.cancelled() => {
                    drop(listening);
                    close(client, messages).await;
                    return Ended::Stopped;
                }
            }
        };
        drop(listening);
        if let Err(error) = listened {
            tracing::warn!(%error, "LISTEN failed");
            return Ended::Failed;
        }
        *backoff = MIN_BACKOFF;
        loop {
            tokio::select! {
                message = messages.next() => match message {
                    Some(Ok(AsyncMessage::Notification(notification))) => {
                        self.pass_on(notification.channel(), notification.payload());
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => {
                        tracing::warn!(%error, "the LISTEN connection failed");
                        return Ended::Failed;
                    }
                    None => return Ended::Failed,
                },
                () = self.stop.cancelled() => {
                    close(client, messages).await;
                    return Ended::Stopped;
                }
            }
        }
    }

    /// Passes a notification on to whom its channel concerns.
    fn pass_on(&self, channel: &str, payload: &str) {
        if channel == self.channels.cancel {
            // A payload that is no run id was not sent by a coordinator: ignored.
            if let Ok(run_id) = Uuid::parse_str(payload) {
                // No subscriber (an engine not started) means no run to stop.
                let _ = self.receivers.cancels.send(run_id);
            }
        } else if payload != self.instance {
            self.receivers.work.notify_waiters();
        }
    }
}

/// Ends the session with a goodbye (dropping the client makes the connection send
/// Terminate), so the server ends its backend now rather than on a broken socket.
async fn close<M>(client: Client, messages: M)
where
    M: Stream + Unpin,
{
    drop(client);
    let drained = messages.for_each(|_| async {});
    if tokio::time::timeout(CLOSE_WAIT, drained).await.is_err() {
        tracing::debug!("the LISTEN connection did not close within {CLOSE_WAIT:?}");
    }
}
