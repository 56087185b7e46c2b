//! Runs left `running` by an instance that died: their thread's execution claim is
//! free although the row says running. They are settled as errors, not re-queued,
//! because a run may already have had side effects that running it again would repeat.

use std::time::Duration;

use serde_json::json;
use service_store::{ActiveRunsQuery, Settlement, ThreadMirror};
use service_types::{Run, RunError, RunStatus, ThreadStatus};

use crate::Engine;
use crate::bus::Topic;
use crate::callbacks::CallbackBody;
use crate::run_options::RunOptions;

/// A run takes its claim only after the coordinator's claim delay (a second or so), or
/// a moment later under load; a run younger than this may have none yet and is left
/// alone.
const CLAIM_GRACE: Duration = Duration::from_secs(30);

impl Engine {
    pub(crate) async fn recovery_loop(&self) {
        let Some(interval) = self.inner.coordinator.tuning().map(|t| t.check_interval) else {
            return;
        };
        let period = interval * 10;
        loop {
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                () = self.inner.shutdown.cancelled() => return,
            }
            self.recover_orphaned_runs().await;
        }
    }

    /// Settles, as errors, running runs whose executor is gone. Returns how many.
    pub(crate) async fn recover_orphaned_runs(&self) -> usize {
        let query = ActiveRunsQuery {
            status: Some(RunStatus::Running),
            limit: Some(self.config().max_page_size),
            ..ActiveRunsQuery::default()
        };
        let running = match self.store().runs().active(&query).await {
            Ok(running) => running,
            Err(error) => {
                tracing::error!(%error, "listing running runs for recovery failed");
                return 0;
            }
        };
        let grace_start = self.now().plus_millis(-(CLAIM_GRACE.as_millis() as i64));
        let mut recovered = 0;
        for run in running {
            if self.inner.active.contains(run.run_id) || run.updated_at > grace_start {
                continue;
            }
            match self.inner.coordinator.thread_unclaimed(run.thread_id).await {
                Ok(true) => {
                    self.settle_orphan(&run).await;
                    recovered += 1;
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(run_id = %run.run_id, error = %error.chain(), "checking a run's executor failed")
                }
            }
        }
        recovered
    }

    async fn settle_orphan(&self, run: &Run) {
        let error = RunError::new(
            "ExecutorLost",
            "The instance executing this run stopped before it finished",
        );
        tracing::error!(run_id = %run.run_id, thread_id = %run.thread_id, assistant_id = %run.assistant_id, "recovering a run whose executor is gone");
        // It started, so its webhook reports the failure.
        let webhook = RunOptions::decode(run)
            .ok()
            .and_then(|options| options.webhook)
            .and_then(|url| {
                self.inner.settler.callbacks.request(CallbackBody {
                    run,
                    url: &url,
                    values: None,
                    error: Some(error.message.clone()),
                    interrupts: None,
                    reply: None,
                    started_at: run.updated_at,
                    ended_at: self.now(),
                })
            });
        let unrecorded_webhook = self.inner.settler.callbacks.unrecorded(webhook.as_ref());
        let settlement = Settlement {
            status: RunStatus::Error,
            error: Some(error.clone()),
            interrupted: false,
            webhook,
        };
        let settled = match self.store().runs().settle(run.run_id, settlement).await {
            Ok(settled) => settled,
            Err(failure) => {
                tracing::error!(run_id = %run.run_id, %failure, "settling an orphaned run failed");
                return;
            }
        };
        let mirror = ThreadMirror {
            status: ThreadStatus::Error,
            values: None,
            interrupts: Default::default(),
            error: Some(error.message.clone()),
        };
        let _ = self.store().threads().mirror(run.thread_id, mirror).await;
        self.inner
            .frames
            .publish_outcome(
                run.run_id,
                &json!({ "__error__": self.inner.frames.client_error(&error) }),
            )
            .await;
        self.inner.bus.close(Topic::Run(run.run_id)).await;
        self.wake_workers();
        if settled.changed {
            self.inner.settler.callbacks.send(
                settled.delivery,
                unrecorded_webhook,
                settled.run.status,
                false,
            );
        }
    }
}
