//! Idempotency keys: `begin` is one upsert that only takes over an expired entry,
//! so of concurrent duplicates exactly one acquires the key.

use async_trait::async_trait;
use serde_json::Value;
use service_store::{Begin, IdempotencyRepo, StoreError, StoreResult, StoredResponse};
use service_types::Timestamp;

use crate::db::{Cached, Columns, Db, at, decode, encode};
use crate::error::store_error;

/// How often `begin` looks again when the entry vanished between its two steps.
const BEGIN_ATTEMPTS: usize = 8;

#[async_trait]
impl IdempotencyRepo for Db {
    async fn begin(
        &self,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Begin> {
        let client = self.client().await?;
        for _ in 0..BEGIN_ATTEMPTS {
            let acquired = client
                .query_opt_cached(
                    "INSERT INTO idempotency_keys (key, fingerprint, expires_at)
                     VALUES ($1, $2, $4)
                     ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
                         expires_at = EXCLUDED.expires_at, response_status = NULL,
                         response_headers = NULL, response_body = NULL
                     WHERE idempotency_keys.expires_at <= $3
                     RETURNING 1",
                    &[&key, &fingerprint, &at(now), &at(expires_at)],
                )
                .await
                .map_err(store_error)?;
            if acquired.is_some() {
                return Ok(Begin::Acquired);
            }
            let Some(row) = client
                .query_opt_cached(
                    "SELECT fingerprint, response_status, response_headers, response_body
                     FROM idempotency_keys WHERE key = $1 AND expires_at > $2",
                    &[&key, &at(now)],
                )
                .await
                .map_err(store_error)?
            else {
                continue;
            };
            let row = Columns::of(&row, "idempotency_keys");
            let stored: String = row.column_at(0)?;
            if stored != fingerprint {
                return Ok(Begin::FingerprintMismatch);
            }
            let status: Option<i32> = row.column_at(1)?;
            return Ok(match status {
                None => Begin::InProgress,
                Some(status) => {
                    let headers: Option<Value> = row.column_at(2)?;
                    let body: Option<Vec<u8>> = row.column_at(3)?;
                    Begin::Completed(StoredResponse {
                        status: u16::try_from(status).unwrap_or(500),
                        headers: decode(
                            headers.unwrap_or(Value::Array(Vec::new())),
                            "response_headers",
                        )?,
                        body: body.unwrap_or_default(),
                    })
                }
            });
        }
        Err(StoreError::transient(
            "idempotency key changed repeatedly; retry",
        ))
    }

    async fn complete(&self, key: &str, response: StoredResponse) -> StoreResult<()> {
        let client = self.client().await?;
        let updated = client
            .execute_cached(
                "UPDATE idempotency_keys SET response_status = $2, response_headers = $3,
                     response_body = $4
                 WHERE key = $1",
                &[
                    &key,
                    &i32::from(response.status),
                    &encode(&response.headers)?,
                    &response.body,
                ],
            )
            .await
            .map_err(store_error)?;
        if updated == 0 {
            return Err(StoreError::not_found(format!(
                "Idempotency key {key} is not held"
            )));
        }
        Ok(())
    }

    async fn abandon(&self, key: &str) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute_cached(
                "DELETE FROM idempotency_keys WHERE key = $1 AND response_status IS NULL",
                &[&key],
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn expire(&self, now: Timestamp) -> StoreResult<u64> {
        let client = self.client().await?;
        client
            .execute_cached(
                "DELETE FROM idempotency_keys WHERE expires_at <= $1",
                &[&at(now)],
            )
            .await
            .map_err(store_error)
    }
}
