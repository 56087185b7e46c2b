//! The webhook retry queue on the machine's Redis: jobs are taken when due, earliest
//! first, and each by one instance only.

use std::collections::BTreeSet;
use std::time::Duration;

use service_redis::{RedisBus, RedisBusOptions, RedisRetryQueue};
use service_types::Timestamp;
use service_webhooks::RetryQueue;
use uuid::Uuid;

async fn queues() -> (RedisRetryQueue, RedisRetryQueue) {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let options = RedisBusOptions {
        prefix: format!("retry-{}", Uuid::now_v7()),
        ..RedisBusOptions::new(url)
    };
    let a = RedisBus::connect(options.clone()).await.expect("Redis");
    let b = RedisBus::connect(options).await.expect("Redis");
    (RedisRetryQueue::of(&a), RedisRetryQueue::of(&b))
}

#[tokio::test]
async fn due_jobs_are_taken_earliest_first_and_later_ones_wait() {
    let (queue, other) = queues().await;
    let now = Timestamp::from_unix_micros(1_800_000_000_000_000);
    let (early, due, later) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    queue.schedule(due, now).await.unwrap();
    queue.schedule(early, now.plus_millis(-1000)).await.unwrap();
    queue
        .schedule(later, now.plus_millis(60_000))
        .await
        .unwrap();
    assert_eq!(other.take_due(now, 10).await.unwrap(), vec![early, due]);
    assert_eq!(queue.take_due(now, 10).await.unwrap(), Vec::<Uuid>::new());
    // Scheduled again (the next retry of the same delivery), it moves.
    queue.schedule(later, now).await.unwrap();
    assert_eq!(queue.take_due(now, 10).await.unwrap(), vec![later]);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_instances_taking_at_once_take_each_job_once() {
    let (a, b) = queues().await;
    let now = Timestamp::from_unix_micros(1_800_000_000_000_000);
    let mut scheduled = BTreeSet::new();
    for i in 0..200 {
        let id = Uuid::now_v7();
        a.schedule(id, now.plus_millis(-i)).await.unwrap();
        scheduled.insert(id);
    }
    let take_all = |queue: RedisRetryQueue| async move {
        let mut taken = Vec::new();
        loop {
            let batch = queue.take_due(now, 7).await.unwrap();
            if batch.is_empty() {
                return taken;
            }
            taken.extend(batch);
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
    };
    let (from_a, from_b) = tokio::join!(take_all(a), take_all(b));
    let mut all: Vec<Uuid> = from_a.into_iter().chain(from_b).collect();
    let count = all.len();
    all.sort();
    all.dedup();
    assert_eq!(count, all.len(), "no job taken twice");
    assert_eq!(all.into_iter().collect::<BTreeSet<_>>(), scheduled);
}
