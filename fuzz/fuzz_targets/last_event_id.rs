//! The SSE `Last-Event-ID` header (`-1`/`-` for the start, `<ms>-<seq>`, `<ms>-*`,
//! `<ms>`), then the replay it asks for, from the in-memory stream bus holding a few
//! frames (some aged out when the first byte asks for a small buffer): a resumed
//! stream gets exactly the buffered frames after the id, in order.

#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use service_engine::bus::{Delivery, MemoryBus, MemoryBusLimits, Replay, StreamBus, Topic};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, header)) = data.split_first() else {
        return;
    };
    let Ok(header) = std::str::from_utf8(header) else {
        return;
    };
    let Some(replay) = Replay::from_last_event_id(Some(header)) else {
        return;
    };
    if let Replay::After(id) = replay {
        let written = id.to_string();
        assert_eq!(
            Replay::from_last_event_id(Some(&written)),
            Some(replay),
            "{header:?} read as {written}, which reads otherwise"
        );
    }

    let published = usize::from(shape & 0x0f);
    let limits = MemoryBusLimits {
        max_frames_per_topic: usize::from(shape >> 4).max(1),
        ..MemoryBusLimits::default()
    };
    runtime().block_on(async {
        let bus = MemoryBus::new(limits);
        let topic = Topic::Run(uuid::Uuid::nil());
        bus.open(topic).await;
        let mut ids = Vec::new();
        for n in 0..published {
            ids.push(
                bus.publish(topic, "values", Bytes::from(n.to_string()))
                    .await,
            );
        }
        bus.close(topic).await;
        let buffered = &ids[published.saturating_sub(limits.max_frames_per_topic)..];
        let expected: Vec<_> = match replay {
            Replay::Live => Vec::new(),
            Replay::All => buffered.to_vec(),
            Replay::After(after) => buffered.iter().copied().filter(|id| *id > after).collect(),
        };
        let subscription = bus.subscribe(topic, replay).await.expect("the topic");
        let got: Vec<_> = subscription
            .map(|delivery| match delivery {
                Delivery::Frame(frame) => frame.id,
                other => panic!("{other:?} from a closed topic"),
            })
            .collect()
            .await;
        assert_eq!(got, expected, "replay {replay:?}");
    });
});
