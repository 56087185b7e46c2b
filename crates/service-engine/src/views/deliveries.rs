//! Webhook deliveries as a caller sees them.

use service_store::DeliveryQuery;
use service_types::Delivery;
use uuid::Uuid;

use super::View;
use crate::EngineResult;

/// A run's deliveries, reached through its thread, and only those the caller's scope
/// admits: deliveries outlive their thread, and carry the owner of the run that made
/// them, so a later thread with the same id does not inherit them.
#[derive(Clone, Copy, Debug)]
pub struct Deliveries<'a>(View<'a>);

impl<'a> Deliveries<'a> {
    pub(super) fn new(view: View<'a>) -> Self {
        Self(view)
    }

    /// A run's deliveries, oldest first.
    pub async fn list(
        self,
        thread_id: Uuid,
        run_id: Uuid,
        query: &DeliveryQuery,
    ) -> EngineResult<Vec<Delivery>> {
        let scope = self.0.caller.scope();
        self.0.thread(thread_id).await?;
        self.0
            .engine
            .list_deliveries(thread_id, run_id, query, scope)
            .await
    }

    /// Attempts a delivery again now.
    pub async fn replay(
        self,
        thread_id: Uuid,
        run_id: Uuid,
        delivery_id: Uuid,
    ) -> EngineResult<Delivery> {
        let scope = self.0.caller.scope();
        self.0.thread(thread_id).await?;
        self.0
            .engine
            .replay_delivery(thread_id, run_id, delivery_id, scope)
            .await
    }
}
