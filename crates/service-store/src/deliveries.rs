//! Webhook deliveries: the outbox rows and their state machine
//! (pending → delivering → delivered | dead), implemented once on [`DeliveryRecord`].

use async_trait::async_trait;
use serde_json::Value;
use service_types::{Delivery, DeliveryStatus, Metadata, RunStatus, Timestamp};
use uuid::Uuid;

use crate::containment::Enforced;
use crate::runs::{WebhookRequest, webhook_status};
use crate::{StoreError, StoreResult};

/// A delivery row as the store keeps it: the listed fields plus target and body.
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryRecord {
    /// The listed fields.
    pub delivery: Delivery,
    /// Target URL.
    pub url: String,
    /// The body to POST, stored at settle time; cleared on success or after retention.
    pub payload: Option<Metadata>,
    /// When a dead row's payload is cleared.
    pub retain_until: Option<Timestamp>,
    /// The metadata of the run that made it: deliveries outlive their thread, so
    /// ownership is checked against this, not against a thread that may be another's.
    pub run_metadata: Metadata,
}

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptOutcome {
    /// A 2xx answered: delivered, payload cleared.
    Delivered,
    /// Failed with attempts left: pending again, due at `retry_at`.
    Retry {
        /// Failure reason.
        error: String,
        /// When the next attempt is due.
        retry_at: Timestamp,
    },
    /// Attempts exhausted or host refused: dead, payload kept until `retain_until`.
    Dead {
        /// Failure reason.
        error: String,
        /// End of payload retention (now + retain_hours).
        retain_until: Timestamp,
    },
}

/// A run's delivery listing, oldest first (ties by delivery id).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeliveryQuery {
    /// Only this status.
    pub status: Option<DeliveryStatus>,
    /// Page size; above 1000 is rejected, absent means the max page size.
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
    /// Only rows whose run's metadata the server-set ownership filter admits.
    pub enforced: Option<Enforced>,
}

impl DeliveryRecord {
    /// The row a settle writes, its payload with `"status"`: pending and due now,
    /// attempt 0; or, when the webhook carries an inline lease, with its first attempt
    /// begun and leased until `now` plus the lease.
    pub fn at_settle(
        run_id: Uuid,
        thread_id: Uuid,
        status: RunStatus,
        interrupted: bool,
        webhook: WebhookRequest,
        now: Timestamp,
    ) -> Self {
        let lease_end = webhook.lease_end(now);
        let mut payload = webhook.payload;
        payload.insert(
            "status".to_owned(),
            Value::from(webhook_status(status, interrupted)),
        );
        let mut record = Self {
            delivery: Delivery {
                delivery_id: Uuid::now_v7(),
                run_id,
                thread_id,
                status: DeliveryStatus::Pending,
                attempt: 0,
                last_error: None,
                next_attempt_at: Some(now),
                payload_truncated: webhook.payload_truncated,
                replayable: true,
                created_at: now,
                updated_at: now,
                destination: None,
            },
            url: webhook.url,
            payload: Some(payload),
            retain_until: None,
            run_metadata: webhook.run_metadata,
        };
        if let Some(lease_end) = lease_end {
            record.begin_attempt(now, lease_end);
        }
        record
    }

    /// True when an attempt failed and the row waits for another: not delivered, not
    /// given up (a retry due later, or one in flight).
    pub fn awaits_retry(&self) -> bool {
        matches!(
            self.delivery.status,
            DeliveryStatus::Pending | DeliveryStatus::Delivering
        ) && self.delivery.last_error.is_some()
    }

    /// True when an attempt may start now: pending and due, or delivering with an
    /// expired lease (a stalled attempt whose worker died).
    pub fn is_due(&self, now: Timestamp) -> bool {
        let due = self.delivery.next_attempt_at.is_some_and(|at| at <= now);
        match self.delivery.status {
            DeliveryStatus::Pending | DeliveryStatus::Delivering => due,
            DeliveryStatus::Delivered | DeliveryStatus::Dead => false,
        }
    }

    /// Starts an attempt: delivering, attempt + 1, leased until `lease_until`.
    pub fn begin_attempt(&mut self, now: Timestamp, lease_until: Timestamp) {
        self.delivery.status = DeliveryStatus::Delivering;
        self.delivery.attempt = self.delivery.attempt.saturating_add(1);
        self.delivery.next_attempt_at = Some(lease_until);
        self.delivery.updated_at = now;
    }

    /// Records how the in-flight attempt ended; only a delivering row accepts it.
    pub fn finish_attempt(&mut self, outcome: AttemptOutcome, now: Timestamp) -> StoreResult<()> {
        if self.delivery.status != DeliveryStatus::Delivering {
            return Err(Self::no_attempt_in_flight(self.delivery.delivery_id));
        }
        match outcome {
            AttemptOutcome::Delivered => {
                self.delivery.status = DeliveryStatus::Delivered;
                self.delivery.next_attempt_at = None;
                self.payload = None;
            }
            AttemptOutcome::Retry { error, retry_at } => {
                self.delivery.status = DeliveryStatus::Pending;
                self.delivery.last_error = Some(error);
                self.delivery.next_attempt_at = Some(retry_at);
            }
            AttemptOutcome::Dead {
                error,
                retain_until,
            } => {
                self.delivery.status = DeliveryStatus::Dead;
                self.delivery.last_error = Some(error);
                self.delivery.next_attempt_at = None;
                self.retain_until = Some(retain_until);
            }
        }
        self.delivery.updated_at = now;
        self.sync_replayable();
        Ok(())
    }

    /// What finishing an attempt on a row with none in flight fails with.
    pub fn no_attempt_in_flight(delivery_id: Uuid) -> StoreError {
        StoreError::conflict(format!("Delivery {delivery_id} has no attempt in flight"))
    }

    /// Makes a not-yet-delivered row due now. Delivered: `Conflict` (HTTP 409); a dead
    /// row whose payload was already purged: `Conflict`. In flight: unchanged.
    pub fn replay(&mut self, now: Timestamp) -> StoreResult<()> {
        let id = self.delivery.delivery_id;
        match self.delivery.status {
            DeliveryStatus::Delivered => Err(StoreError::conflict(format!(
                "Delivery {id} was already delivered"
            ))),
            DeliveryStatus::Delivering => Ok(()),
            DeliveryStatus::Pending | DeliveryStatus::Dead => {
                if self.payload.is_none() {
                    return Err(StoreError::conflict(format!(
                        "Delivery {id} can no longer be replayed: it is dead and its payload was purged after its retention (retain_hours)"
                    )));
                }
                self.delivery.status = DeliveryStatus::Pending;
                self.delivery.next_attempt_at = Some(now);
                self.retain_until = None;
                self.delivery.updated_at = now;
                self.sync_replayable();
                Ok(())
            }
        }
    }

    /// Clears a dead row's payload once its retention ended; true when it did.
    pub fn purge_if_expired(&mut self, now: Timestamp) -> bool {
        let expired = self.delivery.status == DeliveryStatus::Dead
            && self.payload.is_some()
            && self.retain_until.is_some_and(|until| until <= now);
        if expired {
            self.payload = None;
            self.delivery.updated_at = now;
            self.sync_replayable();
        }
        expired
    }

    fn sync_replayable(&mut self) {
        self.delivery.replayable =
            self.payload.is_some() && self.delivery.status != DeliveryStatus::Delivered;
    }
}

/// The deliveries repository (optional: a custom store may lack it). Rows are written
/// by [`crate::RunsRepo::settle`]; deleting a thread or run leaves them.
#[async_trait]
pub trait DeliveriesRepo: Send + Sync {
    /// The row with its payload.
    async fn get(&self, delivery_id: Uuid) -> StoreResult<Option<DeliveryRecord>>;

    /// A run's deliveries, oldest first (ties by delivery id).
    async fn list(&self, run_id: Uuid, query: &DeliveryQuery) -> StoreResult<Vec<Delivery>>;

    /// Starts an attempt on one row if it is due (the inline first attempt); `None`
    /// when another worker holds it or it is not due.
    async fn claim(
        &self,
        delivery_id: Uuid,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<DeliveryRecord>>;

    /// Starts attempts on due rows, earliest due first, at most `limit` (bounded by
    /// the max page size); each row goes to one caller only.
    async fn claim_due(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<DeliveryRecord>>;

    /// Records the end of the in-flight attempt. Unknown: `NotFound`; no attempt in
    /// flight: `Conflict`.
    async fn finish_attempt(
        &self,
        delivery_id: Uuid,
        outcome: AttemptOutcome,
    ) -> StoreResult<DeliveryRecord>;

    /// Makes a not-yet-delivered row of `run_id` due now. Unknown id or another run's
    /// id: `NotFound` ("Delivery <id> not found"); delivered: `Conflict`.
    async fn replay(&self, run_id: Uuid, delivery_id: Uuid) -> StoreResult<Delivery>;

    /// Clears payloads of dead rows past retention; returns how many.
    async fn purge_expired(&self, now: Timestamp) -> StoreResult<u64>;

    /// How many rows await a retry ([`DeliveryRecord::awaits_retry`]).
    async fn count_awaiting_retry(&self) -> StoreResult<u64>;
}
