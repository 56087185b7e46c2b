//! Starting the engine's tasks and stopping them: workers, sweepers, crons,
//! recovery, the webhook schedule, the delayed-run timer and the messengers to other
//! instances. Every task is tracked and ends on shutdown.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::Engine;
use crate::drive::sleep_or_forever;

impl Engine {
    /// Starts the workers and background tasks; returns immediately.
    pub fn start(&self) {
        let workers = TaskTracker::new();
        for _ in 0..self.config().run_concurrency.max(1) {
            let worker =
                |engine: Engine| workers.track_future(async move { engine.worker_loop().await });
            self.spawn_task(worker);
        }
        workers.close();
        if self.inner.coordinator.tuning().is_some() {
            // Taken now, so no announcement is missed before the task first polls it.
            let cancels = self.inner.coordinator.announced_cancels();
            self.spawn_task(move |engine| async move {
                engine.relay_announced_cancels(cancels, workers).await
            });
        }
        self.spawn_task(|engine| async move { engine.sweep_loop().await });
        self.spawn_task(|engine| async move { engine.cron_loop().await });
        self.spawn_task(|engine| async move { engine.recovery_loop().await });
        self.spawn_task(|engine| async move { engine.relay_other_work().await });
        self.spawn_task(|engine| async move { engine.time_delayed_runs().await });
        if let Some(webhooks) = self.inner.webhooks.clone() {
            let stop = self.inner.shutdown.clone();
            self.spawn_task(move |_| async move { webhooks.run(stop).await });
        }
        if let Some(spacing) = self.inner.coordinator.tuning().map(|t| t.announce_spacing) {
            self.spawn_task(
                move |engine| async move { engine.announce_queued_work(spacing).await },
            );
        }
    }

    /// Spawns a task on a clone of the engine, tracked so shutdown waits for it.
    fn spawn_task<Task>(&self, task: impl FnOnce(Engine) -> Task)
    where
        Task: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.tasks.spawn(task(self.clone()));
    }

    /// Stops claiming runs, lets in-flight runs finish within the grace period, then
    /// cancels what is left and waits for the workers to settle it.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        let grace = self.config().shutdown_grace;
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            let running = self.inner.active.stop_all();
            tracing::warn!(runs = running, "shutdown grace elapsed, cancelling runs");
            if tokio::time::timeout(Duration::from_secs(3), self.inner.tasks.wait())
                .await
                .is_err()
            {
                tracing::error!("workers did not stop within the shutdown budget");
            }
        }
        // Every run is settled and its first attempt started; those still in flight
        // get their timeout (an unanswered one is attempted again after its lease).
        if let Some(webhooks) = &self.inner.webhooks {
            webhooks.drain().await;
        }
        // Every run is settled: streams that would outlive them (a thread's) end now.
        self.inner.bus.close_all().await;
        self.inner.coordinator.shutdown().await;
    }

    /// Passes other instances' announcements (and their fallback polls) on to one
    /// idle worker, so an idle instance searches the queue once per period, not once
    /// per worker. Their runs may be delayed ones, so the timer looks again too.
    async fn relay_other_work(&self) {
        loop {
            tokio::select! {
                () = self.inner.coordinator.other_work() => {
                    self.inner.scheduler.delays_changed();
                    self.inner.scheduler.queue_changed();
                }
                () = self.inner.shutdown.cancelled() => return,
            }
        }
    }

    /// Stops the runs executing here whose cancels another instance announced. It
    /// ends with the workers, not at the shutdown signal, so a run still executing in
    /// the shutdown grace is stopped at once by a cancel from elsewhere too.
    async fn relay_announced_cancels(
        &self,
        mut cancels: BoxStream<'static, Uuid>,
        workers: TaskTracker,
    ) {
        loop {
            tokio::select! {
                Some(run_id) = cancels.next() => {
                    // The stored flag does not say whether the cancel is a rollback, so
                    // neither does its announcement: the run stops as the poll of the
                    // flag would stop it.
                    self.inner.active.stop(run_id, false);
                }
                () = workers.wait() => return,
            }
        }
    }

    /// Tells other instances about queued work, one announcement at a time and at
    /// most one per the coordinator's spacing: a request made meanwhile is answered by
    /// the next, which follows the request's commit, so a burst of runs costs a few
    /// announcements, not one each. Others need them only once this instance's own
    /// workers are busy, so the spacing delays little work.
    async fn announce_queued_work(&self, spacing: Duration) {
        loop {
            tokio::select! {
                () = self.inner.scheduler.announcement_requested() => {
                    self.inner.coordinator.announce_work().await;
                    if !spacing.is_zero() {
                        tokio::select! {
                            () = tokio::time::sleep(spacing) => {}
                            () = self.inner.shutdown.cancelled() => {}
                        }
                    }
                }
                () = self.inner.shutdown.cancelled() => {
                    // Runs this instance queued and will not start are others' now.
                    self.inner.coordinator.announce_work().await;
                    return;
                }
            }
        }
    }

    /// Sleeps until the earliest delayed run is due, then has a worker search the
    /// queue; looks again whenever a delayed run is queued.
    async fn time_delayed_runs(&self) {
        loop {
            let changed = self.inner.scheduler.delays_change();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = self.now();
            let wait = match self.store().runs().next_available_at(now).await {
                Ok(due) => due.map(|due| {
                    let micros = (due.unix_micros() - now.unix_micros()).max(0) as u64;
                    Duration::from_micros(micros)
                }),
                Err(error) => {
                    tracing::error!(%error, "reading the next delayed run failed");
                    Some(Duration::from_secs(1))
                }
            };
            tokio::select! {
                () = &mut changed => {}
                () = sleep_or_forever(wait) => self.inner.scheduler.queue_changed(),
                () = self.inner.shutdown.cancelled() => return,
            }
        }
    }
}
