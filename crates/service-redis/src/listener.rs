//! One pub/sub connection per instance: frames appended by other instances are
//! announced on the bus's channel, and their subscribers here woken; recorded cancels
//! are announced on the cancels channel, and handed to the engine here.

use std::sync::Weak;
use std::time::Duration;

use futures::StreamExt;

use crate::Shared;

/// Listens until the bus is dropped, reconnecting after a failure (subscribers poll
/// meanwhile, and are all woken once it is back).
pub(crate) async fn listen(client: redis::Client, shared: Weak<Shared>) {
    loop {
        let (channel, cancels) = match shared.upgrade() {
            Some(shared) => (
                shared.keys.channel().to_owned(),
                shared.keys.cancels().to_owned(),
            ),
            None => return,
        };
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => match pubsub.subscribe(&[&channel, &cancels]).await {
                Ok(()) => {
                    if let Some(shared) = shared.upgrade() {
                        shared.wake_all();
                    }
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        let Some(shared) = shared.upgrade() else {
                            return;
                        };
                        let Ok(payload) = message.get_payload::<String>() else {
                            continue;
                        };
                        if message.get_channel_name() == cancels {
                            if let Ok(run_id) = payload.parse() {
                                // Nobody listening yet is fine: nothing runs here.
                                let _ = shared.cancels.send(run_id);
                            }
                            continue;
                        }
                        if let Some((origin, key)) = payload.split_once(' ')
                            && origin != shared.origin
                        {
                            shared.wake(key, None);
                        }
                    }
                    tracing::warn!("the Redis announcement connection closed; reconnecting");
                }
                Err(error) => tracing::warn!(%error, "subscribing to Redis announcements failed"),
            },
            Err(error) => tracing::warn!(%error, "connecting for Redis announcements failed"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
