//! The shared stream bus suite, run against the Redis bus on the machine's Redis
//! (REDIS_URL, default redis://127.0.0.1:6379). Each rule has keys of its own under a
//! fresh prefix; a peer is a second bus (another connection and listener) on them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use service_conformance::bus::{BusBounds, BusHarness};
use service_engine::bus::{StreamBus, Topic};
use service_redis::{RedisBus, RedisBusOptions};
use uuid::Uuid;

struct OneRedis {
    url: String,
    prefix: String,
}

impl OneRedis {
    fn new() -> Self {
        Self {
            url: std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
            prefix: format!("conformance-{}", Uuid::now_v7()),
        }
    }

    fn options(&self, bounds: BusBounds) -> RedisBusOptions {
        RedisBusOptions {
            prefix: self.prefix.clone(),
            max_len: bounds.frames_per_topic as u64,
            retention: Duration::from_secs(120),
            idle_ttl: Duration::from_secs(120),
            ..RedisBusOptions::new(self.url.clone())
        }
    }
}

#[async_trait]
impl BusHarness for OneRedis {
    async fn bus(&self, bounds: BusBounds) -> Arc<dyn StreamBus> {
        RedisBus::connect(self.options(bounds))
            .await
            .expect("Redis")
    }

    async fn peer(&self, _bus: &Arc<dyn StreamBus>) -> Arc<dyn StreamBus> {
        let bounds = service_conformance::bus::BOUNDS;
        RedisBus::connect(self.options(bounds))
            .await
            .expect("Redis")
    }

    async fn age_out(&self, _bus: &Arc<dyn StreamBus>, topic: Topic) {
        // What the retention expiry does, now.
        let stream = match topic {
            Topic::Run(id) => format!("{}:run:{id}", self.prefix),
            Topic::Thread(id) => format!("{}:thread:{id}", self.prefix),
        };
        let client = redis::Client::open(self.url.as_str()).expect("a Redis URL");
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("Redis");
        let _: () = redis::cmd("DEL")
            .arg(&stream)
            .arg(format!("{stream}:meta"))
            .query_async(&mut connection)
            .await
            .expect("expired");
    }
}

service_conformance::bus_tests!(OneRedis::new());
