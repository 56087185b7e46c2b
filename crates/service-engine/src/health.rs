//! What a health probe asks the engine.

use crate::{Engine, EngineError, EngineResult, ErrorKind};

impl Engine {
    /// One cheap round trip to the store. Any failure is `Unavailable` (the probe's
    /// 503); its cause stays in the error's source, for the log, not the client.
    pub async fn check_store(&self) -> EngineResult<()> {
        self.inner.store.ping().await.map_err(|error| {
            EngineError::new(ErrorKind::Unavailable, "The store did not answer").with_source(error)
        })
    }
}
