//! The outbox sender: the engine's [`Webhooks`]. A settled run's delivery row is
//! attempted at once, under the lease its settle inserted it with; a failed attempt is
//! pending again with its next attempt due on the retry schedule ([`crate::schedule`]);
//! every later attempt starts by claiming its row with a lease, so two instances never
//! send one attempt at the same time, and a row whose sender died is due again when
//! its lease ends.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use serde_json::Value;
use service_engine::metrics::{DeliveryCounter, DeliveryOutcome};
use service_engine::trace_context::SpanKind;
use service_engine::{Outgoing, Webhooks};
use service_store::{AttemptOutcome, Clock, DeliveryRecord, Store};
use service_types::{Metadata, Timestamp};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::dispatch::{Attempt, AttemptError, Dispatcher, HttpDispatcher};
use crate::policy::{UrlPolicy, redact, redact_url};
use crate::schedule::{RetryQueue, RetryTimer};
use crate::signature::{ATTEMPT_HEADER, DELIVERY_ID_HEADER, SIGNATURE_HEADER, sign};
use crate::{WebhookSettings, payload};

/// Attempts in flight at once on one instance; due rows beyond it wait in the outbox.
const MAX_CONCURRENT_ATTEMPTS: usize = 64;
/// Rows claimed per search of the outbox.
const CLAIM_BATCH: usize = 32;
/// The longest shutdown waits for attempts in flight.
const MAX_DRAIN: Duration = Duration::from_secs(2);
/// How often a retry queue is asked for due jobs.
const QUEUE_POLL: Duration = Duration::from_secs(1);
/// With a retry queue, the outbox table is swept this many poll intervals apart.
const SWEEP_FACTOR: u32 = 12;

/// Sends run-completion webhooks from the store's delivery outbox.
#[derive(Clone, Debug)]
pub struct Outbox {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    settings: WebhookSettings,
    policy: UrlPolicy,
    dispatcher: Arc<dyn Dispatcher>,
    store: Store,
    clock: Arc<dyn Clock>,
    timer: RetryTimer,
    /// The durable schedule, when there is one.
    queue: std::sync::OnceLock<Arc<dyn RetryQueue>>,
    /// The engine's count of attempts by outcome.
    counter: std::sync::OnceLock<DeliveryCounter>,
    permits: Arc<Semaphore>,
    attempts: TaskTracker,
}

impl Outbox {
    /// An outbox over `store`'s deliveries that sends over HTTP.
    pub fn new(
        settings: WebhookSettings,
        store: Store,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AttemptError> {
        let dispatcher = Arc::new(HttpDispatcher::new(&settings)?);
        Ok(Self::with_dispatcher(settings, store, clock, dispatcher))
    }

    /// An outbox that sends through an embedder's dispatcher, which must pass each
    /// attempt's headers and body on unchanged.
    pub fn with_dispatcher(
        settings: WebhookSettings,
        store: Store,
        clock: Arc<dyn Clock>,
        dispatcher: Arc<dyn Dispatcher>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                policy: UrlPolicy::new(&settings),
                settings,
                dispatcher,
                store,
                clock,
                timer: RetryTimer::default(),
                queue: std::sync::OnceLock::new(),
                counter: std::sync::OnceLock::new(),
                permits: Arc::new(Semaphore::new(MAX_CONCURRENT_ATTEMPTS)),
                attempts: TaskTracker::new(),
            }),
        }
    }

    /// The settings it sends with.
    pub fn settings(&self) -> &WebhookSettings {
        &self.shared.settings
    }

    /// Schedules retries on `queue` (a durable one: they survive restarts) instead of
    /// the outbox table, which is then swept only now and then for rows whose job was
    /// lost. Set before the outbox runs; a second queue is ignored.
    pub fn with_retry_queue(self, queue: Arc<dyn RetryQueue>) -> Self {
        if self.shared.queue.set(queue).is_err() {
            tracing::warn!("the webhook outbox already has a retry queue; the new one is ignored");
        }
        self
    }
}

#[async_trait]
impl Webhooks for Outbox {
    fn check_url(&self, url: &str) -> Result<(), String> {
        if self.shared.delivers_itself(url).is_some() {
            return Ok(());
        }
        self.shared.policy.check(url).map(drop)
    }

    fn cap_payload(&self, payload: &mut Metadata) -> bool {
        payload::cap(payload, self.shared.settings.max_payload_bytes)
    }

    fn inline_lease(&self) -> Option<Duration> {
        Some(self.shared.lease())
    }

    fn count_deliveries(&self, counter: DeliveryCounter) {
        // One engine per outbox; a second would count into the first's metrics.
        let _ = self.shared.counter.set(counter);
    }

    fn send(&self, outgoing: Outgoing) {
        let shared = Arc::clone(&self.shared);
        // A child of the settling run's span: the POST's `traceparent` names it. A trace
        // not sampled makes no span: the attempt carries the settling run's scope on,
        // and its POST that trace's context (marked not sampled).
        let scope = service_engine::trace_context::span("webhook.deliver", SpanKind::Client);
        self.shared.attempts.spawn(scope.instrument(async move {
            let Ok(_permit) = Arc::clone(&shared.permits).acquire_owned().await else {
                return;
            };
            match outgoing {
                Outgoing::Recorded(delivery_id) => {
                    shared.attempt_now(delivery_id, Inline::Yes).await
                }
                Outgoing::Leased(record) => shared.attempt_leased(*record).await,
                Outgoing::Unrecorded { url, payload } => shared.best_effort(url, payload).await,
            }
        }));
    }

    async fn run(&self, stop: CancellationToken) {
        let shared = &self.shared;
        let mut next_purge = tokio::time::Instant::now();
        let mut next_sweep = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            if now >= next_purge {
                shared.purge_expired().await;
                next_purge = now + shared.settings.purge_interval;
            }
            let queue = shared.queue.get();
            let mut more = false;
            if let Some(queue) = queue {
                more |= shared.attempt_queued(queue.as_ref()).await;
            }
            // Without a queue the table is the schedule; with one, it is swept for
            // rows that lost their job (and, at boot, for what a crash left).
            if queue.is_none() || now >= next_sweep {
                more |= shared.attempt_due().await;
                next_sweep = now + shared.settings.poll_interval * SWEEP_FACTOR;
            }
            if more {
                continue;
            }
            let poll = match queue {
                Some(_) => QUEUE_POLL.min(shared.settings.poll_interval),
                None => shared.settings.poll_interval,
            };
            let wait = shared.timer.wait_for_next(shared.clock.now(), poll);
            tokio::select! {
                () = wait => {}
                () = stop.cancelled() => return,
            }
        }
    }

    async fn drain(&self) {
        let attempts = &self.shared.attempts;
        attempts.close();
        // Within the shutdown's own budget (SPEC: about 8 s in all): what is left goes
        // again after its lease.
        let budget = (self.shared.settings.timeout + Duration::from_secs(1)).min(MAX_DRAIN);
        if tokio::time::timeout(budget, attempts.wait()).await.is_err() {
            tracing::warn!(
                "webhook attempts still in flight at shutdown are retried after their lease"
            );
        }
    }
}

impl Shared {
    /// The URL, when the dispatcher delivers it itself (past the URL policy).
    fn delivers_itself(&self, url: &str) -> Option<url::Url> {
        url::Url::parse(url)
            .ok()
            .filter(|parsed| self.dispatcher.delivers_itself(parsed))
    }

    /// The lease an attempt holds its row with: past it, the row is due again. Twice
    /// the POST's timeout leaves room to record the outcome; a sender that died
    /// leaves its row to others once it ends.
    fn lease(&self) -> Duration {
        self.settings.timeout * 2 + Duration::from_secs(1)
    }

    fn lease_until(&self, now: Timestamp) -> Timestamp {
        now.plus_millis(self.lease().as_millis() as i64)
    }

    /// The first attempt of a row its settle leased to this sender: no claim. When
    /// the lease ended while the attempt waited for a permit, the row is due again
    /// and the outbox's search (here or on another instance) takes it instead, so
    /// two senders never hold it at once.
    async fn attempt_leased(&self, record: DeliveryRecord) {
        let lease_end = record.delivery.next_attempt_at;
        if lease_end.is_none_or(|end| end <= self.clock.now()) {
            tracing::debug!(
                delivery_id = %record.delivery.delivery_id,
                "a webhook's lease ended before its first attempt; the outbox retries it"
            );
            return;
        }
        self.attempt(record).await;
    }

    async fn attempt_now(&self, delivery_id: Uuid, inline: Inline) {
        let Some(deliveries) = self.store.deliveries() else {
            return;
        };
        let now = self.clock.now();
        match deliveries
            .claim(delivery_id, now, self.lease_until(now))
            .await
        {
            Ok(Some(record)) => match inline {
                Inline::Yes => self.attempt(record).await,
                Inline::No => self.attempt_from_outbox(record).await,
            },
            // Taken by another instance's search, or no longer due.
            Ok(None) => {}
            Err(error) => {
                // Still pending in the outbox: the next search takes it.
                tracing::warn!(%delivery_id, %error, "claiming a webhook delivery failed");
            }
        }
    }

    /// Takes due jobs off the retry queue, as many as free permits allow, and attempts
    /// each (claiming its row first); true when it took a full batch.
    async fn attempt_queued(self: &Arc<Self>, queue: &dyn RetryQueue) -> bool {
        let free = self.permits.available_permits().min(CLAIM_BATCH);
        if free == 0 {
            return false;
        }
        let now = self.clock.now();
        self.timer.passed(now);
        let due = match queue.take_due(now, free).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(error, "taking due webhook retries from the queue failed");
                return false;
            }
        };
        let full = due.len() == free && free == CLAIM_BATCH;
        for delivery_id in due {
            let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
                // Its row stays pending and due: the table sweep takes it.
                break;
            };
            let shared = Arc::clone(self);
            self.attempts.spawn(async move {
                let _permit = permit;
                shared.attempt_now(delivery_id, Inline::No).await;
            });
        }
        full
    }

    /// Claims due rows, as many as free permits allow, and attempts each; true when
    /// it claimed a full batch (more may be due).
    async fn attempt_due(self: &Arc<Self>) -> bool {
        let Some(deliveries) = self.store.deliveries() else {
            return false;
        };
        let free = self.permits.available_permits().min(CLAIM_BATCH);
        if free == 0 {
            return false;
        }
        let now = self.clock.now();
        self.timer.passed(now);
        let claimed = match deliveries.claim_due(now, self.lease_until(now), free).await {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "searching the webhook outbox failed");
                return false;
            }
        };
        let full = claimed.len() == free && free == CLAIM_BATCH;
        for record in claimed {
            let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
                // Freed permits were counted above; an inline attempt took one since.
                // The row's lease ends and it is due again.
                break;
            };
            let shared = Arc::clone(self);
            self.attempts.spawn(async move {
                let _permit = permit;
                shared.attempt_from_outbox(record).await;
            });
        }
        full
    }

    async fn purge_expired(&self) {
        let Some(deliveries) = self.store.deliveries() else {
            return;
        };
        match deliveries.purge_expired(self.clock.now()).await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(
                purged,
                "dead webhook deliveries past retention lost their payload"
            ),
            Err(error) => tracing::warn!(%error, "purging dead webhook deliveries failed"),
        }
    }

    /// An attempt the outbox makes (a retry, or a row whose sender died), in a
    /// `webhook.deliver` span of its own continuing the trace the run was created in
    /// (its `traceparent` is stored with the run), so its POST carries that trace on.
    async fn attempt_from_outbox(&self, record: DeliveryRecord) {
        let run = match service_engine::trace_context::enabled() {
            true => self
                .store
                .runs()
                .get(record.delivery.run_id)
                .await
                .ok()
                .flatten(),
            false => None,
        };
        // A run stored before `Run::traceparent` existed keeps it in its kwargs.
        let parent = run.as_ref().and_then(|run| {
            (run.traceparent.as_deref())
                .or_else(|| run.kwargs.get("traceparent").and_then(Value::as_str))
        });
        let scope =
            service_engine::trace_context::child_of(parent, "webhook.deliver", SpanKind::Client);
        scope.instrument(self.attempt(record)).await;
    }

    /// Sends a claimed row once and records how it ended.
    async fn attempt(&self, record: DeliveryRecord) {
        let Some(deliveries) = self.store.deliveries() else {
            return;
        };
        let delivery = &record.delivery;
        let (delivery_id, attempt) = (delivery.delivery_id, delivery.attempt);
        // Parsed once: the policy's check, the request and the logs all use it.
        let url = match self.delivers_itself(&record.url) {
            Some(url) => Ok(url),
            None => self.policy.permit(&record.url),
        };
        let target = || match &url {
            Ok(url) => redact_url(url),
            Err(_) => redact(&record.url),
        };
        let failure = match (&url, record.payload) {
            (Err(reason), _) => Some((AttemptError::refused(reason), true)),
            (Ok(_), None) => Some((AttemptError::new("the payload is no longer kept"), true)),
            (Ok(url), Some(payload)) => {
                let now = self.clock.now();
                let (headers, body) = self.signed(delivery_id, attempt, payload, now);
                let sent = self
                    .dispatcher
                    .post(Attempt {
                        url: url.clone(),
                        headers,
                        body,
                    })
                    .await;
                sent.err().map(|error| {
                    let refused = error.is_refusal();
                    (error, refused)
                })
            }
        };
        let now = self.clock.now();
        let outcome = match failure {
            None => AttemptOutcome::Delivered,
            Some((error, final_failure))
                if final_failure || attempt >= self.settings.max_attempts =>
            {
                tracing::error!(
                    %delivery_id,
                    attempt,
                    target = target(),
                    error = error.reason(),
                    detail = error.detail(),
                    "webhook delivery is dead"
                );
                AttemptOutcome::Dead {
                    error: error.reason().to_owned(),
                    retain_until: now.plus_millis(self.settings.retain.as_millis() as i64),
                }
            }
            Some((error, _)) => {
                let delay = jittered(self.settings.retry_delay(attempt));
                tracing::warn!(
                    %delivery_id,
                    attempt,
                    target = target(),
                    error = error.reason(),
                    detail = error.detail(),
                    retry_in_ms = delay.as_millis() as u64,
                    "webhook delivery failed"
                );
                AttemptOutcome::Retry {
                    error: error.reason().to_owned(),
                    retry_at: now.plus_millis(delay.as_millis() as i64),
                }
            }
        };
        let retry_at = match &outcome {
            AttemptOutcome::Retry { retry_at, .. } => Some(*retry_at),
            _ => None,
        };
        if let Some(counter) = self.counter.get() {
            counter.count(match &outcome {
                AttemptOutcome::Delivered => DeliveryOutcome::Delivered,
                AttemptOutcome::Retry { .. } => DeliveryOutcome::Retry,
                AttemptOutcome::Dead { .. } => DeliveryOutcome::Dead,
            });
        }
        match deliveries.finish_attempt(delivery_id, outcome).await {
            Ok(_) => {
                if let Some(at) = retry_at {
                    self.timer.retry_at(at);
                    if let Some(queue) = self.queue.get()
                        && let Err(error) = queue.schedule(delivery_id, at).await
                    {
                        // The row is pending and due then: the table sweep takes it.
                        tracing::warn!(%delivery_id, error, "scheduling a webhook retry failed");
                    }
                }
            }
            // The lease ends and the row is attempted again: at least once.
            Err(error) => {
                tracing::warn!(%delivery_id, %error, "recording a webhook attempt failed")
            }
        }
    }

    /// The attempt's headers and body: the stored payload stamped with this
    /// attempt's time, signed with the newest secret when there is one.
    fn signed(
        &self,
        delivery_id: Uuid,
        attempt: u32,
        mut payload: Metadata,
        now: Timestamp,
    ) -> (HeaderMap, Bytes) {
        payload.insert(
            "webhook_sent_at".into(),
            serde_json::to_value(now).unwrap_or(Value::Null),
        );
        let body = Bytes::from(serde_json::to_vec(&payload).unwrap_or_default());
        let mut headers = traced(json_headers());
        headers.insert(DELIVERY_ID_HEADER, header_value(&delivery_id.to_string()));
        headers.insert(ATTEMPT_HEADER, HeaderValue::from(attempt));
        if let Some(secret) = self.settings.secrets.first() {
            let signature = sign(secret, now.unix_micros().div_euclid(1_000_000), &body);
            headers.insert(SIGNATURE_HEADER, header_value(&signature));
        }
        (headers, body)
    }

    /// One POST without delivery headers, for a store that records no deliveries.
    async fn best_effort(&self, url: String, mut payload: Metadata) {
        let url = match self.policy.permit(&url) {
            Ok(url) => url,
            Err(reason) => {
                tracing::error!(target = redact(&url), reason, "webhook refused");
                return;
            }
        };
        let target = redact_url(&url);
        payload.insert(
            "webhook_sent_at".into(),
            serde_json::to_value(self.clock.now()).unwrap_or(Value::Null),
        );
        let attempt = Attempt {
            url,
            headers: traced(json_headers()),
            body: Bytes::from(serde_json::to_vec(&payload).unwrap_or_default()),
        };
        let sent = self.dispatcher.post(attempt).await;
        if let Some(counter) = self.counter.get() {
            counter.count(match sent {
                Ok(_) => DeliveryOutcome::Delivered,
                Err(_) => DeliveryOutcome::Dead,
            });
        }
        if let Err(error) = sent {
            tracing::error!(
                target,
                error = error.reason(),
                detail = error.detail(),
                "webhook failed (this store records no deliveries: not retried)"
            );
        }
    }
}

/// Whether an attempt is the first, made as its run settles.
#[derive(Clone, Copy)]
enum Inline {
    Yes,
    No,
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers
}

/// `headers` with the current span's `traceparent` (the attempt's `webhook.deliver`
/// span, in the run's trace), so the receiver can continue the trace.
fn traced(mut headers: HeaderMap) -> HeaderMap {
    if let Some(traceparent) = service_engine::trace_context::current()
        && let Ok(value) = HeaderValue::from_str(&traceparent)
    {
        headers.insert("traceparent", value);
    }
    headers
}

fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `delay` spread by ±10 %, so deliveries that failed together do not retry together.
fn jittered(delay: Duration) -> Duration {
    let unit = (Uuid::new_v4().as_u128() % 10_000) as f64 / 10_000.0;
    delay.mul_f64(0.9 + 0.2 * unit)
}
