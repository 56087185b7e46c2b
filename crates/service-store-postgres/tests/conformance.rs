//! The shared conformance suite (every rule plus the proptest model tests) against
//! the PostgreSQL driver, each test in a fresh schema.

mod support;

use service_conformance::TestEnv;
use service_store::Store;

async fn factory(env: TestEnv) -> Store {
    support::fresh_store(env.clock, env.limits.max_page_size())
        .await
        .store()
}

service_conformance::conformance_tests!(factory, without: [semantic_search]);
