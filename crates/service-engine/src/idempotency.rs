//! `Idempotency-Key`: a key claimed by the first request that carries it, then the
//! response recorded for replays, for the configured time.

use service_store::{Begin, StoredResponse};

use crate::{Engine, EngineResult};

impl Engine {
    /// Claims `key` for a request whose method, path, query and body hash to
    /// `fingerprint`; a key already claimed answers how (in progress, completed with
    /// its recorded response, or used for another request).
    pub async fn begin_idempotent(&self, key: &str, fingerprint: &str) -> EngineResult<Begin> {
        let now = self.now();
        let expires_at = now.plus_millis(self.config().idempotency_ttl.as_millis() as i64);
        Ok(self
            .store()
            .idempotency()
            .begin(key, fingerprint, now, expires_at)
            .await?)
    }

    /// Records the response of the request that claimed `key`, for its replays.
    pub async fn complete_idempotent(
        &self,
        key: &str,
        response: StoredResponse,
    ) -> EngineResult<()> {
        Ok(self.store().idempotency().complete(key, response).await?)
    }

    /// Releases `key` after a request that did not act, so a retry acts for real.
    pub async fn abandon_idempotent(&self, key: &str) -> EngineResult<()> {
        Ok(self.store().idempotency().abandon(key).await?)
    }
}
