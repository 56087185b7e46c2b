//! A settled run's webhook, engine side: the callback body rendered from the run and
//! how it ended, handed to the `Webhooks` sender (its outbox row, or the body itself
//! for a store that records no deliveries). Settling and recovery use it.

use std::sync::Arc;

use serde_json::{Value, json};
use service_store::{DeliveryRecord, WebhookRequest, webhook_status};
use service_types::{DeliveryStatus, Metadata, Run, RunStatus, Timestamp};

use crate::webhooks::{Outgoing, Webhooks};

/// What a settled run's callback body is rendered from.
pub(crate) struct CallbackBody<'a> {
    pub(crate) run: &'a Run,
    pub(crate) url: &'a str,
    pub(crate) values: Option<Value>,
    /// Plain message of a failure.
    pub(crate) error: Option<String>,
    /// Pending interrupts by task id (sent only when the run paused).
    pub(crate) interrupts: Option<Value>,
    /// The last reply declaration the graph wrote to its custom stream.
    pub(crate) reply: Option<Value>,
    pub(crate) started_at: Timestamp,
    pub(crate) ended_at: Timestamp,
}

/// A settled run's webhook, from its rendered body to the sender: the sender (none:
/// runs carrying a webhook were refused) and whether the store records deliveries.
#[derive(Clone)]
pub(crate) struct Callbacks {
    webhooks: Option<Arc<dyn Webhooks>>,
    recorded: bool,
}

impl Callbacks {
    pub(crate) fn new(webhooks: Option<Arc<dyn Webhooks>>, recorded: bool) -> Self {
        Self { webhooks, recorded }
    }

    /// The webhook part of a settlement: the body capped, `status` left to the store,
    /// which reads it from the status it writes.
    pub(crate) fn request(&self, body: CallbackBody<'_>) -> Option<WebhookRequest> {
        let webhooks = self.webhooks.as_ref()?;
        let run = body.run;
        // The run's own fields, but not its `kwargs`: the request's options (its input
        // among them) are not the outcome, would make the payload cap powerless, and
        // need not be written out per settle; receivers read them by run id. `status`
        // is the store's to write, `error` the plain message below.
        let mut payload = Metadata::new();
        payload.insert("run_id".into(), json!(run.run_id));
        payload.insert("thread_id".into(), json!(run.thread_id));
        payload.insert("assistant_id".into(), json!(run.assistant_id));
        payload.insert("created_at".into(), json_time(run.created_at));
        payload.insert("updated_at".into(), json_time(run.updated_at));
        payload.insert("metadata".into(), Value::Object(run.metadata.clone()));
        payload.insert("multitask_strategy".into(), json!(run.multitask_strategy));
        payload.insert("values".into(), body.values.unwrap_or(Value::Null));
        if let Some(error) = body.error {
            payload.insert("error".into(), Value::String(error));
        }
        if let Some(interrupts) = body.interrupts {
            payload.insert("interrupts".into(), interrupts);
        }
        if let Some(reply) = body.reply {
            payload.insert("reply".into(), reply);
        }
        payload.insert("run_started_at".into(), json_time(body.started_at));
        payload.insert("run_ended_at".into(), json_time(body.ended_at));
        let payload_truncated = webhooks.cap_payload(&mut payload);
        Some(WebhookRequest {
            url: body.url.to_owned(),
            payload,
            payload_truncated,
            run_metadata: run.metadata.clone(),
            // The first attempt follows the settle at once, under the row's lease.
            inline_lease: webhooks.inline_lease(),
        })
    }

    /// A settlement's webhook kept to be sent as it is: only for a store that writes
    /// no delivery row (every other is sent from its row).
    pub(crate) fn unrecorded(&self, webhook: Option<&WebhookRequest>) -> Option<WebhookRequest> {
        webhook.filter(|_| !self.recorded).cloned()
    }

    /// Hands a settled run's webhook to the sender: its outbox row when the store
    /// wrote one (leased to the sender, when the store leased it), else (a store that
    /// records no deliveries) the body itself.
    pub(crate) fn send(
        &self,
        delivery: Option<DeliveryRecord>,
        unrecorded: Option<WebhookRequest>,
        status: RunStatus,
        interrupted: bool,
    ) {
        let Some(webhooks) = &self.webhooks else {
            return;
        };
        // A store without a deliveries repository may still keep rows of its own, which
        // nothing could claim: its webhooks go out as one best-effort POST.
        if let Some(request) = unrecorded {
            let mut payload = request.payload;
            payload.insert(
                "status".into(),
                Value::from(webhook_status(status, interrupted)),
            );
            webhooks.send(Outgoing::Unrecorded {
                url: request.url,
                payload,
            });
        } else if let Some(delivery) = delivery {
            webhooks.send(match delivery.delivery.status {
                DeliveryStatus::Delivering => Outgoing::Leased(Box::new(delivery)),
                _ => Outgoing::Recorded(delivery.delivery.delivery_id),
            });
        }
    }
}

fn json_time(at: Timestamp) -> Value {
    serde_json::to_value(at).unwrap_or(Value::Null)
}
