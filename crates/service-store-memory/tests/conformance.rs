//! The shared conformance suite, run against the in-memory driver.

use std::sync::Arc;

use service_conformance::{TestEnv, TestStore};
use service_graph::InMemorySaver;
use service_store_memory::{MemoryOptions, memory_store};

async fn factory(env: TestEnv) -> TestStore {
    let saver = Arc::new(InMemorySaver::new());
    let store = memory_store(MemoryOptions {
        clock: env.clock,
        limits: env.limits,
        index: env.index,
        checkpoints: Some(saver.clone()),
    });
    TestStore {
        store,
        checkpointer: saver,
    }
}

service_conformance::conformance_tests!(factory);
