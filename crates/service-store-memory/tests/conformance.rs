//! The shared conformance suite, run against the in-memory driver.

use service_conformance::TestEnv;
use service_store::Store;
use service_store_memory::{MemoryOptions, memory_store};

async fn factory(env: TestEnv) -> Store {
    memory_store(MemoryOptions {
        clock: env.clock,
        limits: env.limits,
        index: env.index,
    })
}

service_conformance::conformance_tests!(factory);
