//! The shared stream bus suite, run against the in-memory bus.

use std::sync::Arc;

use async_trait::async_trait;
use service_conformance::bus::{BusBounds, BusHarness};
use service_engine::bus::{MemoryBus, MemoryBusLimits, StreamBus, Topic};
use uuid::Uuid;

/// Closed topics the bus keeps replayable: more than a rule closes.
const RETAINED_TOPICS: usize = 32;

/// The in-memory bus: its backend is the process, so another handle on it is the same
/// bus.
struct OneProcess;

#[async_trait]
impl BusHarness for OneProcess {
    async fn bus(&self, bounds: BusBounds) -> Arc<dyn StreamBus> {
        MemoryBus::new(MemoryBusLimits {
            max_frames_per_topic: bounds.frames_per_topic,
            max_retained_topics: RETAINED_TOPICS,
            ..MemoryBusLimits::default()
        })
    }

    async fn peer(&self, bus: &Arc<dyn StreamBus>) -> Arc<dyn StreamBus> {
        bus.clone()
    }

    async fn age_out(&self, bus: &Arc<dyn StreamBus>, _topic: Topic) {
        // Retention is by count: closing as many newer topics evicts every older one.
        for _ in 0..RETAINED_TOPICS {
            let newer = Topic::Run(Uuid::new_v4());
            bus.open(newer).await;
            bus.close(newer).await;
        }
    }
}

service_conformance::bus_tests!(OneProcess);
