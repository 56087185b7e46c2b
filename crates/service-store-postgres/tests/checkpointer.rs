//! The shared checkpointer suite, run against the PostgreSQL saver, each test in a
//! fresh schema.

mod support;

use std::sync::Arc;

use service_conformance::checkpointer::SaverUnderTest;
use service_store::SystemClock;

async fn postgres_saver() -> SaverUnderTest {
    let backend = support::fresh_store(Arc::new(SystemClock), 1000).await;
    SaverUnderTest {
        saver: backend.checkpointer(),
        guard: Box::new(backend),
    }
}

service_conformance::checkpointer_tests!(postgres_saver);
