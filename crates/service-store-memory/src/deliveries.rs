use async_trait::async_trait;
use service_store::page::paginate;
use service_store::{
    AttemptOutcome, DeliveriesRepo, DeliveryQuery, DeliveryRecord, StoreError, StoreResult,
};
use service_types::{Delivery, Timestamp};
use uuid::Uuid;

use crate::core::MemoryCore;

fn not_found(delivery_id: Uuid) -> StoreError {
    StoreError::not_found(format!("Delivery {delivery_id} not found"))
}

#[async_trait]
impl DeliveriesRepo for MemoryCore {
    async fn get(&self, delivery_id: Uuid) -> StoreResult<Option<DeliveryRecord>> {
        Ok(self.state.lock().deliveries.get(&delivery_id).cloned())
    }

    async fn list(&self, run_id: Uuid, query: &DeliveryQuery) -> StoreResult<Vec<Delivery>> {
        let limit = self.env.limits.search(query.limit)?;
        let core = self.state.lock();
        let rows = core
            .deliveries_by_run
            .get(&run_id)
            .into_iter()
            .flatten()
            .filter_map(|(_, id)| core.deliveries.get(id))
            .filter(|record| {
                query
                    .status
                    .is_none_or(|status| record.delivery.status == status)
                    && query
                        .enforced
                        .as_ref()
                        .is_none_or(|enforced| enforced.admits(&record.run_metadata))
            })
            .map(|record| record.delivery.clone());
        Ok(paginate(rows, query.offset, Some(limit)))
    }

    async fn claim(
        &self,
        delivery_id: Uuid,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let mut core = self.state.lock();
        let record = core
            .deliveries
            .get_mut(&delivery_id)
            .ok_or_else(|| not_found(delivery_id))?;
        if !record.is_due(now) {
            return Ok(None);
        }
        record.begin_attempt(now, lease_until);
        Ok(Some(record.clone()))
    }

    async fn claim_due(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let limit = self.env.limits.bounded(Some(limit));
        let mut core = self.state.lock();
        let mut due: Vec<(Timestamp, Uuid)> = core
            .deliveries
            .values()
            .filter(|record| record.is_due(now))
            .filter_map(|record| {
                record
                    .delivery
                    .next_attempt_at
                    .map(|at| (at, record.delivery.delivery_id))
            })
            .collect();
        due.sort();
        let mut claimed = Vec::new();
        for (_, id) in due.into_iter().take(limit) {
            if let Some(record) = core.deliveries.get_mut(&id) {
                record.begin_attempt(now, lease_until);
                claimed.push(record.clone());
            }
        }
        Ok(claimed)
    }

    async fn finish_attempt(
        &self,
        delivery_id: Uuid,
        outcome: AttemptOutcome,
    ) -> StoreResult<DeliveryRecord> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let record = core
            .deliveries
            .get_mut(&delivery_id)
            .ok_or_else(|| not_found(delivery_id))?;
        record.finish_attempt(outcome, now)?;
        Ok(record.clone())
    }

    async fn replay(&self, run_id: Uuid, delivery_id: Uuid) -> StoreResult<Delivery> {
        let now = self.env.clock.now();
        let mut core = self.state.lock();
        let record = core
            .deliveries
            .get_mut(&delivery_id)
            .filter(|record| record.delivery.run_id == run_id)
            .ok_or_else(|| not_found(delivery_id))?;
        record.replay(now)?;
        Ok(record.delivery.clone())
    }

    async fn purge_expired(&self, now: Timestamp) -> StoreResult<u64> {
        let mut core = self.state.lock();
        let mut purged = 0;
        for record in core.deliveries.values_mut() {
            purged += u64::from(record.purge_if_expired(now));
        }
        Ok(purged)
    }

    async fn count_awaiting_retry(&self) -> StoreResult<u64> {
        let core = self.state.lock();
        let waiting = core
            .deliveries
            .values()
            .filter(|record| record.awaits_retry())
            .count();
        Ok(waiting as u64)
    }
}
