//! The seam to run-completion webhooks: the engine renders a settled run's callback
//! body (`deliveries.rs`) and has the store write it with the terminal status; a
//! [`Webhooks`] implementation (the service-webhooks crate's outbox) checks URLs, caps
//! bodies and sends. An engine built without one refuses runs that carry a webhook
//! rather than accept a callback it would never send.

use std::time::Duration;

use async_trait::async_trait;
use service_store::DeliveryRecord;
use service_types::Metadata;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A settled run's webhook, handed over once the run's thread is free.
#[derive(Clone, Debug, PartialEq)]
pub enum Outgoing {
    /// An outbox row to attempt now: a first attempt, or a replay.
    Recorded(Uuid),
    /// An outbox row its settle inserted with the first attempt begun and leased to
    /// this sender ([`Webhooks::inline_lease`]): attempted without a claim. A lease
    /// that ends before the attempt starts leaves the row to the outbox's retries.
    Leased(Box<DeliveryRecord>),
    /// The store keeps no deliveries: one best-effort POST of this body, without the
    /// delivery headers; a failure is logged and dropped.
    Unrecorded {
        /// Target URL.
        url: String,
        /// The callback body, status included.
        payload: Metadata,
    },
}

/// Where settled runs' webhooks go.
#[async_trait]
pub trait Webhooks: Send + Sync + 'static {
    /// Refuses, with a reason for a 422, a URL a run may not carry.
    fn check_url(&self, url: &str) -> Result<(), String>;

    /// Cuts a rendered callback body to the payload cap; true when it cut.
    fn cap_payload(&self, payload: &mut Metadata) -> bool;

    /// Sends `outgoing` in the background; must not wait for the receiver.
    fn send(&self, outgoing: Outgoing);

    /// How long a settle leases a new delivery row to this sender for its first
    /// attempt, made at once ([`Outgoing::Leased`]); long enough to send and record
    /// the outcome. `None` (the default): the row is inserted pending and each
    /// attempt claims it ([`Outgoing::Recorded`]).
    fn inline_lease(&self) -> Option<Duration> {
        None
    }

    /// Runs the retry schedule and retention sweeps until `stop` fires.
    async fn run(&self, stop: CancellationToken);

    /// Waits briefly (the shutdown has a budget) for attempts in flight; what is left
    /// is attempted again once its lease ends.
    async fn drain(&self);

    /// Where to count delivery attempts by outcome; called once as the engine is
    /// built. Webhooks that record no attempts ignore it.
    fn count_deliveries(&self, _counter: crate::metrics::DeliveryCounter) {}
}
