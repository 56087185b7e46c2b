//! Edits of a thread's state (`POST`/`PATCH /threads/{id}/state`, supersteps) never
//! race a run of the thread: each is made under the thread's state hold
//! (`ThreadsRepo::hold_state`), taken only while no run is pending or running there,
//! and while it lives no run of the thread is claimed.

use std::future::Future;
use std::time::Duration;

use uuid::Uuid;

use crate::{Engine, EngineError, EngineResult, ErrorKind};

/// The hold's lease in minutes: how long a holder that died keeps the thread's runs
/// waiting.
const HOLD_LEASE_MINUTES: f64 = 1.0;

/// The longest an edit may take under its hold: half the lease, so an edit still going
/// is abandoned well before the lease could let a run start beside it.
const EDIT_LIMIT: Duration = Duration::from_secs(30);

impl Engine {
    /// Runs `edit` under `thread_id`'s state hold. A thread with an active run (or
    /// another edit in progress) is refused: 409 "Thread is busy with a running job.
    /// Cannot update state.".
    pub(crate) async fn editing_state<T>(
        &self,
        thread_id: Uuid,
        edit: impl Future<Output = EngineResult<T>>,
    ) -> EngineResult<T> {
        let until = self.now().plus_minutes(HOLD_LEASE_MINUTES);
        let hold = self.store().threads().hold_state(thread_id, until).await?;
        let result = tokio::time::timeout(EDIT_LIMIT, edit)
            .await
            .unwrap_or_else(|_| {
                Err(EngineError::new(
                    ErrorKind::Unavailable,
                    "The state update took too long and was abandoned",
                ))
            });
        if let Err(error) = self.store().threads().release_state(hold).await {
            // The lease frees the thread at the latest when it passes.
            tracing::warn!(%thread_id, %error, "releasing a state hold failed");
        }
        // Runs queued on the thread meanwhile waited for this release.
        self.wake_workers();
        result
    }
}
