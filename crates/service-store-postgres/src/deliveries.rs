//! Webhook deliveries. Due rows are picked in SQL (`FOR UPDATE SKIP LOCKED`, so each
//! goes to one caller); the state machine is the shared `DeliveryRecord` code, applied
//! to locked rows and written back in the same transaction, except on the per-delivery
//! path (claim, finish), where it is one statement each whose agreement with that code
//! the conformance suite proves.

use async_trait::async_trait;
use deadpool_postgres::Transaction;
use service_store::{
    AttemptOutcome, DeliveriesRepo, DeliveryQuery, DeliveryRecord, StoreError, StoreResult,
};
use service_types::{Delivery, Timestamp};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::{
    ASYNC_COMMIT, Built, Cached, Columns, Db, Sql, at, count, enum_from, enum_text, object,
    push_where, static_sql, ts,
};
use crate::error::store_error;
use crate::filter::containment_condition;

pub(crate) const COLUMNS: &str = "delivery_id, run_id, thread_id, status, attempt, last_error, \
    next_attempt_at, payload_truncated, replayable, created_at, updated_at, url, payload, \
    retain_until, run_metadata";

fn not_found(delivery_id: Uuid) -> StoreError {
    StoreError::not_found(format!("Delivery {delivery_id} not found"))
}

fn delivery(row: &Row) -> StoreResult<Delivery> {
    let row = Columns::of(row, "webhook_deliveries");
    let next: Option<chrono::DateTime<chrono::Utc>> = row.column("next_attempt_at")?;
    let attempt: i32 = row.column("attempt")?;
    Ok(Delivery {
        delivery_id: row.column("delivery_id")?,
        run_id: row.column("run_id")?,
        thread_id: row.column("thread_id")?,
        status: enum_from(row.column("status")?, "status")?,
        attempt: u32::try_from(attempt).unwrap_or_default(),
        last_error: row.column("last_error")?,
        next_attempt_at: next.map(ts),
        payload_truncated: row.column("payload_truncated")?,
        replayable: row.column("replayable")?,
        created_at: ts(row.column("created_at")?),
        updated_at: ts(row.column("updated_at")?),
        destination: None,
    })
}

fn record(row: &Row) -> StoreResult<DeliveryRecord> {
    let delivery = delivery(row)?;
    let row = Columns::of(row, "webhook_deliveries");
    let payload: Option<serde_json::Value> = row.column("payload")?;
    let retain: Option<chrono::DateTime<chrono::Utc>> = row.column("retain_until")?;
    Ok(DeliveryRecord {
        delivery,
        url: row.column("url")?,
        payload: payload.map(|value| object(value, "payload")).transpose()?,
        retain_until: retain.map(ts),
        run_metadata: object(row.column("run_metadata")?, "run_metadata")?,
    })
}

/// Writes back the mutable columns of a row changed by the state machine.
async fn write(client: &Transaction<'_>, record: &DeliveryRecord) -> StoreResult<()> {
    let d = &record.delivery;
    client
        .execute_cached(
            "UPDATE webhook_deliveries SET status = $2, attempt = $3, last_error = $4,
                 next_attempt_at = $5, replayable = $6, updated_at = $7, payload = $8,
                 retain_until = $9
             WHERE delivery_id = $1",
            &[
                &d.delivery_id,
                &enum_text(&d.status)?,
                &i32::try_from(d.attempt).unwrap_or(i32::MAX),
                &d.last_error,
                &d.next_attempt_at.map(at),
                &d.replayable,
                &at(d.updated_at),
                &record.payload.clone().map(serde_json::Value::Object),
                &record.retain_until.map(at),
            ],
        )
        .await
        .map_err(store_error)?;
    Ok(())
}

impl Db {
    async fn exists(&self, delivery_id: Uuid) -> StoreResult<bool> {
        let client = self.client().await?;
        let row = client
            .query_opt_cached(
                "SELECT 1 FROM webhook_deliveries WHERE delivery_id = $1",
                &[&delivery_id],
            )
            .await
            .map_err(store_error)?;
        Ok(row.is_some())
    }

    /// Locks one row, lets `change` run the state machine on it, writes it back.
    async fn change_delivery<T: Send>(
        &self,
        delivery_id: Uuid,
        change: impl FnOnce(&mut DeliveryRecord) -> StoreResult<Option<T>> + Send,
    ) -> StoreResult<Option<T>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let row = tx
            .query_opt_cached(
                static_sql!(
                    "SELECT {COLUMNS} FROM webhook_deliveries WHERE delivery_id = $1 FOR UPDATE"
                ),
                &[&delivery_id],
            )
            .await
            .map_err(store_error)?
            .ok_or_else(|| not_found(delivery_id))?;
        let mut current = record(&row)?;
        let result = change(&mut current)?;
        if result.is_some() {
            write(&tx, &current).await?;
            tx.commit().await.map_err(store_error)?;
        }
        Ok(result)
    }
}

#[async_trait]
impl DeliveriesRepo for Db {
    async fn get(&self, delivery_id: Uuid) -> StoreResult<Option<DeliveryRecord>> {
        let client = self.client().await?;
        client
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM webhook_deliveries WHERE delivery_id = $1"),
                &[&delivery_id],
            )
            .await
            .map_err(store_error)?
            .map(|row| record(&row))
            .transpose()
    }

    async fn list(&self, run_id: Uuid, query: &DeliveryQuery) -> StoreResult<Vec<Delivery>> {
        let limit = self.limits.search(query.limit)?;
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM webhook_deliveries"));
        let run = sql.bind(run_id);
        let mut conditions = vec![format!("run_id = {run}")];
        if let Some(status) = query.status {
            let p = sql.bind(enum_text(&status)?);
            conditions.push(format!("status = {p}"));
        }
        if let Some(enforced) = &query.enforced {
            match containment_condition(&mut sql, "run_metadata", enforced.0.clone()) {
                Some(condition) => conditions.extend(condition),
                None => return Ok(Vec::new()),
            }
        }
        push_where(&mut sql, &conditions);
        let limit_p = sql.bind(count(limit));
        let offset_p = sql.bind(count(query.offset));
        sql.push(&format!(
            " ORDER BY created_at, delivery_id LIMIT {limit_p} OFFSET {offset_p}"
        ));
        let client = self.client().await?;
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        rows.iter().map(delivery).collect()
    }

    async fn claim(
        &self,
        delivery_id: Uuid,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<DeliveryRecord>> {
        // `DeliveryRecord::is_due` and `begin_attempt` in one statement: the row lock
        // it takes makes a concurrent claim re-check the lease it set, and fail. Its
        // commit does not wait for the WAL flush: a lost claim leaves the row as it was
        // (pending, or delivering until its lease ends), so the attempt is made again,
        // which at-least-once allows; the row itself was written with the run's settle,
        // flushed.
        let client = self.client().await?;
        let row = client
            .query_opt_cached(
                static_sql!(
                    "UPDATE webhook_deliveries
                     SET status = 'delivering', attempt = attempt + 1,
                         next_attempt_at = $3, updated_at = $2
                     FROM {ASYNC_COMMIT}
                     WHERE delivery_id = $1 AND status IN ('pending', 'delivering')
                       AND next_attempt_at <= $2
                     RETURNING {COLUMNS}"
                ),
                &[&delivery_id, &at(now), &at(lease_until)],
            )
            .await
            .map_err(store_error)?;
        match row {
            Some(row) => record(&row).map(Some),
            None if self.exists(delivery_id).await? => Ok(None),
            None => Err(not_found(delivery_id)),
        }
    }

    async fn claim_due(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let limit = self.limits.bounded(Some(limit));
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let rows = tx
            .query_cached(
                static_sql!(
                    "SELECT {COLUMNS} FROM webhook_deliveries
                     WHERE status IN ('pending', 'delivering') AND next_attempt_at <= $1
                     ORDER BY next_attempt_at, delivery_id
                     LIMIT $2 FOR UPDATE SKIP LOCKED"
                ),
                &[&at(now), &count(limit)],
            )
            .await
            .map_err(store_error)?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut current = record(row)?;
            if !current.is_due(now) {
                continue;
            }
            current.begin_attempt(now, lease_until);
            write(&tx, &current).await?;
            claimed.push(current);
        }
        tx.commit().await.map_err(store_error)?;
        Ok(claimed)
    }

    async fn finish_attempt(
        &self,
        delivery_id: Uuid,
        outcome: AttemptOutcome,
    ) -> StoreResult<DeliveryRecord> {
        // `DeliveryRecord::finish_attempt` in one statement per outcome (the payload is
        // never written back, only cleared on success). Committed without waiting for
        // the WAL flush, as the claim is: a lost outcome repeats the attempt.
        let now = at(self.now());
        let client = self.client().await?;
        let row = match &outcome {
            AttemptOutcome::Delivered => {
                client
                    .query_opt_cached(
                        static_sql!(
                            "UPDATE webhook_deliveries
                             SET status = 'delivered', next_attempt_at = NULL, payload = NULL,
                                 replayable = false, updated_at = $2
                             FROM {ASYNC_COMMIT}
                             WHERE delivery_id = $1 AND status = 'delivering'
                             RETURNING {COLUMNS}"
                        ),
                        &[&delivery_id, &now],
                    )
                    .await
            }
            AttemptOutcome::Retry { error, retry_at } => {
                client
                    .query_opt_cached(
                        static_sql!(
                            "UPDATE webhook_deliveries
                             SET status = 'pending', last_error = $3, next_attempt_at = $4,
                                 replayable = payload IS NOT NULL, updated_at = $2
                             FROM {ASYNC_COMMIT}
                             WHERE delivery_id = $1 AND status = 'delivering'
                             RETURNING {COLUMNS}"
                        ),
                        &[&delivery_id, &now, error, &at(*retry_at)],
                    )
                    .await
            }
            AttemptOutcome::Dead {
                error,
                retain_until,
            } => {
                client
                    .query_opt_cached(
                        static_sql!(
                            "UPDATE webhook_deliveries
                             SET status = 'dead', last_error = $3, next_attempt_at = NULL,
                                 retain_until = $4, replayable = payload IS NOT NULL,
                                 updated_at = $2
                             FROM {ASYNC_COMMIT}
                             WHERE delivery_id = $1 AND status = 'delivering'
                             RETURNING {COLUMNS}"
                        ),
                        &[&delivery_id, &now, error, &at(*retain_until)],
                    )
                    .await
            }
        }
        .map_err(store_error)?;
        match row {
            Some(row) => record(&row),
            None if self.exists(delivery_id).await? => {
                Err(DeliveryRecord::no_attempt_in_flight(delivery_id))
            }
            None => Err(not_found(delivery_id)),
        }
    }

    async fn replay(&self, run_id: Uuid, delivery_id: Uuid) -> StoreResult<Delivery> {
        let now = self.now();
        let replayed = self
            .change_delivery(delivery_id, |record| {
                if record.delivery.run_id != run_id {
                    return Err(not_found(delivery_id));
                }
                record.replay(now)?;
                Ok(Some(record.delivery.clone()))
            })
            .await?;
        replayed.ok_or_else(|| not_found(delivery_id))
    }

    async fn purge_expired(&self, now: Timestamp) -> StoreResult<u64> {
        // `DeliveryRecord::purge_if_expired` in SQL: dead rows past retention lose
        // their payload and with it replayability.
        let client = self.client().await?;
        client
            .execute_cached(
                "UPDATE webhook_deliveries SET payload = NULL, replayable = false, updated_at = $1
                 WHERE status = 'dead' AND payload IS NOT NULL AND retain_until <= $1",
                &[&at(now)],
            )
            .await
            .map_err(store_error)
    }

    async fn count_awaiting_retry(&self) -> StoreResult<u64> {
        // `DeliveryRecord::awaits_retry`, over the due index's rows (the statuses it holds).
        let client = self.client().await?;
        let row = client
            .query_one_cached(
                "SELECT count(*) FROM webhook_deliveries
                 WHERE status IN ('pending', 'delivering') AND last_error IS NOT NULL",
                &[],
            )
            .await
            .map_err(store_error)?;
        let waiting: i64 = Columns::of(&row, "webhook_deliveries").column_at(0)?;
        Ok(u64::try_from(waiting).unwrap_or_default())
    }
}
