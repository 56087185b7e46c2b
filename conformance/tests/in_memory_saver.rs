//! The shared checkpointer suite, run against the in-memory saver.

use std::sync::Arc;

use service_conformance::checkpointer::SaverUnderTest;
use service_graph::InMemorySaver;

async fn memory_saver() -> SaverUnderTest {
    SaverUnderTest {
        saver: Arc::new(InMemorySaver::new()),
        guard: Box::new(()),
    }
}

service_conformance::checkpointer_tests!(memory_saver);
