//! Idempotency keys: a retried request replays the recorded response.

use async_trait::async_trait;
use service_types::Timestamp;

use crate::StoreResult;

/// A recorded HTTP response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers to replay.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// What [`IdempotencyRepo::begin`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Begin {
    /// The caller holds the key and must `complete` or `abandon` it.
    Acquired,
    /// A request with this key is still being handled.
    InProgress,
    /// A request with this key finished; replay its response.
    Completed(StoredResponse),
    /// The key was used with a different request.
    FingerprintMismatch,
}

/// The idempotency repository. Keys are opaque: the caller scopes them (per user).
#[async_trait]
pub trait IdempotencyRepo: Send + Sync {
    /// Atomically claims `key` for a request with `fingerprint` unless a live entry
    /// exists (one past `expires_at` counts as absent). Of concurrent duplicates,
    /// exactly one gets `Acquired`.
    async fn begin(
        &self,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Begin>;

    /// Records the response of the held key.
    async fn complete(&self, key: &str, response: StoredResponse) -> StoreResult<()>;

    /// Releases a held key after a failure, so a retry runs again.
    async fn abandon(&self, key: &str) -> StoreResult<()>;

    /// Removes entries expired at or before `now`; returns how many.
    async fn expire(&self, now: Timestamp) -> StoreResult<u64>;
}
