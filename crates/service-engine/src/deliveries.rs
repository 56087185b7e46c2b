//! A settled run's webhook, engine side: the URL checked at creation, the callback
//! body rendered at settle, the delivery handed to the `Webhooks` sender, and the
//! deliveries routes' calls.

use serde_json::{Value, json};
use service_store::{DeliveryQuery, WebhookRequest, webhook_status};
use service_types::{Delivery, Metadata, Run, RunStatus, Timestamp};
use uuid::Uuid;

use crate::auth::Scope;
use crate::webhooks::Outgoing;
use crate::{Engine, EngineError, EngineResult};

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

impl Engine {
    /// Checks a run's webhook URL at creation.
    pub(crate) fn check_webhook(&self, url: &str) -> EngineResult<()> {
        let Some(webhooks) = &self.inner.webhooks else {
            return Err(EngineError::unprocessable(
                "This server does not send webhooks (none is configured)",
            ));
        };
        webhooks
            .check_url(url)
            .map_err(|reason| EngineError::unprocessable(format!("Invalid webhook URL: {reason}")))
    }

    /// The webhook part of a settlement: the body capped, `status` left to the store,
    /// which reads it from the status it writes.
    pub(crate) fn webhook_request(&self, body: CallbackBody<'_>) -> Option<WebhookRequest> {
        let webhooks = self.inner.webhooks.as_ref()?;
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
        })
    }

    /// A settlement's webhook kept to be sent as it is: only for a store that writes
    /// no delivery row (every other is sent from its row).
    pub(crate) fn unrecorded(&self, webhook: Option<&WebhookRequest>) -> Option<WebhookRequest> {
        webhook
            .filter(|_| !self.store().capabilities().deliveries)
            .cloned()
    }

    /// Hands a settled run's webhook to the sender: its outbox row when the store
    /// wrote one, else (a store that records no deliveries) the body itself.
    pub(crate) fn send_webhook(
        &self,
        delivery_id: Option<Uuid>,
        unrecorded: Option<WebhookRequest>,
        status: RunStatus,
        interrupted: bool,
    ) {
        let Some(webhooks) = &self.inner.webhooks else {
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
        } else if let Some(delivery_id) = delivery_id {
            webhooks.send(Outgoing::Recorded(delivery_id));
        }
    }

    /// A run's deliveries (`GET /threads/{thread_id}/runs/{run_id}/deliveries`) within
    /// `scope`. They outlive their run and thread, so the path and the owner are
    /// checked against the rows.
    pub(crate) async fn list_deliveries(
        &self,
        thread_id: Uuid,
        run_id: Uuid,
        query: &DeliveryQuery,
        scope: &Scope,
    ) -> EngineResult<Vec<Delivery>> {
        if query
            .limit
            .is_some_and(|limit| limit > self.config().max_page_size)
        {
            return Err(EngineError::unprocessable(format!(
                "limit must be at most {}",
                self.config().max_page_size
            )));
        }
        // A store that records no deliveries has none to list.
        let Some(deliveries) = self.store().deliveries() else {
            return Ok(Vec::new());
        };
        let query = DeliveryQuery {
            enforced: scope.enforced(),
            ..query.clone()
        };
        let mut listed = deliveries.list(run_id, &query).await?;
        listed.retain(|delivery| delivery.thread_id == thread_id);
        Ok(listed)
    }

    /// Makes a delivery not yet delivered due now and attempts it
    /// (`POST .../deliveries/{delivery_id}/replay`).
    pub(crate) async fn replay_delivery(
        &self,
        thread_id: Uuid,
        run_id: Uuid,
        delivery_id: Uuid,
        scope: &Scope,
    ) -> EngineResult<Delivery> {
        let not_found = || EngineError::not_found(format!("Delivery {delivery_id} not found"));
        let deliveries = self.store().deliveries().ok_or_else(not_found)?;
        let belongs = deliveries.get(delivery_id).await?.is_some_and(|record| {
            record.delivery.run_id == run_id
                && record.delivery.thread_id == thread_id
                && scope.admits(&record.run_metadata)
        });
        if !belongs {
            return Err(not_found());
        }
        let delivery = deliveries.replay(run_id, delivery_id).await?;
        if let Some(webhooks) = &self.inner.webhooks {
            webhooks.send(Outgoing::Recorded(delivery_id));
        }
        Ok(delivery)
    }
}

fn json_time(at: Timestamp) -> Value {
    serde_json::to_value(at).unwrap_or(Value::Null)
}
