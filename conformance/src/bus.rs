//! The shared stream bus suite: every `service_engine::bus::StreamBus` (the in-memory
//! one, a durable one, a user's own) is held to the trait's docs and to SPEC's
//! "Streaming frames": ids that increase within a topic, byte-exact replay from the
//! start or after an id, fan-out to every subscriber on every handle of the backend,
//! a subscriber that falls behind told it lagged (never given a silent gap), closed
//! topics replayable until their retention ends. An implementation runs them from one
//! test file with [`bus_tests!`](crate::bus_tests), given a [`BusHarness`].
//!
//! A rule waits at most [`PATIENCE`] for what must arrive and asserts no other timing,
//! so a slow backend passes and a broken one fails rather than hangs.

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use service_engine::bus::{Delivery, EventId, Frame, Replay, StreamBus, Subscription, Topic};
use tokio::time::{sleep, timeout};
use uuid::Uuid;

/// The longest a rule waits for a delivery, or for a subscription to end.
pub const PATIENCE: Duration = Duration::from_secs(5);
/// The longest a whole rule may take: it catches a bus call that never returns.
pub const RULE_PATIENCE: Duration = Duration::from_secs(60);
/// How long a rule lets a subscriber wait before publishing or closing, so that the
/// subscriber is blocked on the bus by then.
const SETTLE: Duration = Duration::from_millis(50);

/// The bounds a bus under test is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusBounds {
    /// A topic keeps at least its newest `frames_per_topic` frames for replay, and a
    /// subscriber may fall this many frames behind without lagging (the in-memory
    /// bus's `max_frames_per_topic`, a Redis stream's MAXLEN).
    pub frames_per_topic: usize,
}

/// The bounds every rule builds its bus with: small, so that few frames make a
/// subscriber lag.
pub const BOUNDS: BusBounds = BusBounds {
    frames_per_topic: 8,
};

/// How many frames are published past a subscriber that reads none; it must lag. Far
/// beyond [`BOUNDS`], so that a bus that trims approximately (Redis `MAXLEN ~`, whole
/// nodes of 100 entries) has trimmed too.
pub const FLOOD: usize = 64 * BOUNDS.frames_per_topic;

/// What the suite needs of an implementation: a fresh backend per rule, a second handle
/// on it, and a way to make a closed topic outlive its retention.
#[async_trait]
pub trait BusHarness: Send + Sync + 'static {
    /// A handle on a fresh backend of this rule's own, honouring `bounds`. Closed
    /// topics stay replayable until [`age_out`](Self::age_out): a rule closes at
    /// most a dozen topics, so a bus that evicts by count must retain at least that
    /// many.
    async fn bus(&self, bounds: BusBounds) -> Arc<dyn StreamBus>;

    /// Another handle on `bus`'s backend, as another server instance has: the same
    /// object for a bus of one process, a new connection for a shared server.
    async fn peer(&self, bus: &Arc<dyn StreamBus>) -> Arc<dyn StreamBus>;

    /// Makes `topic`, which the rule closed on `bus`, pass its retention as if it had
    /// finished long ago (close more topics than are retained, expire a key). Other
    /// closed topics may age out with it.
    async fn age_out(&self, bus: &Arc<dyn StreamBus>, topic: Topic);
}

/// Runs one rule on a fresh multi-threaded runtime, failing it after
/// [`RULE_PATIENCE`].
pub fn run(rule: impl Future<Output = ()>) {
    crate::coordinator::run(async {
        timeout(RULE_PATIENCE, rule)
            .await
            .unwrap_or_else(|_| panic!("the rule did not finish within {RULE_PATIENCE:?}"));
    });
}

fn run_topic() -> Topic {
    Topic::Run(Uuid::new_v4())
}

fn thread_topic() -> Topic {
    Topic::Thread(Uuid::new_v4())
}

/// An id before any a bus assigns.
const ORIGIN: EventId = EventId { millis: 0, seq: 0 };

/// Publishes one frame and returns it as subscribers must receive it.
async fn publish(bus: &dyn StreamBus, topic: Topic, event: &str, data: impl Into<Bytes>) -> Frame {
    let data = data.into();
    let id = bus.publish(topic, event, data.clone()).await;
    Frame {
        id,
        event: event.to_owned(),
        data,
    }
}

/// Publishes a `values` frame per number, each telling its number and topic.
async fn publish_numbered(bus: &dyn StreamBus, topic: Topic, numbers: Range<usize>) -> Vec<Frame> {
    let mut frames = Vec::with_capacity(numbers.len());
    for n in numbers {
        let data = format!(r#"{{"n":{n},"topic":"{topic:?}"}}"#);
        frames.push(publish(bus, topic, "values", data).await);
    }
    frames
}

async fn subscribe(bus: &dyn StreamBus, topic: Topic, replay: Replay) -> Subscription {
    bus.subscribe(topic, replay)
        .await
        .unwrap_or_else(|| panic!("{topic:?} is known, so subscribing with {replay:?} succeeds"))
}

/// The next delivery, or `None` when the subscription ended.
async fn next(subscription: &mut Subscription) -> Option<Delivery> {
    timeout(PATIENCE, subscription.next())
        .await
        .unwrap_or_else(|_| panic!("neither a delivery nor the end within {PATIENCE:?}"))
}

/// The next `count` deliveries; the subscription must not end before.
async fn take(subscription: &mut Subscription, count: usize) -> Vec<Delivery> {
    let mut deliveries = Vec::with_capacity(count);
    while deliveries.len() < count {
        let delivery = next(subscription).await.unwrap_or_else(|| {
            panic!(
                "ended after {} of {count} deliveries: {:?}",
                deliveries.len(),
                summary(&deliveries)
            )
        });
        deliveries.push(delivery);
    }
    deliveries
}

/// Every delivery up to the end, which must come within [`PATIENCE`].
async fn to_end(subscription: Subscription) -> Vec<Delivery> {
    timeout(PATIENCE, subscription.collect())
        .await
        .unwrap_or_else(|_| panic!("the subscription did not end within {PATIENCE:?}"))
}

fn delivered(frames: &[Frame]) -> Vec<Delivery> {
    frames.iter().cloned().map(Delivery::Frame).collect()
}

/// Deliveries as short lines, so that a failure shows ids and events rather than a
/// megabyte of data.
fn summary(deliveries: &[Delivery]) -> Vec<String> {
    deliveries
        .iter()
        .map(|delivery| match delivery {
            Delivery::Frame(frame) => {
                let data = String::from_utf8_lossy(&frame.data);
                let mut head: String = data.chars().take(40).collect();
                if head.len() < data.len() {
                    head.push('…');
                }
                format!(
                    "{} {} {head} ({} bytes)",
                    frame.id,
                    frame.event,
                    frame.data.len()
                )
            }
            Delivery::Lagged => "Lagged".to_owned(),
            Delivery::Unavailable => "Unavailable".to_owned(),
        })
        .collect()
}

#[track_caller]
fn assert_delivers(actual: &[Delivery], expected: &[Frame], what: &str) {
    assert!(
        actual == delivered(expected),
        "{what}:\n got      {:#?}\n expected {:#?}",
        summary(actual),
        summary(&delivered(expected))
    );
}

#[track_caller]
fn assert_increasing(ids: &[EventId], what: &str) {
    if let Some(pair) = ids.windows(2).find(|pair| pair[0] >= pair[1]) {
        panic!("{what}: id {} follows {}", pair[1], pair[0]);
    }
}

// ids and replay

/// Ids increase strictly within a topic, whatever other topics publish meanwhile
/// (also past the topic's buffer bound).
pub async fn ids_increase_strictly_within_each_topic(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let id = Uuid::new_v4();
    let (run, thread) = (Topic::Run(id), Topic::Thread(id));
    let (mut run_ids, mut thread_ids) = (Vec::new(), Vec::new());
    for n in 0..4 * BOUNDS.frames_per_topic {
        run_ids.push(publish(&*bus, run, "values", n.to_string()).await.id);
        thread_ids.push(publish(&*bus, thread, "values", n.to_string()).await.id);
    }
    assert_increasing(&run_ids, "run topic");
    assert_increasing(&thread_ids, "thread topic");
}

/// `Replay::All` yields every frame in publish order with the ids `publish` returned,
/// event names and data byte for byte: subgraph event names with `|`, internal `__`
/// records, a megabyte of data, non-ASCII text. The same before and after close.
pub async fn replay_all_delivers_every_frame_byte_exact(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    bus.open(topic).await;
    let mut early = subscribe(&*bus, topic, Replay::All).await;
    let letters: String = (0..1 << 20)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let megabyte = format!(r#"{{"blob":"{letters}"}}"#);
    let frames = vec![
        publish(&*bus, topic, "metadata", r#"{"run_id":"r"}"#).await,
        publish(&*bus, topic, "updates|agent:7f3a|tools:1", r#"{"a":1}"#).await,
        publish(&*bus, topic, "__outcome__", r#"{"status":"success"}"#).await,
        publish(&*bus, topic, "custom", megabyte).await,
        publish(
            &*bus,
            topic,
            "messages|nœud:ü",
            r#"{"text":"héllo — 世界 🎉"}"#,
        )
        .await,
        publish(&*bus, topic, "values", "{}").await,
    ];
    assert!(
        frames[2].is_internal(),
        "an internal record is published too"
    );
    let live = take(&mut early, frames.len()).await;
    assert_delivers(&live, &frames, "subscribed before publishing");
    bus.close(topic).await;
    assert!(next(&mut early).await.is_none(), "ends on close");
    let replayed = to_end(subscribe(&*bus, topic, Replay::All).await).await;
    assert_delivers(&replayed, &frames, "subscribed after close");
}

/// `Replay::Live` gets only the frames published after subscribing.
pub async fn live_gets_only_frames_published_after_subscribing(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    publish_numbered(&*bus, topic, 0..2).await;
    let live = subscribe(&*bus, topic, Replay::Live).await;
    let later = publish_numbered(&*bus, topic, 2..4).await;
    bus.close(topic).await;
    assert_delivers(&to_end(live).await, &later, "live");
}

/// `Replay::After(id)` yields exactly the frames after `id`, then live ones: after a
/// frame's id, after an id between two frames (`Last-Event-ID: <ms>`), after an id
/// before every frame, after the newest.
pub async fn after_an_id_replays_exactly_the_later_frames(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    let mut frames = Vec::new();
    for n in 0..5 {
        // Apart, so that neighbouring frames have ids of different milliseconds.
        sleep(Duration::from_millis(3)).await;
        frames.extend(publish_numbered(&*bus, topic, n..n + 1).await);
    }
    assert!(
        frames[2].id.millis < frames[3].id.millis,
        "ids carry the publish time: frames published 3 ms apart, {} and {}",
        frames[2].id,
        frames[3].id
    );
    let between = EventId {
        millis: frames[2].id.millis,
        seq: u64::MAX,
    };
    let mut cases = Vec::new();
    for (after, later) in [
        (frames[1].id, &frames[2..]),
        (between, &frames[3..]),
        (ORIGIN, &frames[..]),
        (frames[4].id, &frames[5..]),
    ] {
        let mut subscription = subscribe(&*bus, topic, Replay::After(after)).await;
        let replayed = take(&mut subscription, later.len()).await;
        assert_delivers(&replayed, later, &format!("after {after}"));
        cases.push((after, subscription));
    }
    let live = publish_numbered(&*bus, topic, 5..6).await;
    bus.close(topic).await;
    for (after, subscription) in cases {
        assert_delivers(
            &to_end(subscription).await,
            &live,
            &format!("after {after}, then live"),
        );
    }
}

/// A closed topic within its retention still replays after an id, and ends.
pub async fn after_an_id_replays_a_closed_topic_within_retention(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = thread_topic();
    let frames = publish_numbered(&*bus, topic, 0..4).await;
    bus.close(topic).await;
    for (replay, expected) in [
        (Replay::After(frames[0].id), &frames[1..]),
        (Replay::After(frames[3].id), &frames[4..]),
        (Replay::All, &frames[..]),
        (Replay::Live, &frames[4..]),
    ] {
        let replayed = to_end(subscribe(&*bus, topic, replay).await).await;
        assert_delivers(&replayed, expected, &format!("{replay:?} after close"));
    }
}

/// A topic that buffered more frames than its bound replays its newest frames (at
/// least the bound's worth) without a gap: aged-out frames are gone, nothing else.
pub async fn replay_of_a_topic_longer_than_its_buffer_is_its_newest_frames(
    harness: &dyn BusHarness,
) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    let frames = publish_numbered(&*bus, topic, 0..4 * BOUNDS.frames_per_topic).await;
    bus.close(topic).await;
    let replayed = to_end(subscribe(&*bus, topic, Replay::All).await).await;
    assert!(
        replayed.len() >= BOUNDS.frames_per_topic,
        "keeps at least the newest {} frames: {:?}",
        BOUNDS.frames_per_topic,
        summary(&replayed)
    );
    let kept = frames.len().saturating_sub(replayed.len());
    assert_delivers(&replayed, &frames[kept..], "the newest frames");
}

// waiting and ending

/// A subscriber of an opened topic without frames waits for its first frame, whether
/// it replays or not.
pub async fn a_subscriber_waits_for_the_first_frame_of_an_opened_topic(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    bus.open(topic).await;
    let mut replaying = subscribe(&*bus, topic, Replay::All).await;
    let mut live = subscribe(&*bus, topic, Replay::Live).await;
    let (first, from_replaying, from_live) = tokio::join!(
        async {
            sleep(SETTLE).await;
            publish_numbered(&*bus, topic, 0..1).await
        },
        next(&mut replaying),
        next(&mut live),
    );
    for (delivery, what) in [(from_replaying, "replaying"), (from_live, "live")] {
        let got = Vec::from_iter(delivery);
        assert_delivers(&got, &first, what);
    }
}

/// `close` lets subscribers receive what was published and then ends them, also one
/// already waiting; a subscriber after close replays and ends at once. The topic
/// stays known.
pub async fn close_ends_subscribers_after_what_was_published(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    bus.open(topic).await;
    let unread = subscribe(&*bus, topic, Replay::Live).await;
    let mut waiting = subscribe(&*bus, topic, Replay::Live).await;
    let frames = publish_numbered(&*bus, topic, 0..3).await;
    assert_delivers(&take(&mut waiting, 3).await, &frames, "read as published");
    let (end, ()) = tokio::join!(next(&mut waiting), async {
        sleep(SETTLE).await;
        bus.close(topic).await;
    });
    assert_eq!(end, None, "a waiting subscriber ends on close");
    assert_delivers(&to_end(unread).await, &frames, "unread before close");
    assert!(bus.is_open(topic).await, "a closed topic is still known");
    let replayed = to_end(subscribe(&*bus, topic, Replay::All).await).await;
    assert_delivers(&replayed, &frames, "subscribed after close");
    let live = to_end(subscribe(&*bus, topic, Replay::Live).await).await;
    assert_delivers(&live, &[], "live after close");
}

/// A run's frames published together arrive as if published one by one: in order,
/// between the frames published before and after them, on the run's topic and on its
/// thread's when that one is open; an unopened thread's topic gets none.
pub async fn a_runs_frames_published_together_arrive_in_order(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let (run, thread) = (Uuid::new_v4(), Uuid::new_v4());
    bus.open(Topic::Run(run)).await;
    bus.open(Topic::Thread(thread)).await;
    let together: Vec<(String, Bytes)> = (0..5)
        .map(|n| {
            let event = if n % 2 == 0 { "values" } else { "updates" };
            (event.to_owned(), Bytes::from(format!(r#"{{"n":{n}}}"#)))
        })
        .collect();
    let first = ("metadata".to_owned(), Bytes::from_static(b"{}"));
    let last = ("custom".to_owned(), Bytes::from_static(b"\"end\""));
    bus.publish_run(run, thread, &first.0, first.1.clone())
        .await;
    bus.publish_run_frames(run, thread, together.clone()).await;
    bus.publish_run(run, thread, &last.0, last.1.clone()).await;
    let mut expected = vec![first];
    expected.extend(together.iter().cloned());
    expected.push(last);
    for topic in [Topic::Run(run), Topic::Thread(thread)] {
        bus.close(topic).await;
        let got = to_end(subscribe(&*bus, topic, Replay::All).await).await;
        let ids: Vec<EventId> = got
            .iter()
            .filter_map(|delivery| match delivery {
                Delivery::Frame(frame) => Some(frame.id),
                _ => None,
            })
            .collect();
        assert!(
            ids.windows(2).all(|pair| pair[0] < pair[1]),
            "{topic:?}: {ids:?}"
        );
        let got: Vec<(String, Bytes)> = got
            .into_iter()
            .map(|delivery| match delivery {
                Delivery::Frame(frame) => (frame.event, frame.data),
                other => panic!("{topic:?}: {other:?}"),
            })
            .collect();
        assert_eq!(got, expected, "{topic:?}");
    }
    let (alone, unopened) = (Uuid::new_v4(), Uuid::new_v4());
    bus.open(Topic::Run(alone)).await;
    bus.publish_run_frames(alone, unopened, together.clone())
        .await;
    assert!(
        bus.subscribe(Topic::Thread(unopened), Replay::All)
            .await
            .is_none(),
        "an unopened thread's topic gets nothing"
    );
    bus.close(Topic::Run(alone)).await;
    let got = to_end(subscribe(&*bus, Topic::Run(alone), Replay::All).await).await;
    assert_eq!(got.len(), together.len());
}

/// A topic never opened nor published to is unknown: no subscription, not open. `open`
/// or a first `publish` makes it known.
pub async fn unknown_topics_have_no_subscription_until_opened(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let id = Uuid::new_v4();
    let (run, thread) = (Topic::Run(id), Topic::Thread(id));
    for topic in [run, thread] {
        assert!(!bus.is_open(topic).await, "{topic:?} is unknown");
        for replay in [Replay::Live, Replay::All, Replay::After(ORIGIN)] {
            assert!(
                bus.subscribe(topic, replay).await.is_none(),
                "{topic:?} is unknown: no subscription with {replay:?}"
            );
        }
    }
    bus.open(run).await;
    assert!(bus.is_open(run).await, "opened");
    assert!(
        !bus.is_open(thread).await,
        "the thread of the same id is another topic"
    );
    assert!(bus.subscribe(thread, Replay::All).await.is_none());
    assert!(bus.subscribe(run, Replay::All).await.is_some());
    let published = thread_topic();
    publish_numbered(&*bus, published, 0..1).await;
    assert!(
        bus.is_open(published).await,
        "a first publish opens the topic"
    );
}

/// Opening a topic again keeps its frames (the engine opens a thread's topic whenever a
/// client joins it).
pub async fn opening_again_keeps_a_topics_frames(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = thread_topic();
    bus.open(topic).await;
    let mut frames = publish_numbered(&*bus, topic, 0..2).await;
    bus.open(topic).await;
    frames.extend(publish_numbered(&*bus, topic, 2..3).await);
    assert_increasing(
        &frames.iter().map(|frame| frame.id).collect::<Vec<_>>(),
        "across the second open",
    );
    let mut replaying = subscribe(&*bus, topic, Replay::All).await;
    assert_delivers(
        &take(&mut replaying, 3).await,
        &frames,
        "after opening again",
    );
}

/// Topics are independent: a run and the thread of the same id, and another run, each
/// get only their own frames, and closing one leaves the others open.
pub async fn topics_are_independent(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let id = Uuid::new_v4();
    let topics = [Topic::Run(id), Topic::Thread(id), run_topic()];
    let mut subscriptions = Vec::new();
    for topic in topics {
        bus.open(topic).await;
        subscriptions.push(subscribe(&*bus, topic, Replay::All).await);
    }
    let mut frames = vec![Vec::new(), Vec::new(), Vec::new()];
    for n in 0..2 {
        for (topic, published) in topics.iter().zip(&mut frames) {
            published.extend(publish_numbered(&*bus, *topic, n..n + 1).await);
        }
    }
    bus.close(topics[0]).await;
    for (topic, published) in topics.iter().zip(&mut frames).skip(1) {
        published.extend(publish_numbered(&*bus, *topic, 2..3).await);
        bus.close(*topic).await;
    }
    for ((topic, subscription), published) in topics.iter().zip(subscriptions).zip(&frames) {
        let got = to_end(subscription).await;
        assert_delivers(&got, published, &format!("{topic:?}"));
    }
}

/// `discard` ends the topic's subscribers and forgets the topic: it is unknown, and
/// once opened again it has none of its old frames.
pub async fn discard_ends_subscribers_and_forgets_the_topic(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    let frames = publish_numbered(&*bus, topic, 0..2).await;
    let mut waiting = subscribe(&*bus, topic, Replay::Live).await;
    let unread = subscribe(&*bus, topic, Replay::All).await;
    let (end, ()) = tokio::join!(next(&mut waiting), async {
        sleep(SETTLE).await;
        bus.discard(topic).await;
    });
    assert_eq!(end, None, "a waiting subscriber ends on discard");
    let rest = to_end(unread).await;
    // Whether frames still unread are delivered is the bus's choice; a gap is not.
    assert_delivers(
        &rest,
        &frames[..rest.len().min(frames.len())],
        "unread at discard",
    );
    assert!(!bus.is_open(topic).await, "a discarded topic is unknown");
    assert!(bus.subscribe(topic, Replay::All).await.is_none());
    bus.open(topic).await;
    let fresh = subscribe(&*bus, topic, Replay::All).await;
    let new = publish_numbered(&*bus, topic, 2..3).await;
    bus.close(topic).await;
    assert_delivers(&to_end(fresh).await, &new, "opened again after discard");
}

// falling behind

/// A subscriber that reads nothing while far more frames than the bound are published
/// gets a run of consecutive frames from its start, possibly none, then `Lagged`, then
/// nothing more: never a silent gap.
pub async fn a_subscriber_that_reads_nothing_lags_without_a_gap(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    bus.open(topic).await;
    let mut idle = subscribe(&*bus, topic, Replay::Live).await;
    let frames = publish_numbered(&*bus, topic, 0..FLOOD).await;
    let mut received = 0;
    loop {
        match next(&mut idle).await {
            Some(Delivery::Lagged) => break,
            Some(delivery) => {
                let expected = &frames[received..=received];
                assert_delivers(&[delivery], expected, "the next frame before lagging");
                received += 1;
                assert!(
                    received < FLOOD,
                    "all {FLOOD} frames reached a subscriber that read none: it must lag \
                     once more than {} frames behind",
                    BOUNDS.frames_per_topic
                );
            }
            None => panic!("ended after {received} frames without lagging, the topic open"),
        }
    }
    publish_numbered(&*bus, topic, FLOOD..FLOOD + 1).await;
    assert_eq!(next(&mut idle).await, None, "nothing follows Lagged");
}

/// A subscriber that falls behind by at most the bound, again and again, gets every
/// frame and never lags.
pub async fn a_subscriber_at_most_the_bound_behind_never_lags(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = thread_topic();
    bus.open(topic).await;
    let mut subscription = subscribe(&*bus, topic, Replay::Live).await;
    let batch = BOUNDS.frames_per_topic;
    for round in 0..8 {
        let frames = publish_numbered(&*bus, topic, round * batch..(round + 1) * batch).await;
        let got = take(&mut subscription, batch).await;
        assert_delivers(&got, &frames, &format!("batch {round}"));
    }
    bus.close(topic).await;
    assert_eq!(next(&mut subscription).await, None);
}

// retention

/// A closed topic past its retention has no frames: subscribing finds nothing, or a
/// subscription that ends at once with no frames (SPEC: joining a finished run beyond
/// retention completes immediately). It is no longer open.
pub async fn a_closed_topic_aged_out_has_no_frames(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = run_topic();
    let frames = publish_numbered(&*bus, topic, 0..2).await;
    bus.close(topic).await;
    harness.age_out(&bus, topic).await;
    assert!(!bus.is_open(topic).await, "aged out");
    for replay in [Replay::All, Replay::After(frames[0].id), Replay::Live] {
        if let Some(subscription) = bus.subscribe(topic, replay).await {
            let got = to_end(subscription).await;
            assert_delivers(&got, &[], &format!("{replay:?} after aging out"));
        }
    }
}

// fan-out

/// Every subscriber gets every frame, whichever way it started.
pub async fn every_subscriber_gets_every_frame(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topic = thread_topic();
    bus.open(topic).await;
    let mut subscriptions = Vec::new();
    for replay in [
        Replay::All,
        Replay::All,
        Replay::Live,
        Replay::After(ORIGIN),
    ] {
        subscriptions.push((replay, subscribe(&*bus, topic, replay).await));
    }
    let frames = publish_numbered(&*bus, topic, 0..BOUNDS.frames_per_topic).await;
    bus.close(topic).await;
    for (replay, subscription) in subscriptions {
        let got = to_end(subscription).await;
        assert_delivers(&got, &frames, &format!("{replay:?}"));
    }
}

/// A handle on the same backend (another server instance) sees what one handle opened,
/// published and closed: live, replayed from the start and after an id, both ways.
pub async fn a_peer_handle_sees_what_another_published(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let peer = harness.peer(&bus).await;
    for (publisher, subscriber, topic) in
        [(&bus, &peer, run_topic()), (&peer, &bus, thread_topic())]
    {
        assert!(subscriber.subscribe(topic, Replay::All).await.is_none());
        publisher.open(topic).await;
        assert!(
            subscriber.is_open(topic).await,
            "opened on the other handle"
        );
        let mut waiting = subscribe(&**subscriber, topic, Replay::Live).await;
        let frames = publish_numbered(&**publisher, topic, 0..3).await;
        assert_delivers(&take(&mut waiting, 3).await, &frames, "live");
        let after = subscribe(&**subscriber, topic, Replay::After(frames[0].id)).await;
        publisher.close(topic).await;
        assert_eq!(next(&mut waiting).await, None, "ends on close");
        assert_delivers(&to_end(after).await, &frames[1..], "after the first");
        let replayed = to_end(subscribe(&**subscriber, topic, Replay::All).await).await;
        assert_delivers(&replayed, &frames, "replayed after close");
    }
}

/// Two handles publishing to one topic (two instances on one thread) give it one order:
/// ids keep increasing across handles, and subscribers on either see that order.
pub async fn publishers_on_two_handles_share_one_order(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let peer = harness.peer(&bus).await;
    let topic = thread_topic();
    bus.open(topic).await;
    let on_bus = subscribe(&*bus, topic, Replay::All).await;
    let on_peer = subscribe(&*peer, topic, Replay::All).await;
    let mut frames = Vec::new();
    for n in 0..BOUNDS.frames_per_topic {
        let publisher = if n % 2 == 0 { &bus } else { &peer };
        frames.extend(publish_numbered(&**publisher, topic, n..n + 1).await);
    }
    assert_increasing(
        &frames.iter().map(|frame| frame.id).collect::<Vec<_>>(),
        "alternating handles",
    );
    peer.close(topic).await;
    assert_delivers(&to_end(on_bus).await, &frames, "subscribed on the bus");
    assert_delivers(&to_end(on_peer).await, &frames, "subscribed on the peer");
}

/// `close_all` ends every subscription of the handle, each after what it had not read
/// yet: replaying ones, live ones, ones on a topic without frames.
pub async fn close_all_ends_every_subscription(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let (run, thread) = (run_topic(), thread_topic());
    let frames = publish_numbered(&*bus, run, 0..2).await;
    bus.open(thread).await;
    let replaying = subscribe(&*bus, run, Replay::All).await;
    let live = subscribe(&*bus, run, Replay::Live).await;
    let empty = subscribe(&*bus, thread, Replay::All).await;
    let (replaying, live, empty, ()) =
        tokio::join!(to_end(replaying), to_end(live), to_end(empty), async {
            sleep(SETTLE).await;
            bus.close_all().await;
        });
    assert_delivers(&replaying, &frames, "replaying");
    assert_delivers(&live, &[], "live");
    assert_delivers(&empty, &[], "topic without frames");
}

// concurrency

/// Publishers on different topics at once, each read by a subscriber at once: no frame
/// is lost, duplicated, reordered or delivered to another topic.
pub async fn concurrent_publishers_on_different_topics_lose_nothing(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let topics: Vec<Topic> = (0..8)
        .map(|i| {
            if i % 2 == 0 {
                run_topic()
            } else {
                thread_topic()
            }
        })
        .collect();
    let mut readers = Vec::new();
    for topic in &topics {
        bus.open(*topic).await;
        readers.push(tokio::spawn(to_end(
            subscribe(&*bus, *topic, Replay::Live).await,
        )));
    }
    let publishers: Vec<_> = topics
        .iter()
        .map(|topic| {
            let (bus, topic) = (bus.clone(), *topic);
            tokio::spawn(async move {
                let mut frames = Vec::new();
                for n in 0..BOUNDS.frames_per_topic {
                    frames.extend(publish_numbered(&*bus, topic, n..n + 1).await);
                    tokio::task::yield_now().await;
                }
                frames
            })
        })
        .collect();
    let mut published = Vec::new();
    for publisher in publishers {
        published.push(publisher.await.expect("publisher"));
    }
    for topic in &topics {
        bus.close(*topic).await;
    }
    for ((topic, reader), frames) in topics.iter().zip(readers).zip(&published) {
        let got = reader.await.expect("reader");
        assert_delivers(&got, frames, &format!("{topic:?}"));
    }
}

/// Publishers on one topic at once, on both handles: every frame gets its own id,
/// subscribers see each exactly once in id order, and each publisher's frames in the
/// order it published them.
pub async fn concurrent_publishers_on_one_topic_get_distinct_ordered_ids(harness: &dyn BusHarness) {
    let bus = harness.bus(BOUNDS).await;
    let peer = harness.peer(&bus).await;
    let topic = thread_topic();
    bus.open(topic).await;
    let reader = tokio::spawn(to_end(subscribe(&*bus, topic, Replay::Live).await));
    let per_publisher = BOUNDS.frames_per_topic / 4;
    let publishers: Vec<_> = (0..4)
        .map(|p| {
            let handle = if p % 2 == 0 {
                bus.clone()
            } else {
                peer.clone()
            };
            tokio::spawn(async move {
                let mut frames = Vec::new();
                for n in p * per_publisher..(p + 1) * per_publisher {
                    frames.extend(publish_numbered(&*handle, topic, n..n + 1).await);
                    tokio::task::yield_now().await;
                }
                frames
            })
        })
        .collect();
    let mut all = Vec::new();
    for publisher in publishers {
        let frames = publisher.await.expect("publisher");
        assert_increasing(
            &frames.iter().map(|frame| frame.id).collect::<Vec<_>>(),
            "one publisher's frames",
        );
        all.extend(frames);
    }
    all.sort_by_key(|frame| frame.id);
    assert_increasing(
        &all.iter().map(|frame| frame.id).collect::<Vec<_>>(),
        "every frame its own id",
    );
    bus.close(topic).await;
    let got = reader.await.expect("reader");
    assert_delivers(&got, &all, "every frame once, in id order");
}

/// Expands to one `#[test]` per stream bus rule, in module `bus`, each with a fresh
/// harness from `$harness` (an expression implementing [`BusHarness`]).
#[macro_export]
macro_rules! bus_tests {
    ($harness:expr) => {
        mod bus {
            #[allow(unused_imports)]
            use super::*;

            $crate::__bus_rules!(($harness) [
                ids_increase_strictly_within_each_topic,
                replay_all_delivers_every_frame_byte_exact,
                live_gets_only_frames_published_after_subscribing,
                after_an_id_replays_exactly_the_later_frames,
                after_an_id_replays_a_closed_topic_within_retention,
                replay_of_a_topic_longer_than_its_buffer_is_its_newest_frames,
                a_subscriber_waits_for_the_first_frame_of_an_opened_topic,
                close_ends_subscribers_after_what_was_published,
                unknown_topics_have_no_subscription_until_opened,
                opening_again_keeps_a_topics_frames,
                topics_are_independent,
                discard_ends_subscribers_and_forgets_the_topic,
                a_subscriber_that_reads_nothing_lags_without_a_gap,
                a_subscriber_at_most_the_bound_behind_never_lags,
                a_closed_topic_aged_out_has_no_frames,
                every_subscriber_gets_every_frame,
                a_peer_handle_sees_what_another_published,
                publishers_on_two_handles_share_one_order,
                close_all_ends_every_subscription,
                concurrent_publishers_on_different_topics_lose_nothing,
                concurrent_publishers_on_one_topic_get_distinct_ordered_ids,
                a_runs_frames_published_together_arrive_in_order,
            ]);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __bus_rules {
    (($harness:expr) [$($rule:ident),* $(,)?]) => {
        $(
            #[test]
            fn $rule() {
                $crate::bus::run(async {
                    let harness = $harness;
                    $crate::bus::$rule(&harness).await;
                });
            }
        )*
    };
}
