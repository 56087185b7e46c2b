//! Crons as a caller sees them.

use service_types::{Cron, CronCreate, CronPatch, CronSearch};
use uuid::Uuid;

use super::View;
use crate::{CronSearchPage, EngineResult};

/// Crons within the caller's scope; a cron's assistant must be one the caller may
/// read, when it is made and whenever a patch names another.
#[derive(Clone, Copy, Debug)]
pub struct Crons<'a>(View<'a>);

impl<'a> Crons<'a> {
    pub(super) fn new(view: View<'a>) -> Self {
        Self(view)
    }

    async fn check(self, cron_id: Uuid) -> EngineResult<()> {
        self.0
            .engine
            .cron_within(cron_id, self.0.caller.scope())
            .await
    }

    /// Creates a cron, on a thread within the caller's scope or stateless; its
    /// firings run within that scope.
    pub async fn create(self, thread_id: Option<Uuid>, body: CronCreate) -> EngineResult<Cron> {
        self.0
            .engine
            .create_cron(self.0.caller, thread_id, body)
            .await
    }

    /// Reads a cron.
    pub async fn get(self, cron_id: Uuid) -> EngineResult<Cron> {
        self.check(cron_id).await?;
        self.0.engine.get_cron(cron_id).await
    }

    /// Patches a cron.
    pub async fn update(self, cron_id: Uuid, body: CronPatch) -> EngineResult<Cron> {
        self.0
            .engine
            .update_cron(self.0.caller, cron_id, body)
            .await
    }

    /// Deletes a cron.
    pub async fn delete(self, cron_id: Uuid) -> EngineResult<()> {
        self.check(cron_id).await?;
        self.0.engine.delete_cron(cron_id).await
    }

    /// One page of the caller's crons.
    pub async fn search(self, body: CronSearch) -> EngineResult<CronSearchPage> {
        let enforced = self.0.caller.scope().enforced();
        self.0.engine.search_crons(body, enforced).await
    }

    /// Counts the caller's crons.
    pub async fn count(self, body: CronSearch) -> EngineResult<u64> {
        let enforced = self.0.caller.scope().enforced();
        self.0.engine.count_crons(body, enforced).await
    }
}
