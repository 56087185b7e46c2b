//! Threads: metadata, ttl and mirrored graph state; searches filter (metadata and
//! values by `@>`), sort and page in SQL. Deleting a thread cascades to its runs and
//! thread-scoped crons through foreign keys; deliveries have no foreign key and stay.

use async_trait::async_trait;
use serde_json::Value;
use service_store::{
    NewThread, StateHold, StoreError, StoreResult, ThreadFilter, ThreadMirror, ThreadPatch,
    ThreadQuery, ThreadSortBy, ThreadsRepo, TtlChange, validate_ttl,
};
use service_types::{IfExists, Thread, ThreadStatus, ThreadTtl, Timestamp, TtlSetting};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::db::{
    Built, Cached, Columns, Db, Sql, at, count, decode, direction, encode, enum_from, enum_text,
    object, push_where, static_sql, ts,
};
use crate::error::{is_unique_violation, store_error};
use crate::filter::metadata_condition;

/// A thread's columns, in the order [`thread_at`] reads them.
pub(crate) const COLUMNS: &str = "thread_id, created_at, updated_at, state_updated_at, metadata, \
    status, config, state_values, interrupts, error, ttl_strategy, ttl_minutes, expires_at";

/// The columns a mirror writes (`UPDATE threads SET ...`), shared by every statement
/// that mirrors: `$2` status, `$3` whether values are given, `$4` values, `$5`
/// interrupts, `$6` now, `$7` error; a `waiting` relation's `runs_wait` keeps the
/// thread busy. Columns are qualified: a statement may join rows with the same names.
pub(crate) const MIRROR_SET: &str = "
    status = CASE WHEN waiting.runs_wait THEN 'busy' ELSE $2 END,
    state_values = CASE WHEN $3 THEN $4::jsonb ELSE threads.state_values END,
    state_updated_at = CASE WHEN $3 THEN $6 ELSE threads.state_updated_at END,
    interrupts = $5,
    metadata = CASE WHEN $7::text IS NULL THEN threads.metadata - 'error'
               ELSE threads.metadata || jsonb_build_object('error', $7::text) END,
    error = $7, updated_at = $6";

/// A mirror's [`MIRROR_SET`] parameters.
pub(crate) struct MirrorParams {
    pub(crate) status: String,
    pub(crate) has_values: bool,
    pub(crate) values: Value,
    pub(crate) interrupts: Value,
    pub(crate) now: chrono::DateTime<chrono::Utc>,
    pub(crate) error: Option<String>,
}

impl MirrorParams {
    /// `$2` to `$7` of [`MIRROR_SET`], in order.
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 6] {
        [
            &self.status,
            &self.has_values,
            &self.values,
            &self.interrupts,
            &self.now,
            &self.error,
        ]
    }

    pub(crate) fn new(mirror: ThreadMirror, now: Timestamp) -> StoreResult<Self> {
        Ok(Self {
            status: enum_text(&mirror.status)?,
            has_values: mirror.values.is_some(),
            values: mirror.values.unwrap_or(Value::Null),
            interrupts: encode(&mirror.interrupts)?,
            now: at(now),
            error: mirror.error,
        })
    }
}

fn missing(thread_id: Uuid) -> StoreError {
    StoreError::not_found(format!("Thread with ID {thread_id} not found"))
}

pub(crate) fn ttl_from(setting: TtlSetting, now: Timestamp) -> StoreResult<ThreadTtl> {
    validate_ttl(setting)?;
    Ok(ThreadTtl {
        strategy: setting.strategy(),
        ttl_minutes: setting.minutes(),
        expires_at: now.plus_minutes(setting.minutes()),
    })
}

pub(crate) fn thread(row: &Row) -> StoreResult<Thread> {
    thread_at(row, 0)
}

/// The thread whose [`COLUMNS`] start at column `first` of `row` (by position, so a
/// statement may return them after another relation's columns of the same names).
pub(crate) fn thread_at(row: &Row, first: usize) -> StoreResult<Thread> {
    let column = |offset: usize| first + offset;
    let row = Columns::of(row, "threads");
    let expires_at: Option<chrono::DateTime<chrono::Utc>> = row.column_at(column(12))?;
    let ttl = match expires_at {
        Some(expires_at) => Some(ThreadTtl {
            strategy: enum_from(
                row.column_at::<Option<String>>(column(10))?
                    .unwrap_or_else(|| "delete".to_owned()),
                "ttl_strategy",
            )?,
            ttl_minutes: row
                .column_at::<Option<f64>>(column(11))?
                .unwrap_or_default(),
            expires_at: ts(expires_at),
        }),
        None => None,
    };
    Ok(Thread {
        thread_id: row.column_at(column(0))?,
        created_at: ts(row.column_at(column(1))?),
        updated_at: ts(row.column_at(column(2))?),
        state_updated_at: ts(row.column_at(column(3))?),
        metadata: object(row.column_at(column(4))?, "metadata")?,
        status: enum_from(row.column_at(column(5))?, "status")?,
        config: row.column_at(column(6))?,
        values: row.column_at(column(7))?,
        interrupts: decode(row.column_at(column(8))?, "interrupts")?,
        error: row.column_at(column(9))?,
        ttl,
    })
}

/// The ttl columns: strategy, minutes, expiry.
type TtlColumns = (
    Option<String>,
    Option<f64>,
    Option<chrono::DateTime<chrono::Utc>>,
);

/// The ttl columns of an optional ttl.
pub(crate) fn ttl_columns(ttl: Option<&ThreadTtl>) -> StoreResult<TtlColumns> {
    Ok(match ttl {
        Some(ttl) => (
            Some(enum_text(&ttl.strategy)?),
            Some(ttl.ttl_minutes),
            Some(at(ttl.expires_at)),
        ),
        None => (None, None, None),
    })
}

/// WHERE conditions of a thread filter; `None` when the request and enforced
/// metadata collide (the filter matches nothing).
pub(crate) fn conditions(sql: &mut Sql, filter: &ThreadFilter) -> StoreResult<Option<Vec<String>>> {
    let Some(metadata) = metadata_condition(sql, filter.effective_metadata()) else {
        return Ok(None);
    };
    let mut conditions = Vec::from_iter(metadata);
    if let Some(ids) = &filter.ids {
        let p = sql.bind(ids.clone());
        conditions.push(format!("thread_id = ANY({p}::uuid[])"));
    }
    for excluded in &filter.exclude_metadata {
        let p = sql.bind(Value::Object(excluded.clone()));
        conditions.push(format!("NOT (metadata @> {p}::jsonb)"));
    }
    if let Some(status) = filter.status {
        let p = sql.bind(enum_text(&status)?);
        conditions.push(format!("status = {p}"));
    }
    if let Some(values) = &filter.values {
        let p = sql.bind(Value::Object(values.clone()));
        conditions.push(format!(
            "(jsonb_typeof(state_values) = 'object' AND state_values @> {p}::jsonb)"
        ));
    }
    Ok(Some(conditions))
}

fn sort_column(sort_by: ThreadSortBy) -> &'static str {
    match sort_by {
        ThreadSortBy::ThreadId => "thread_id",
        ThreadSortBy::Status => "status",
        ThreadSortBy::CreatedAt => "created_at",
        ThreadSortBy::UpdatedAt => "updated_at",
        ThreadSortBy::StateUpdatedAt => "state_updated_at",
    }
}

/// The search statement (shared with the EXPLAIN check).
pub(crate) fn search_sql(query: &ThreadQuery, limit: usize) -> StoreResult<Option<Sql>> {
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM threads"));
    let Some(conditions) = conditions(&mut sql, &query.filter)? else {
        return Ok(None);
    };
    push_where(&mut sql, &conditions);
    let dir = direction(query.sort_order);
    let limit_p = sql.bind(count(limit));
    let offset_p = sql.bind(count(query.offset));
    sql.push(&format!(
        " ORDER BY {} {dir}, thread_id {dir} LIMIT {limit_p} OFFSET {offset_p}",
        sort_column(query.sort_by)
    ));
    Ok(Some(sql))
}

impl Db {
    /// Runs an `UPDATE ... RETURNING` of one thread; no row is `missing_error`.
    async fn thread_update(
        &self,
        sql: &'static str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        missing_error: StoreError,
    ) -> StoreResult<Thread> {
        let client = self.client().await?;
        let row = client
            .query_opt_cached(sql, params)
            .await
            .map_err(store_error)?
            .ok_or(missing_error)?;
        thread(&row)
    }

    /// Runs an UPDATE of one thread; `missing_error` when no row matched.
    async fn thread_change(
        &self,
        sql: &'static str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        missing_error: StoreError,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        let changed = client
            .execute_cached(sql, params)
            .await
            .map_err(store_error)?;
        if changed == 0 {
            return Err(missing_error);
        }
        Ok(())
    }
}

impl Db {
    /// Writes a turn's outcome onto the thread; with `busy_while_runs_wait`, the thread
    /// stays busy when pending or running runs wait on it. Returns whether any do
    /// (false when not asked).
    pub(crate) async fn write_mirror(
        &self,
        thread_id: Uuid,
        mirror: ThreadMirror,
        busy_while_runs_wait: bool,
    ) -> StoreResult<bool> {
        let mirror = MirrorParams::new(mirror, self.now())?;
        let client = self.client().await?;
        let row = client
            .query_opt_cached(
                static_sql!(
                    "WITH waiting AS (
                         SELECT $8 AND EXISTS (
                             SELECT 1 FROM runs
                             WHERE thread_id = $1 AND status IN ('pending', 'running')) AS runs_wait)
                     UPDATE threads SET {MIRROR_SET}
                     FROM waiting
                     WHERE thread_id = $1
                     RETURNING waiting.runs_wait"
                ),
                &[&[&thread_id as &(dyn ToSql + Sync)][..], &mirror.params(), &[&busy_while_runs_wait]]
                    .concat(),
            )
            .await
            .map_err(store_error)?;
        let row = row.ok_or_else(|| missing(thread_id))?;
        Columns::of(&row, "threads").column_at(0)
    }
}

#[async_trait]
impl ThreadsRepo for Db {
    async fn create(&self, new: NewThread, if_exists: IfExists) -> StoreResult<Thread> {
        let now = self.now();
        let ttl = new.ttl.map(|setting| ttl_from(setting, now)).transpose()?;
        let (strategy, minutes, expires) = ttl_columns(ttl.as_ref())?;
        let client = self.client().await?;
        let inserted = client
            .query_opt_cached(
                static_sql!(
                    "INSERT INTO threads ({COLUMNS})
                     VALUES ($1, $2, $2, $2, $3, $7, '{{}}'::jsonb, NULL, '{{}}'::jsonb, NULL,
                             $4, $5, $6)
                     ON CONFLICT (thread_id) DO NOTHING RETURNING {COLUMNS}"
                ),
                &[
                    &new.thread_id,
                    &at(now),
                    &Value::Object(new.metadata),
                    &strategy,
                    &minutes,
                    &expires,
                    &enum_text(&new.status)?,
                ],
            )
            .await
            .map_err(store_error)?;
        if let Some(row) = inserted {
            return thread(&row);
        }
        match if_exists {
            IfExists::Raise => Err(StoreError::conflict(format!(
                "Thread with ID {} already exists",
                new.thread_id
            ))),
            IfExists::DoNothing => self
                .get(new.thread_id)
                .await?
                .ok_or_else(|| StoreError::transient("thread vanished during create")),
        }
    }

    async fn get(&self, thread_id: Uuid) -> StoreResult<Option<Thread>> {
        let client = self.client().await?;
        client
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM threads WHERE thread_id = $1"),
                &[&thread_id],
            )
            .await
            .map_err(store_error)?
            .map(|row| thread(&row))
            .transpose()
    }

    async fn patch(&self, thread_id: Uuid, patch: ThreadPatch) -> StoreResult<Thread> {
        let now = self.now();
        let metadata = Value::Object(patch.metadata.unwrap_or_default());
        let (set_ttl, ttl) = match patch.ttl {
            TtlChange::Keep => (false, None),
            TtlChange::Clear => (true, None),
            TtlChange::Set(setting) => (true, Some(ttl_from(setting, now)?)),
        };
        let (strategy, minutes, expires) = ttl_columns(ttl.as_ref())?;
        self.thread_update(
            static_sql!(
                "UPDATE threads SET metadata = metadata || $2::jsonb, updated_at = $3,
                    ttl_strategy = CASE WHEN $4 THEN $5 ELSE ttl_strategy END,
                    ttl_minutes = CASE WHEN $4 THEN $6 ELSE ttl_minutes END,
                    expires_at = CASE WHEN $4 THEN $7 ELSE expires_at END
                 WHERE thread_id = $1 RETURNING {COLUMNS}"
            ),
            &[
                &thread_id,
                &metadata,
                &at(now),
                &set_ttl,
                &strategy,
                &minutes,
                &expires,
            ],
            StoreError::not_found("Not Found"),
        )
        .await
    }

    async fn set_status(&self, thread_id: Uuid, status: ThreadStatus) -> StoreResult<()> {
        let now = self.now();
        self.thread_change(
            static_sql!(
                "UPDATE threads SET status = $2, updated_at = $3
                 WHERE thread_id = $1"
            ),
            &[&thread_id, &enum_text(&status)?, &at(now)],
            missing(thread_id),
        )
        .await
    }

    async fn mirror(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<()> {
        self.write_mirror(thread_id, mirror, false).await.map(drop)
    }

    async fn mirror_after_run(&self, thread_id: Uuid, mirror: ThreadMirror) -> StoreResult<bool> {
        self.write_mirror(thread_id, mirror, true).await
    }

    async fn hold_state(&self, thread_id: Uuid, until: Timestamp) -> StoreResult<StateHold> {
        let now = at(self.now());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        // The thread's row lock first: a run's create writes that row in its own step,
        // so once it is held, the check below (a statement of its own, hence a fresh
        // snapshot) sees every run created before, and runs created after see the hold.
        // The row is rewritten (unchanged), not only locked: a run created to start at
        // once whose statement began before this commits sees the row changed under
        // it, and is queued instead (`RunsRepo::create`).
        tx.query_opt_cached(
            "UPDATE threads SET status = status WHERE thread_id = $1 RETURNING 1",
            &[&thread_id],
        )
        .await
        .map_err(store_error)?
        .ok_or_else(|| missing(thread_id))?;
        let busy: bool = tx
            .query_one_cached(
                "SELECT EXISTS (SELECT 1 FROM runs
                     WHERE thread_id = $1 AND status IN ('pending', 'running'))
                 OR EXISTS (SELECT 1 FROM thread_state_holds
                     WHERE thread_id = $1 AND held_until > $2)",
                &[&thread_id, &now],
            )
            .await
            .map_err(store_error)
            .and_then(|row| Columns::of(&row, "runs").column_at(0))?;
        if busy {
            return Err(StateHold::thread_busy());
        }
        let hold = StateHold {
            thread_id,
            hold_id: Uuid::now_v7(),
        };
        tx.execute_cached(
            "INSERT INTO thread_state_holds (thread_id, hold_id, held_until)
             VALUES ($1, $2, $3)
             ON CONFLICT (thread_id)
             DO UPDATE SET hold_id = excluded.hold_id, held_until = excluded.held_until",
            &[&thread_id, &hold.hold_id, &at(until)],
        )
        .await
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        Ok(hold)
    }

    async fn release_state(&self, hold: StateHold) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute_cached(
                "DELETE FROM thread_state_holds WHERE thread_id = $1 AND hold_id = $2",
                &[&hold.thread_id, &hold.hold_id],
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn delete(&self, thread_id: Uuid) -> StoreResult<()> {
        let client = self.client().await?;
        let deleted = client
            .execute_cached("DELETE FROM threads WHERE thread_id = $1", &[&thread_id])
            .await
            .map_err(store_error)?;
        if deleted == 0 {
            return Err(missing(thread_id));
        }
        Ok(())
    }

    async fn search(&self, query: &ThreadQuery) -> StoreResult<Vec<Thread>> {
        let limit = self.limits.search(query.limit)?;
        let Some(sql) = search_sql(query, limit)? else {
            return Ok(Vec::new());
        };
        let client = self.client().await?;
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        rows.iter().map(thread).collect()
    }

    async fn count(&self, filter: &ThreadFilter) -> StoreResult<u64> {
        let mut sql = Sql::new("SELECT count(*) FROM threads");
        let Some(conditions) = conditions(&mut sql, filter)? else {
            return Ok(0);
        };
        push_where(&mut sql, &conditions);
        let client = self.client().await?;
        let row = client.query_built_one(&sql).await.map_err(store_error)?;
        let total: i64 = Columns::of(&row, "threads").column_at(0)?;
        Ok(u64::try_from(total).unwrap_or_default())
    }

    async fn copy(&self, source: Uuid, new_id: Uuid) -> StoreResult<Thread> {
        let now = self.now();
        let client = self.client().await?;
        let copied = client
            .query_opt_cached(
                static_sql!(
                    "INSERT INTO threads ({COLUMNS})
                     SELECT $2, $3, $3, $3, metadata,
                            CASE WHEN status = 'busy' THEN 'idle' ELSE status END,
                            config, state_values, interrupts, error, NULL, NULL, NULL
                     FROM threads WHERE thread_id = $1
                     RETURNING {COLUMNS}"
                ),
                &[&source, &new_id, &at(now)],
            )
            .await;
        match copied {
            Ok(Some(row)) => thread(&row),
            Ok(None) => Err(missing(source)),
            Err(error) if is_unique_violation(&error) => Err(StoreError::conflict(format!(
                "Thread with ID {new_id} already exists"
            ))),
            Err(error) => Err(store_error(error)),
        }
    }

    async fn expired(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Uuid>> {
        let limit = self.limits.bounded(Some(limit));
        let client = self.client().await?;
        let rows = client
            .query_cached(
                "SELECT thread_id FROM threads WHERE expires_at <= $1
                 ORDER BY expires_at, thread_id LIMIT $2",
                &[&at(now), &count(limit)],
            )
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(|row| Columns::of(row, "threads").column_at(0))
            .collect()
    }
}
