//! Cancels across instances over the machine's Redis: one instance's announcement is
//! heard by the other's engine, and the wrapped coordinator is not used for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use service_engine::EngineResult;
use service_engine::coordination::{Coordinator, ThreadClaim};
use service_redis::{RedisBus, RedisBusOptions, RedisCancels};
use uuid::Uuid;

/// The wrapped coordinator: records the cancels announced through it.
#[derive(Default)]
struct Recorder {
    announced: Mutex<Vec<Uuid>>,
}

struct NoClaim;
impl ThreadClaim for NoClaim {}

#[async_trait]
impl Coordinator for Recorder {
    async fn announce_work(&self) {}

    async fn other_work(&self) {
        futures::future::pending::<()>().await;
    }

    async fn claim_thread(&self, _thread_id: Uuid) -> EngineResult<Box<dyn ThreadClaim>> {
        Ok(Box::new(NoClaim))
    }

    async fn thread_unclaimed(&self, _thread_id: Uuid) -> EngineResult<bool> {
        Ok(true)
    }

    async fn announce_cancel(&self, run_id: Uuid) {
        self.announced.lock().unwrap().push(run_id);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_announced_by_one_instance_reaches_the_other_over_redis() {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let options = RedisBusOptions {
        prefix: format!("cancels-{}", Uuid::now_v7()),
        ..RedisBusOptions::new(url)
    };
    let (inner_a, inner_b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let a = RedisCancels::new(
        inner_a.clone(),
        RedisBus::connect(options.clone()).await.expect("Redis"),
    );
    let b = RedisCancels::new(
        inner_b.clone(),
        RedisBus::connect(options).await.expect("Redis"),
    );
    let mut heard = b.announced_cancels();
    // B's listener subscribes in the background: announce until it hears one.
    let probe = Uuid::now_v7();
    let first = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            a.announce_cancel(probe).await;
            if let Ok(Some(run_id)) =
                tokio::time::timeout(Duration::from_millis(100), heard.next()).await
            {
                return run_id;
            }
        }
    })
    .await
    .expect("B hears A's cancels");
    assert_eq!(first, probe);
    let run = Uuid::now_v7();
    a.announce_cancel(run).await;
    let next = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match heard.next().await {
                Some(run_id) if run_id == probe => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("B hears the cancel");
    assert_eq!(next, Some(run));
    assert!(
        inner_a.announced.lock().unwrap().is_empty(),
        "the cancels went over Redis, not the wrapped coordinator"
    );
}
