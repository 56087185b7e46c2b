//! Crons: scheduled runs, and the scheduler that fires them.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use service_store::containment::Enforced;
use service_store::schedule::Schedule;
use service_store::{CronFilter, CronPatch, CronQuery, NewCron};
use service_types::{Cron, CronCreate, CronSearch, Metadata, OnCompletion, RunCreate};
use uuid::Uuid;

use crate::auth::{Caller, Principal, Scope};
use crate::limits::{offset, search_limit};
use crate::{Engine, EngineError, EngineResult, RunTarget};

/// One page of a cron search.
#[derive(Clone, Debug)]
pub struct CronSearchPage {
    /// The matches on this page.
    pub crons: Vec<Cron>,
    /// Every match, unpaginated.
    pub total: u64,
    /// Offset of the next page, when more rows exist.
    pub next_offset: Option<usize>,
}

/// Crons fired per scheduler pass; a full batch triggers another pass at once.
const FIRE_BATCH: usize = 100;

/// The payload key keeping the scope of a cron's creator (its `enforcedMetadata`
/// alternatives), which its firings run within.
const OWNER_SCOPE: &str = "enforced_metadata";

fn cron_not_found() -> EngineError {
    EngineError::not_found("Not Found")
}

/// Checks a schedule and time zone, answering 422 with the reason.
fn check_schedule(schedule: &str, timezone: Option<&str>) -> EngineResult<()> {
    Schedule::parse(schedule, timezone)
        .map(|_| ())
        .map_err(|error| EngineError::unprocessable(error.message))
}

impl Engine {
    /// Creates a cron; `thread_id` makes it fire on that thread (which must be within
    /// the caller's scope), else each firing is a stateless run. The caller must be
    /// able to read its assistant. The cron and its runs are stamped with the scope's
    /// metadata, and its firings run within the scope.
    pub(crate) async fn create_cron(
        &self,
        caller: &Caller,
        thread_id: Option<Uuid>,
        mut body: CronCreate,
    ) -> EngineResult<Cron> {
        let scope = caller.scope();
        check_schedule(&body.schedule, body.timezone.as_deref())?;
        crate::limits::check_run_numbers(&body.run)?;
        if let Some(webhook) = &body.run.webhook {
            self.check_webhook(webhook)?;
        }
        let assistant = self
            .runnable_assistant(caller, &body.run.assistant_id)
            .await?;
        if let Some(thread_id) = thread_id
            && !scope.admits(&self.get_thread(thread_id).await?.metadata)
        {
            return Err(EngineError::not_found(format!(
                "Thread {thread_id} not found"
            )));
        }
        scope.stamp_option(&mut body.run.metadata);
        let cron_id = Uuid::now_v7();
        let mut run = body.run;
        run.assistant_id = assistant.assistant_id.to_string();
        let mut config = run.config.take().unwrap_or_default();
        config
            .configurable
            .get_or_insert_with(Metadata::new)
            .insert("cron_id".into(), json!(cron_id));
        run.config = Some(config);
        let metadata = run.metadata.clone().unwrap_or_default();
        let mut payload = serde_json::to_value(&run).unwrap_or_else(|_| json!({}));
        payload["schedule"] = json!(body.schedule);
        if let Some(enforced) = scope.enforced() {
            payload[OWNER_SCOPE] = json!(enforced.0);
        }
        if let Some(timezone) = &body.timezone {
            payload["timezone"] = json!(timezone);
        }
        let new = NewCron {
            cron_id,
            assistant_id: Some(assistant.assistant_id),
            thread_id,
            user_id: Some(String::new()),
            schedule: body.schedule,
            timezone: body.timezone,
            end_time: body.end_time,
            payload,
            metadata,
            on_run_completed: match thread_id {
                Some(_) => None,
                None => Some(body.on_run_completed.unwrap_or_default()),
            },
            enabled: body.enabled.unwrap_or(true),
        };
        let cron = self.store().crons().create(new).await?;
        self.inner.wake_crons.notify_one();
        Ok(cron)
    }

    /// Reads a cron.
    pub(crate) async fn get_cron(&self, cron_id: Uuid) -> EngineResult<Cron> {
        self.store()
            .crons()
            .get(cron_id)
            .await?
            .ok_or_else(cron_not_found)
    }

    /// Updates a cron: schedule fields, enabled, metadata (merged) and payload keys.
    /// A cron outside the caller's scope is not found; a patched payload or metadata
    /// keeps the scope's stamp; a new assistant must be one the caller may read.
    pub(crate) async fn update_cron(
        &self,
        caller: &Caller,
        cron_id: Uuid,
        mut body: service_types::CronPatch,
    ) -> EngineResult<Cron> {
        let scope = caller.scope();
        let current = self.get_cron(cron_id).await?;
        if !scope.admits(&current.metadata) {
            return Err(cron_not_found());
        }
        if let Some(named) = body.payload.get("assistant_id") {
            let Value::String(id) = named else {
                return Err(EngineError::unprocessable("assistant_id must be a string"));
            };
            let assistant = self.runnable_assistant(caller, id).await?;
            body.payload
                .insert("assistant_id".into(), json!(assistant.assistant_id));
        }
        if body.metadata.is_some() {
            scope.stamp_option(&mut body.metadata);
        }
        if let Some(Value::Object(metadata)) = body.payload.get_mut("metadata") {
            scope.stamp(metadata);
        }
        // The creator's scope is the server's: a patch neither sets nor clears it.
        if !body.payload.is_empty() {
            match current.payload.get(OWNER_SCOPE) {
                Some(owner) => body.payload.insert(OWNER_SCOPE.into(), owner.clone()),
                None => body.payload.remove(OWNER_SCOPE),
            };
        }
        let empty = body.schedule.is_none()
            && body.end_time.is_none()
            && body.timezone.is_none()
            && body.enabled.is_none()
            && body.on_run_completed.is_none()
            && body.metadata.is_none()
            && body.payload.is_empty();
        if empty {
            return Err(EngineError::bad_request("Request body cannot be empty"));
        }
        let schedule = body.schedule.as_deref().unwrap_or(&current.schedule);
        let timezone = body.timezone.as_deref().or(current.timezone.as_deref());
        check_schedule(schedule, timezone)?;
        if let Some(Value::String(webhook)) = body.payload.get("webhook") {
            self.check_webhook(webhook)?;
        }
        let payload = (!body.payload.is_empty()).then(|| {
            let mut payload = current.payload.clone();
            if let Value::Object(map) = &mut payload {
                map.extend(body.payload.clone());
            }
            payload
        });
        if let Some(payload) = &payload {
            // Each firing creates its run from the merged payload: held to a run's bounds.
            let run: RunCreate = serde_json::from_value(payload.clone()).map_err(|error| {
                EngineError::unprocessable(format!("Invalid cron payload: {error}"))
            })?;
            crate::limits::check_run_numbers(&run)?;
        }
        let patch = CronPatch {
            schedule: body.schedule,
            timezone: body.timezone.map(Some),
            end_time: body.end_time,
            payload,
            metadata: body.metadata,
            on_run_completed: body.on_run_completed.map(Some),
            enabled: body.enabled,
        };
        let cron = self.store().crons().update(cron_id, patch).await?;
        self.inner.wake_crons.notify_one();
        Ok(cron)
    }

    /// Deletes a cron.
    pub(crate) async fn delete_cron(&self, cron_id: Uuid) -> EngineResult<()> {
        self.store()
            .crons()
            .delete(cron_id)
            .await
            .map_err(|error| match error.kind {
                service_store::ErrorKind::NotFound => cron_not_found(),
                _ => error.into(),
            })
    }

    async fn cron_filter(
        &self,
        body: &CronSearch,
        enforced: Option<Enforced>,
    ) -> EngineResult<CronFilter> {
        let assistant_id = match &body.assistant_id {
            Some(id) => Some(self.resolve_run_assistant(id).await?.assistant_id),
            None => None,
        };
        Ok(CronFilter {
            assistant_id,
            thread_id: body.thread_id,
            enabled: body.enabled,
            metadata: body.metadata.clone(),
            enforced,
        })
    }

    /// Searches crons: one page, with the count of every match for the pagination
    /// headers (as assistant search has); only crons within `enforced`.
    pub(crate) async fn search_crons(
        &self,
        body: CronSearch,
        enforced: Option<Enforced>,
    ) -> EngineResult<CronSearchPage> {
        let filter = self.cron_filter(&body, enforced).await?;
        let limit = search_limit(body.limit)?;
        let offset = offset(body.offset)?;
        let query = CronQuery {
            filter: filter.clone(),
            sort_by: body.sort_by.unwrap_or_default(),
            sort_order: body.sort_order.unwrap_or_default(),
            limit,
            offset,
        };
        let crons = self.store().crons().search(&query).await?;
        let total = self.store().crons().count(&filter).await?;
        let limit = limit.unwrap_or(self.config().max_page_size);
        let next_offset = ((offset + crons.len()) < total as usize).then_some(offset + limit);
        Ok(CronSearchPage {
            crons,
            total,
            next_offset,
        })
    }

    /// Counts crons within `enforced`.
    pub(crate) async fn count_crons(
        &self,
        body: CronSearch,
        enforced: Option<Enforced>,
    ) -> EngineResult<u64> {
        let filter = self.cron_filter(&body, enforced).await?;
        Ok(self.store().crons().count(&filter).await?)
    }

    /// Fires due crons until none is due, then sleeps until the next minute boundary
    /// (schedules have minute resolution) or until a cron changes.
    pub(crate) async fn cron_loop(&self) {
        loop {
            self.fire_due_crons().await;
            let now = self.now().unix_micros();
            let minute = 60_000_000;
            let wait = Duration::from_micros((minute - now.rem_euclid(minute)) as u64);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.inner.wake_crons.notified() => {}
                () = self.inner.shutdown.cancelled() => return,
            }
        }
    }

    /// Starts one run per due cron occurrence; each occurrence fires once even with
    /// several instances, because the store advances it with a compare-and-set.
    pub(crate) async fn fire_due_crons(&self) {
        loop {
            let due = match self.store().crons().due(self.now(), FIRE_BATCH).await {
                Ok(due) => due,
                Err(error) => {
                    tracing::error!(%error, "listing due crons failed");
                    return;
                }
            };
            for cron in &due {
                self.fire(cron).await;
            }
            if due.len() < FIRE_BATCH {
                return;
            }
        }
    }

    async fn fire(&self, cron: &Cron) {
        let Some(fired_for) = cron.next_run_date else {
            return;
        };
        match self.store().crons().advance(cron.cron_id, fired_for).await {
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(error) => {
                tracing::error!(cron_id = %cron.cron_id, %error, "advancing a cron failed");
                return;
            }
        }
        let mut body: RunCreate = match serde_json::from_value(cron.payload.clone()) {
            Ok(body) => body,
            Err(error) => {
                tracing::error!(cron_id = %cron.cron_id, %error, "cron payload is not a run body");
                return;
            }
        };
        // A firing runs within the scope of the cron's creator.
        let scope = match cron
            .payload
            .get(OWNER_SCOPE)
            .cloned()
            .map(serde_json::from_value)
        {
            None => Scope::All,
            Some(Ok(alternatives)) => Scope::Owned(Enforced(alternatives)),
            Some(Err(error)) => {
                tracing::error!(cron_id = %cron.cron_id, %error, "cron owner scope is unreadable");
                return;
            }
        };
        let target = match cron.thread_id {
            Some(thread_id) => RunTarget::Thread(thread_id),
            None => {
                body.on_completion = Some(cron.on_run_completed.unwrap_or(OnCompletion::Delete));
                RunTarget::Stateless
            }
        };
        // The creator's assistant was checked when the cron was made or last patched.
        let creator = Caller::new(Arc::new(Principal::new("cron")), None, scope);
        // The firing is the root of the run's trace (its context is stored with the
        // run), so the run's spans and its webhook's attempts share one trace.
        let scope = crate::trace_context::child_of(
            None,
            "cron.fire",
            crate::trace_context::SpanKind::Internal,
        );
        scope.record(|span| span.set("cron_id", cron.cron_id));
        match scope
            .instrument(self.create_run(&creator, target, body))
            .await
        {
            Ok(run) => tracing::info!(cron_id = %cron.cron_id, run_id = %run.run_id, "cron fired"),
            Err(error) => {
                tracing::error!(cron_id = %cron.cron_id, error = %error.chain(), "cron run failed to start")
            }
        }
    }
}
