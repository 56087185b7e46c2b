//! Run-completion webhooks: signed, at-least-once, from a delivery outbox.
//!
//! The engine renders a settled run's callback body and the store writes it, as a
//! delivery row, in the same step as the run's terminal status. [`Outbox`] (the
//! engine's [`service_engine::Webhooks`]) attempts the row at once, retries it on a
//! doubling schedule with jitter, and marks it dead after the last attempt. Receivers
//! check deliveries with [`verify`]; docs/webhooks.md has the recipes.

mod dispatch;
mod guard;
mod outbox;
mod payload;
mod policy;
mod schedule;
mod settings;
mod signature;

pub use dispatch::{Attempt, AttemptError, Dispatcher, HttpDispatcher};
pub use outbox::Outbox;
pub use payload::{cap, is_truncation_marker};
pub use policy::{UrlPolicy, redact, redact_url};
pub use schedule::RetryQueue;
pub use settings::{
    DEFAULT_INITIAL_DELAY, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_RETAIN_HOURS,
    DEFAULT_TIMEOUT, RetriesBlock, SettingsError, WebhookSettings, WebhooksBlock,
};
pub use signature::{
    ATTEMPT_HEADER, DEFAULT_TOLERANCE, DELIVERY_ID_HEADER, Rejection, SIGNATURE_HEADER, sign,
    verify, verify_header,
};
pub use url::Url;
