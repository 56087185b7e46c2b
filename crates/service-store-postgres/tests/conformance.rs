//! The shared conformance suite (every rule plus the proptest model tests) against
//! the PostgreSQL driver, each test in a fresh schema; the semantic rules on the
//! pgvector server (`PGVECTOR_TEST_URL`).

mod support;

use service_conformance::{TestEnv, TestStore};

async fn factory(env: TestEnv) -> TestStore {
    let store = support::fresh_store_with(env.clock, env.limits.max_page_size(), env.index).await;
    TestStore {
        store: store.store(),
        checkpointer: store.checkpointer(),
    }
}

service_conformance::conformance_tests!(factory);
