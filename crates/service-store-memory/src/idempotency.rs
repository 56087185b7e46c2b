use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::Mutex;
use service_store::{Begin, IdempotencyRepo, StoreError, StoreResult, StoredResponse};
use service_types::Timestamp;

/// Idempotency entries by key.
#[derive(Debug, Default)]
pub(crate) struct MemoryIdempotency {
    state: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
struct Entry {
    fingerprint: String,
    expires_at: Timestamp,
    response: Option<StoredResponse>,
}

#[async_trait]
impl IdempotencyRepo for MemoryIdempotency {
    async fn begin(
        &self,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Begin> {
        let mut entries = self.state.lock();
        if let Some(entry) = entries.get(key).filter(|entry| entry.expires_at > now) {
            return Ok(if entry.fingerprint != fingerprint {
                Begin::FingerprintMismatch
            } else {
                match &entry.response {
                    Some(response) => Begin::Completed(response.clone()),
                    None => Begin::InProgress,
                }
            });
        }
        entries.insert(
            key.to_owned(),
            Entry {
                fingerprint: fingerprint.to_owned(),
                expires_at,
                response: None,
            },
        );
        Ok(Begin::Acquired)
    }

    async fn complete(&self, key: &str, response: StoredResponse) -> StoreResult<()> {
        let mut entries = self.state.lock();
        let entry = entries
            .get_mut(key)
            .ok_or_else(|| StoreError::not_found(format!("Idempotency key {key} is not held")))?;
        entry.response = Some(response);
        Ok(())
    }

    async fn abandon(&self, key: &str) -> StoreResult<()> {
        let mut entries = self.state.lock();
        if entries
            .get(key)
            .is_some_and(|entry| entry.response.is_none())
        {
            entries.remove(key);
        }
        Ok(())
    }

    async fn expire(&self, now: Timestamp) -> StoreResult<u64> {
        let mut entries = self.state.lock();
        let before = entries.len();
        entries.retain(|_, entry| entry.expires_at > now);
        Ok((before - entries.len()) as u64)
    }
}
