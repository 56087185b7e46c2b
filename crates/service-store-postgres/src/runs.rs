//! Runs: the `runs` table is the queue. `claim_next` takes the oldest due pending
//! run whose thread has no running run with `FOR UPDATE SKIP LOCKED`; the partial
//! unique index `runs_one_running_per_thread` makes the one-running-run-per-thread
//! rule a database constraint, so two claimers racing for two runs of one thread
//! cannot both win (the loser's update fails and it looks again). A thread with a live
//! row in `thread_state_holds` (an edit of its state in progress) is skipped too.

use std::sync::LazyLock;

use async_trait::async_trait;
use serde_json::Value;
use service_store::containment::merge_enforced;
use service_store::{
    ActiveRunsQuery, AssistantStamp, CancelOutcome, ClaimNext, Claimed, ClaimedRun, DeliveryRecord,
    NewRun, NewThread, RunListQuery, RunsRepo, Settled, SettledAndMirrored, SettledRun, Settlement,
    StoreError, StoreResult, ThreadAndActive, ThreadMirror, ThreadRunCreated, WebhookRequest,
    final_status, webhook_status,
};
use service_types::{Metadata, Run, RunStatus, Timestamp};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::db::{
    ASYNC_COMMIT, Built, Cached, Columns, Db, Sql, at, count, decode, encode, enum_from, enum_text,
    object, push_where, static_sql, ts,
};
use crate::deliveries::COLUMNS as DELIVERY_COLUMNS;
use crate::error::{is_foreign_key_violation, is_unique_violation, store_error};
use crate::filter::metadata_condition;
use crate::threads::{self, COLUMNS as THREAD_COLUMNS, MIRROR_SET};

mod insert_sql;
mod settle_sql;

use insert_sql::{InsertError, is_one_running_violation};
pub(crate) use settle_sql::settle_and_mirror_sql;
use settle_sql::{DeliveryParams, settle_sql};

pub(crate) const COLUMNS: &str = "run_id, thread_id, assistant_id, created_at, updated_at, status, \
    metadata, multitask_strategy, kwargs, error, cancel_reason, traceparent";

/// What a settle returns of the run ([`SettledRun`]): not its kwargs or metadata.
const SETTLED_COLUMNS: &str = "run_id, thread_id, status, error, updated_at";

fn settled_run(row: &Row) -> StoreResult<SettledRun> {
    let row = Columns::of(row, "runs");
    let error: Option<Value> = row.column("error")?;
    Ok(SettledRun {
        run_id: row.column("run_id")?,
        thread_id: row.column("thread_id")?,
        status: enum_from(row.column("status")?, "status")?,
        error: error.map(|value| decode(value, "error")).transpose()?,
        updated_at: ts(row.column("updated_at")?),
    })
}

/// A new run's assistant precondition (`NewRun::assistant_as_read`) in the run
/// inserts: `$3` is the assistant, `$9` and `$10` the version and `updated_at` it was
/// read with (or NULL: no condition).
const ASSISTANT_UNCHANGED: &str = "($9::bigint IS NULL OR EXISTS (
    SELECT 1 FROM assistants WHERE assistant_id = $3
      AND version = $9::bigint AND updated_at = $10::timestamptz))";

/// How often a claim retries after losing a same-thread race.
const CLAIM_ATTEMPTS: usize = 16;

fn run_not_found() -> StoreError {
    StoreError::not_found("Run not found")
}

pub(crate) fn run(row: &Row) -> StoreResult<Run> {
    run_at(row, 0)
}

/// The run whose [`COLUMNS`] start at column `first` of `row` (by position, so a
/// statement may return them after another relation's columns of the same names).
fn run_at(row: &Row, first: usize) -> StoreResult<Run> {
    let column = |offset: usize| first + offset;
    let row = Columns::of(row, "runs");
    let strategy: Option<String> = row.column_at(column(7))?;
    let error: Option<Value> = row.column_at(column(9))?;
    Ok(Run {
        run_id: row.column_at(column(0))?,
        thread_id: row.column_at(column(1))?,
        assistant_id: row.column_at(column(2))?,
        created_at: ts(row.column_at(column(3))?),
        updated_at: ts(row.column_at(column(4))?),
        status: enum_from(row.column_at(column(5))?, "status")?,
        metadata: object(row.column_at(column(6))?, "metadata")?,
        multitask_strategy: strategy
            .map(|text| enum_from(text, "multitask_strategy"))
            .transpose()?,
        kwargs: row.column_at(column(8))?,
        error: error.map(|value| decode(value, "error")).transpose()?,
        cancel_reason: row.column_at(column(10))?,
        traceparent: row.column_at(column(11))?,
    })
}

/// [`ClaimedRun::thread_has_no_checkpoint`] in the `RETURNING` of a claim's `UPDATE
/// runs`: a probe of the checkpoints' primary key by its first column (checkpoints
/// name their thread as text).
const NO_CHECKPOINT: &str = "NOT EXISTS (
        SELECT 1 FROM checkpoints c
        WHERE c.thread_id = runs.thread_id::text) AS thread_has_no_checkpoint";

/// The claimed run whose [`COLUMNS`] start at column `first` of `row`, followed by
/// [`NO_CHECKPOINT`].
fn claimed_run(row: &Row, first: usize) -> StoreResult<ClaimedRun> {
    Ok(ClaimedRun {
        run: run_at(row, first)?,
        thread_has_no_checkpoint: Columns::of(row, "runs")
            .column_at(first + COLUMNS.split(',').count())?,
    })
}

/// The claim statement (shared with the EXPLAIN check): `$1` is now.
///
/// Every claim's check that no run of the candidate's thread is running ends in
/// `OFFSET 0`, which keeps it a correlated subquery: a probe of
/// `runs_one_running_per_thread` by the candidate's thread. Pulled up into an anti
/// join, the planner (whose statistics count a handful of running runs) read every
/// entry of that partial index instead, dead ones included (each run's claim and settle
/// leave one until vacuum): hundreds of heap pages per claim under load
/// (docs/performance.md §14).
///
/// `more_pending` reads the queue in its order, as a scalar subquery: as an `EXISTS`,
/// whose order PostgreSQL drops, a backlog large enough for the statistics to count
/// many pending runs made it a scan of the whole table, terminal runs first.
pub(crate) const CLAIM_SQL: &str =
    "UPDATE runs SET status = 'running', updated_at = $1, started = true
    FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
    WHERE run_id = (
        SELECT r.run_id FROM runs r
        WHERE r.status = 'pending' AND r.available_at <= $1
          AND NOT EXISTS (
              SELECT 1 FROM runs busy
              WHERE busy.thread_id = r.thread_id AND busy.status = 'running' OFFSET 0)
          AND NOT EXISTS (
              SELECT 1 FROM thread_state_holds hold
              WHERE hold.thread_id = r.thread_id AND hold.held_until > $1)
        ORDER BY r.created_at, r.run_id
        LIMIT 1
        FOR UPDATE SKIP LOCKED)
    RETURNING run_id, thread_id, assistant_id, created_at, updated_at, status, metadata, \
    multitask_strategy, kwargs, error, cancel_reason, traceparent,
    (SELECT true FROM runs more
        WHERE more.status = 'pending' AND more.available_at <= $1
          AND more.run_id <> runs.run_id
        ORDER BY more.created_at, more.run_id LIMIT 1) IS NOT NULL AS more_pending";

/// The active runs of one thread, oldest first (shared with the EXPLAIN check): `$1`
/// is the thread, `$2` the limit.
pub(crate) const ACTIVE_OF_THREAD_SQL: &str = "SELECT run_id, thread_id, assistant_id, \
    created_at, updated_at, status, metadata, multitask_strategy, kwargs, error, cancel_reason, \
    traceparent FROM runs
    WHERE thread_id = $1 AND status IN ('pending', 'running')
    ORDER BY created_at, run_id LIMIT $2";

/// Active runs in queue order (shared with the EXPLAIN check); `None` for a terminal
/// status, which no active run has. The statuses are literals, so the planner can
/// match the partial index that holds exactly them (`runs_pending_queue`,
/// `runs_one_running_per_thread`, `runs_active_by_thread`).
pub(crate) fn active_sql(query: &ActiveRunsQuery, limit: usize) -> Option<Sql> {
    let status = match query.status {
        None => "status IN ('pending', 'running')",
        Some(RunStatus::Pending) => "status = 'pending'",
        Some(RunStatus::Running) => "status = 'running'",
        Some(_) => return None,
    };
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM runs"));
    let mut conditions = vec![status.to_owned()];
    if let Some(thread_id) = query.thread_id {
        let p = sql.bind(thread_id);
        conditions.push(format!("thread_id = {p}"));
    }
    match metadata_condition(&mut sql, merge_enforced(None, query.enforced.as_ref())) {
        Some(condition) => conditions.extend(condition),
        None => return None,
    }
    push_where(&mut sql, &conditions);
    let p = sql.bind(count(limit));
    sql.push(&format!(" ORDER BY created_at, run_id LIMIT {p}"));
    Some(sql)
}

/// The earliest instant a pending run not yet claimable becomes so (shared with the
/// EXPLAIN check): `$1` is now. Such a run became claimable later than it was created
/// (`available_at > created_at`, as `now` is after its creation), which makes this a
/// probe of `runs_delayed_by_availability`.
pub(crate) const NEXT_AVAILABLE_SQL: &str = "SELECT min(available_at) FROM runs
    WHERE status = 'pending' AND available_at > $1 AND available_at > created_at";

/// The latest-run statement (shared with the EXPLAIN check): `$1` is the thread.
pub(crate) const LATEST_SQL: &str =
    "SELECT run_id, thread_id, assistant_id, created_at, updated_at, \
    status, metadata, multitask_strategy, kwargs, error, cancel_reason, traceparent FROM runs \
    WHERE thread_id = $1
    ORDER BY created_at DESC, run_id DESC LIMIT 1";

impl Db {
    /// Claims one run (see [`RunsRepo::claim`]) unless it runs on `not_on_thread`.
    async fn claim_off(
        &self,
        run_id: Uuid,
        now: Timestamp,
        not_on_thread: Option<Uuid>,
    ) -> StoreResult<Option<ClaimedRun>> {
        let client = self.client().await?;
        // A key lookup: the queue's index is not read. A claimer of the same row
        // waits for its lock and then sees the run no longer pending. Committed
        // asynchronously, as the run's settle makes it durable (`ASYNC_COMMIT`). The
        // status test is wrapped in `IS TRUE` as the settle's are (`settle_sql`): the
        // run is read by its primary key.
        let claimed = client
            .query_opt_cached(
                static_sql!(
                    "UPDATE runs SET status = 'running', updated_at = $2, started = true
                     FROM {ASYNC_COMMIT}
                     WHERE run_id = $1 AND (status = 'pending') IS TRUE AND available_at <= $2
                       AND thread_id IS DISTINCT FROM $3
                       AND NOT EXISTS (
                           SELECT 1 FROM runs busy
                           WHERE busy.thread_id = runs.thread_id AND busy.status = 'running'
                           OFFSET 0)
                       AND NOT EXISTS (
                           SELECT 1 FROM thread_state_holds hold
                           WHERE hold.thread_id = runs.thread_id AND hold.held_until > $2)
                     RETURNING {COLUMNS}, {NO_CHECKPOINT}"
                ),
                &[&run_id, &at(now), &not_on_thread],
            )
            .await;
        match claimed {
            Ok(row) => row.map(|row| claimed_run(&row, 0)).transpose(),
            // Another run of the thread started first.
            Err(error) if is_unique_violation(&error) => Ok(None),
            Err(error) => Err(store_error(error)),
        }
    }

    /// A run that was already settled (or is unknown), as a settle reports it.
    async fn settled_as_stored(&self, run_id: Uuid) -> StoreResult<SettledRun> {
        let client = self.client().await?;
        let row = client
            .query_opt_cached(
                static_sql!("SELECT {SETTLED_COLUMNS} FROM runs WHERE run_id = $1"),
                &[&run_id],
            )
            .await
            .map_err(store_error)?
            .ok_or_else(run_not_found)?;
        settled_run(&row)
    }

    /// The delivery a settle's row reports inserted (`delivery_id`), as the engine
    /// delivers it.
    fn inserted_delivery(
        row: &Row,
        run: &SettledRun,
        settlement: Settlement,
        now: Timestamp,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let Some(webhook) = settlement.webhook else {
            return Ok(None);
        };
        let inserted: Option<Uuid> = Columns::of(row, "runs").column("delivery_id")?;
        Ok(inserted.map(|delivery_id| {
            let mut record = DeliveryRecord::at_settle(
                run.run_id,
                run.thread_id,
                run.status,
                settlement.interrupted,
                webhook,
                now,
            );
            record.delivery.delivery_id = delivery_id;
            record
        }))
    }
}

#[async_trait]
impl RunsRepo for Db {
    async fn create(&self, new: NewRun, thread_metadata: Metadata) -> StoreResult<Run> {
        let inserted = match self.insert_run(&new, &thread_metadata, new.claimed).await {
            // Another run of the thread started after this statement's snapshot: the
            // run waits for it, queued.
            Err(error) if new.claimed && is_one_running_violation(&error) => {
                self.insert_run(&new, &thread_metadata, false).await
            }
            inserted => inserted,
        };
        match inserted {
            Ok(Some(row)) => run(&row),
            Ok(None) => Err(AssistantStamp::changed(new.assistant_id)),
            Err(InsertError::Store(error)) => Err(error),
            Err(InsertError::Db(error)) if is_foreign_key_violation(&error) => Err(
                StoreError::not_found(format!("Thread with ID {} not found", new.thread_id)),
            ),
            Err(InsertError::Db(error)) if is_unique_violation(&error) => Err(
                StoreError::conflict(format!("Run {} already exists", new.run_id)),
            ),
            Err(InsertError::Db(error)) => Err(store_error(error)),
        }
    }

    async fn thread_and_active(&self, thread_id: Uuid) -> StoreResult<Option<ThreadAndActive>> {
        let limit = self.limits.bounded(None);
        let client = self.client().await?;
        // One row per active run (the thread's columns repeated), or one row with empty
        // run columns when none is active; none for an unknown thread.
        let rows = client
            .query_cached(
                static_sql!(
                    "WITH thread AS (SELECT {THREAD_COLUMNS} FROM threads WHERE thread_id = $1)
                     SELECT thread.*, active.* FROM thread LEFT JOIN LATERAL (
                         SELECT {COLUMNS} FROM runs
                         WHERE thread_id = $1 AND status IN ('pending', 'running')
                         ORDER BY created_at, run_id LIMIT $2) active ON true"
                ),
                &[&thread_id, &count(limit)],
            )
            .await
            .map_err(store_error)?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let run_at_column = THREAD_COLUMNS.split(',').count();
        let mut active = Vec::with_capacity(rows.len());
        for row in &rows {
            let run_id: Option<Uuid> = Columns::of(row, "runs").column_at(run_at_column)?;
            if run_id.is_some() {
                active.push(run_at(row, run_at_column)?);
            }
        }
        Ok(Some(ThreadAndActive {
            thread: threads::thread_at(first, 0)?,
            active,
        }))
    }

    async fn create_with_thread(
        &self,
        thread: NewThread,
        new: NewRun,
    ) -> StoreResult<ThreadRunCreated> {
        if thread.thread_id != new.thread_id {
            return Err(StoreError::invalid(
                "a new thread's run must name that thread",
            ));
        }
        let now = self.now();
        let ttl = thread
            .ttl
            .map(|setting| threads::ttl_from(setting, now))
            .transpose()?;
        let (ttl_strategy, ttl_minutes, expires_at) = threads::ttl_columns(ttl.as_ref())?;
        let strategy = new.multitask_strategy.as_ref().map(enum_text).transpose()?;
        let as_read = new.assistant_as_read;
        let client = self.client().await?;
        // One statement: the run's foreign key is checked at its end, when the thread
        // row exists. A thread that existed already inserts nothing, so no run either,
        // and comes back instead, beside the (empty) run columns.
        let row = client
            .query_one_cached(
                static_sql!(
                    "WITH existing AS (
                         SELECT {THREAD_COLUMNS} FROM threads WHERE thread_id = $2),
                     assistant AS (SELECT {ASSISTANT_UNCHANGED} AS unchanged),
                     thread AS (
                         INSERT INTO threads ({THREAD_COLUMNS})
                         SELECT $2, $4, $4, $4, $11, $12, '{{}}'::jsonb, NULL, '{{}}'::jsonb,
                                NULL, $13, $14, $15
                         WHERE NOT EXISTS (SELECT 1 FROM existing)
                           AND (SELECT unchanged FROM assistant)
                         ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id),
                     run AS (
                         INSERT INTO runs ({COLUMNS}, available_at, started)
                         SELECT $1, thread.thread_id, $3, $4, $4,
                                CASE WHEN $16 THEN 'running' ELSE 'pending' END,
                                $5, $6, $7, NULL, NULL, $17, $8, $16
                         FROM thread
                         RETURNING {COLUMNS})
                     SELECT run.*, existing.*, assistant.unchanged AS assistant_unchanged
                     FROM assistant LEFT JOIN run ON true LEFT JOIN existing ON true"
                ),
                &[
                    &new.run_id,
                    &new.thread_id,
                    &new.assistant_id,
                    &at(now),
                    &Value::Object(new.metadata),
                    &strategy,
                    &new.kwargs,
                    &at(new.available_at),
                    &as_read.map(|stamp| stamp.version),
                    &as_read.map(|stamp| at(stamp.updated_at)),
                    &Value::Object(thread.metadata),
                    &enum_text(&thread.status)?,
                    &ttl_strategy,
                    &ttl_minutes,
                    &expires_at,
                    &new.claimed,
                    &new.traceparent,
                ],
            )
            .await;
        let row = match row {
            Ok(row) => row,
            Err(error) if is_unique_violation(&error) => {
                return Err(StoreError::conflict(format!(
                    "Run {} already exists",
                    new.run_id
                )));
            }
            Err(error) => return Err(store_error(error)),
        };
        let columns = Columns::of(&row, "runs");
        if columns.column_at::<Option<Uuid>>(0)?.is_some() {
            return Ok(ThreadRunCreated::Created(run(&row)?));
        }
        // The thread's columns follow the run's; None when it was made concurrently,
        // after this statement's snapshot.
        let thread_at = COLUMNS.split(',').count();
        let existing = columns
            .column_at::<Option<Uuid>>(thread_at)?
            .map(|_| threads::thread_at(&row, thread_at))
            .transpose()?;
        if existing.is_none() && !columns.column::<bool>("assistant_unchanged")? {
            return Err(AssistantStamp::changed(new.assistant_id));
        }
        Ok(ThreadRunCreated::ThreadExists(existing))
    }

    async fn get(&self, run_id: Uuid) -> StoreResult<Option<Run>> {
        let client = self.client().await?;
        client
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM runs WHERE run_id = $1"),
                &[&run_id],
            )
            .await
            .map_err(store_error)?
            .map(|row| run(&row))
            .transpose()
    }

    async fn list(&self, thread_id: Uuid, query: &RunListQuery) -> StoreResult<Vec<Run>> {
        let limit = self.limits.runs(query.limit);
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM runs"));
        let thread = sql.bind(thread_id);
        let mut conditions = vec![format!("thread_id = {thread}")];
        if let Some(status) = query.status {
            let p = sql.bind(enum_text(&status)?);
            conditions.push(format!("status = {p}"));
        }
        push_where(&mut sql, &conditions);
        sql.push(" ORDER BY created_at DESC, run_id DESC");
        if let Some(limit) = limit {
            let p = sql.bind(count(limit));
            sql.push(&format!(" LIMIT {p}"));
        }
        let offset = sql.bind(count(query.offset));
        sql.push(&format!(" OFFSET {offset}"));
        let client = self.client().await?;
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        rows.iter().map(run).collect()
    }

    async fn latest(&self, thread_id: Uuid) -> StoreResult<Option<Run>> {
        let client = self.client().await?;
        client
            .query_opt_cached(LATEST_SQL, &[&thread_id])
            .await
            .map_err(store_error)?
            .map(|row| run(&row))
            .transpose()
    }

    async fn active(&self, query: &ActiveRunsQuery) -> StoreResult<Vec<Run>> {
        let limit = self.limits.bounded(query.limit);
        if let (Some(thread_id), None, None) = (query.thread_id, query.status, &query.enforced) {
            // The common question (does anything wait on this thread?), answered from
            // the thread's entries of `runs_active_by_thread`.
            let client = self.client().await?;
            let rows = client
                .query_cached(ACTIVE_OF_THREAD_SQL, &[&thread_id, &count(limit)])
                .await
                .map_err(store_error)?;
            return rows.iter().map(run).collect();
        }
        let Some(sql) = active_sql(query, limit) else {
            return Ok(Vec::new());
        };
        let client = self.client().await?;
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        rows.iter().map(run).collect()
    }

    async fn claim_next(&self, now: Timestamp) -> StoreResult<Option<Claimed>> {
        let client = self.client().await?;
        for _ in 0..CLAIM_ATTEMPTS {
            match client.query_opt_cached(CLAIM_SQL, &[&at(now)]).await {
                Ok(row) => {
                    return row
                        .map(|row| {
                            Ok(Claimed {
                                run: run(&row)?,
                                // Also counts runs whose thread is busy: it may wake a
                                // worker for nothing, never leave a due run unseen.
                                more_pending: Columns::of(&row, "runs").column("more_pending")?,
                            })
                        })
                        .transpose();
                }
                // Another claimer started a run of the same thread first; the
                // thread now has a running run, so the next look skips it.
                Err(error) if is_unique_violation(&error) => continue,
                Err(error) => return Err(store_error(error)),
            }
        }
        Ok(None)
    }

    async fn claim(&self, run_id: Uuid, now: Timestamp) -> StoreResult<Option<ClaimedRun>> {
        self.claim_off(run_id, now, None).await
    }

    async fn next_available_at(&self, now: Timestamp) -> StoreResult<Option<Timestamp>> {
        let client = self.client().await?;
        let row = client
            .query_one_cached(NEXT_AVAILABLE_SQL, &[&at(now)])
            .await
            .map_err(store_error)?;
        let earliest: Option<chrono::DateTime<chrono::Utc>> =
            Columns::of(&row, "runs").column_at(0)?;
        Ok(earliest.map(ts))
    }

    async fn request_cancel(&self, run_id: Uuid, reason: &str) -> StoreResult<CancelOutcome> {
        let now = self.now();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let row = tx
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM runs WHERE run_id = $1 FOR UPDATE"),
                &[&run_id],
            )
            .await
            .map_err(store_error)?
            .ok_or_else(|| StoreError::not_found("No runs found to cancel."))?;
        let current = run(&row)?;
        let result = match current.status {
            RunStatus::Pending => {
                let row = tx
                    .query_one_cached(
                        static_sql!(
                            "UPDATE runs SET status = 'cancelled', updated_at = $2,
                                 cancel_reason = COALESCE(cancel_reason, $3)
                             WHERE run_id = $1 RETURNING {COLUMNS}"
                        ),
                        &[&run_id, &at(now), &reason],
                    )
                    .await
                    .map_err(store_error)?;
                CancelOutcome::Cancelled(run(&row)?)
            }
            RunStatus::Running => {
                let row = tx
                    .query_one_cached(
                        static_sql!(
                            "UPDATE runs SET cancel_requested = true,
                                 cancel_reason = COALESCE(cancel_reason, $2)
                             WHERE run_id = $1 RETURNING {COLUMNS}"
                        ),
                        &[&run_id, &reason],
                    )
                    .await
                    .map_err(store_error)?;
                CancelOutcome::Requested(run(&row)?)
            }
            _ => CancelOutcome::AlreadyTerminal(current),
        };
        tx.commit().await.map_err(store_error)?;
        Ok(result)
    }

    async fn cancel_requested(&self, run_id: Uuid) -> StoreResult<bool> {
        let client = self.client().await?;
        let row = client
            .query_opt_cached(
                "SELECT cancel_requested FROM runs WHERE run_id = $1",
                &[&run_id],
            )
            .await
            .map_err(store_error)?
            .ok_or_else(run_not_found)?;
        Columns::of(&row, "runs").column_at(0)
    }

    async fn settle_and_mirror(
        &self,
        run_id: Uuid,
        settlement: Settlement,
        mirror: ThreadMirror,
        next: Option<ClaimNext>,
    ) -> StoreResult<SettledAndMirrored> {
        let requested = settlement.status;
        let status = enum_text(&final_status(&settlement, false)?)?;
        let cancelled = enum_text(&final_status(&settlement, true)?)?;
        let error = settlement.error.as_ref().map(encode).transpose()?;
        let now = self.now();
        let mirror = threads::MirrorParams::new(mirror, now)?;
        let delivery = settlement
            .webhook
            .as_ref()
            .map(|webhook| DeliveryParams::new(&settlement, webhook, now))
            .transpose()?;
        let with_delivery = delivery.is_some();
        let client = self.client().await?;
        let settle = |next: Option<ClaimNext>| {
            let claim = next.map(|next| (next.run_id, at(next.now)));
            let client = &client;
            let mirror = &mirror;
            let delivery = &delivery;
            let (status, cancelled, error) = (&status, &cancelled, &error);
            async move {
                let delivery_params = delivery.as_ref().map(DeliveryParams::params);
                let claim_params = claim
                    .as_ref()
                    .map(|(run, at)| [run as &(dyn ToSql + Sync), at]);
                client
                    .query_opt_cached(
                        settle_and_mirror_sql(claim.is_some(), with_delivery),
                        &[
                            &[&run_id as &(dyn ToSql + Sync)][..],
                            &mirror.params(),
                            &[status, cancelled, error],
                            claim_params.as_ref().map_or(&[][..], |params| &params[..]),
                            delivery_params
                                .as_ref()
                                .map_or(&[][..], |params| &params[..]),
                        ]
                        .concat(),
                    )
                    .await
            }
        };
        let row = match settle(next).await {
            // Another instance started a run of the next run's thread after this
            // statement's snapshot: settle alone, and leave that run to a claim by id.
            Err(error) if next.is_some() && is_unique_violation(&error) => settle(None).await,
            other => other,
        }
        .map_err(store_error)?;
        let Some(row) = row else {
            // Already terminal, or unknown.
            return Ok(SettledAndMirrored {
                settled: Settled {
                    run: self.settled_as_stored(run_id).await?,
                    changed: false,
                    delivery: None,
                },
                others_wait: None,
                next: None,
            });
        };
        let run = settled_run(&row)?;
        let columns = Columns::of(&row, "runs");
        let others_wait = if run.status == requested {
            // A thread gone meanwhile has nothing waiting on it.
            let others_wait: Option<bool> = columns.column("others_wait")?;
            Some(others_wait.unwrap_or(false))
        } else {
            None
        };
        let delivery = Self::inserted_delivery(&row, &run, settlement, now)?;
        // The claimed run's columns and `thread_has_no_checkpoint`, when the statement claimed,
        // follow the settled run's, `others_wait` and, with a delivery, its id.
        let next_at = SETTLED_COLUMNS.split(',').count() + 1 + usize::from(with_delivery);
        let next = if row.len() > next_at {
            columns
                .column_at::<Option<Uuid>>(next_at)?
                .map(|_| claimed_run(&row, next_at))
                .transpose()?
        } else {
            None
        };
        Ok(SettledAndMirrored {
            settled: Settled {
                run,
                changed: true,
                delivery,
            },
            others_wait,
            next,
        })
    }

    async fn settle(&self, run_id: Uuid, settlement: Settlement) -> StoreResult<Settled> {
        // One statement: the terminal status and the delivery row commit together.
        let status = enum_text(&final_status(&settlement, false)?)?;
        let cancelled = enum_text(&final_status(&settlement, true)?)?;
        let error = settlement.error.as_ref().map(encode).transpose()?;
        let now = self.now();
        let delivery = settlement
            .webhook
            .as_ref()
            .map(|webhook| DeliveryParams::new(&settlement, webhook, now))
            .transpose()?;
        let client = self.client().await?;
        let delivery_params = delivery.as_ref().map(DeliveryParams::params);
        let row = client
            .query_opt_cached(
                settle_sql(delivery.is_some()),
                &[
                    &[
                        &run_id as &(dyn ToSql + Sync),
                        &status,
                        &cancelled,
                        &error,
                        &at(now),
                    ][..],
                    delivery_params
                        .as_ref()
                        .map_or(&[][..], |params| &params[..]),
                ]
                .concat(),
            )
            .await
            .map_err(store_error)?;
        let Some(row) = row else {
            // Already terminal, or unknown.
            return Ok(Settled {
                run: self.settled_as_stored(run_id).await?,
                changed: false,
                delivery: None,
            });
        };
        let run = settled_run(&row)?;
        let delivery = Self::inserted_delivery(&row, &run, settlement, now)?;
        Ok(Settled {
            run,
            changed: true,
            delivery,
        })
    }

    async fn delete(&self, run_id: Uuid) -> StoreResult<()> {
        let client = self.client().await?;
        let deleted = client
            .execute_cached("DELETE FROM runs WHERE run_id = $1", &[&run_id])
            .await
            .map_err(store_error)?;
        if deleted == 0 {
            return Err(run_not_found());
        }
        Ok(())
    }
}
