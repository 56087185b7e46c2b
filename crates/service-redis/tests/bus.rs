//! The Redis bus on the machine's Redis (REDIS_URL, default redis://127.0.0.1:6379):
//! two buses on one Redis stand for two instances.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use service_engine::bus::{Delivery, Replay, StreamBus, Topic};
use service_redis::{RedisBus, RedisBusOptions};
use uuid::Uuid;

fn options(prefix: &str) -> RedisBusOptions {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    RedisBusOptions {
        prefix: prefix.to_owned(),
        retention: Duration::from_secs(60),
        idle_ttl: Duration::from_secs(60),
        ..RedisBusOptions::new(url)
    }
}

async fn pair() -> (Arc<RedisBus>, Arc<RedisBus>) {
    let prefix = format!("test-{}", Uuid::now_v7());
    let a = RedisBus::connect(options(&prefix)).await.expect("Redis");
    let b = RedisBus::connect(options(&prefix)).await.expect("Redis");
    (a, b)
}

fn data(delivery: &Delivery) -> String {
    match delivery {
        Delivery::Frame(frame) => String::from_utf8_lossy(&frame.data).into_owned(),
        Delivery::Lagged => "LAGGED".into(),
        Delivery::Unavailable => "UNAVAILABLE".into(),
    }
}

#[tokio::test]
async fn a_frame_published_on_one_instance_reaches_a_subscriber_on_another() {
    let (a, b) = pair().await;
    let topic = Topic::Run(Uuid::now_v7());
    a.open(topic).await;
    let mut live = b.subscribe(topic, Replay::All).await.expect("opened");
    let first = a.publish(topic, "values", Bytes::from_static(b"1")).await;
    let got = tokio::time::timeout(Duration::from_secs(5), live.next())
        .await
        .expect("announced")
        .expect("a frame");
    assert_eq!(data(&got), "1");
    a.publish(topic, "updates|child:1", Bytes::from_static(b"2"))
        .await;
    a.close(topic).await;
    let rest: Vec<Delivery> = tokio::time::timeout(Duration::from_secs(5), live.collect())
        .await
        .expect("ends at close");
    assert_eq!(rest.iter().map(data).collect::<Vec<_>>(), ["2"]);
    let replay = b
        .subscribe(topic, Replay::After(first))
        .await
        .expect("retained");
    let replayed: Vec<Delivery> = replay.collect().await;
    assert_eq!(replayed.len(), 1);
    let Delivery::Frame(frame) = &replayed[0] else {
        panic!("a frame");
    };
    assert_eq!(frame.event, "updates|child:1");
}

#[tokio::test]
async fn an_unknown_topic_has_no_subscription_and_a_trimmed_gap_is_lagged() {
    let prefix = format!("test-{}", Uuid::now_v7());
    let bus = RedisBus::connect(RedisBusOptions {
        max_len: 1,
        batch: 2,
        ..options(&prefix)
    })
    .await
    .expect("Redis");
    let topic = Topic::Run(Uuid::now_v7());
    assert!(bus.subscribe(topic, Replay::All).await.is_none());
    bus.open(topic).await;
    let mut slow = bus.subscribe(topic, Replay::All).await.expect("opened");
    bus.publish(topic, "values", Bytes::from_static(b"0")).await;
    assert_eq!(data(&slow.next().await.expect("first")), "0");
    // Far more than MAXLEN keeps: approximate trimming drops whole nodes of 100.
    for i in 1..1000 {
        bus.publish(topic, "values", Bytes::from(i.to_string()))
            .await;
    }
    bus.close(topic).await;
    let rest: Vec<String> = slow.map(|delivery| data(&delivery)).collect().await;
    assert_eq!(rest.last().map(String::as_str), Some("LAGGED"), "{rest:?}");
}
