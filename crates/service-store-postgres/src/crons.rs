//! Crons: `next_run_date` is computed by the shared schedule code from the injected
//! clock; filters, sorting, paging and the due scan run in SQL, and `advance` is a
//! conditional update so each firing is claimed once across instances.

use async_trait::async_trait;
use serde_json::Value;
use service_store::schedule::Schedule;
use service_store::{
    CronFilter, CronPatch, CronQuery, CronSortBy, CronsRepo, NewCron, StoreError, StoreResult,
    next_run,
};
use service_types::{Cron, Timestamp};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::{
    Built, Cached, Columns, Db, Sql, at, count, direction, enum_from, enum_text, object,
    push_where, static_sql, ts,
};
use crate::error::{is_foreign_key_violation, is_unique_violation, store_error};
use crate::filter::metadata_condition;
use service_store::containment::merge_enforced;

const COLUMNS: &str = "cron_id, assistant_id, thread_id, user_id, schedule, timezone, end_time, \
    next_run_date, payload, metadata, on_run_completed, enabled, created_at, updated_at";

fn not_found() -> StoreError {
    StoreError::not_found("Not Found")
}

fn cron(row: &Row) -> StoreResult<Cron> {
    let row = Columns::of(row, "crons");
    let end_time: Option<chrono::DateTime<chrono::Utc>> = row.column("end_time")?;
    let next: Option<chrono::DateTime<chrono::Utc>> = row.column("next_run_date")?;
    let on_completed: Option<String> = row.column("on_run_completed")?;
    Ok(Cron {
        cron_id: row.column("cron_id")?,
        assistant_id: row.column("assistant_id")?,
        thread_id: row.column("thread_id")?,
        user_id: row.column("user_id")?,
        schedule: row.column("schedule")?,
        timezone: row.column("timezone")?,
        end_time: end_time.map(ts),
        next_run_date: next.map(ts),
        payload: row.column("payload")?,
        metadata: object(row.column("metadata")?, "metadata")?,
        on_run_completed: on_completed
            .map(|text| enum_from(text, "on_run_completed"))
            .transpose()?,
        enabled: row.column("enabled")?,
        created_at: ts(row.column("created_at")?),
        updated_at: ts(row.column("updated_at")?),
    })
}

fn conditions(sql: &mut Sql, filter: &CronFilter) -> Vec<String> {
    let mut conditions = Vec::new();
    if let Some(id) = filter.assistant_id {
        let p = sql.bind(id);
        conditions.push(format!("assistant_id = {p}"));
    }
    if let Some(id) = filter.thread_id {
        let p = sql.bind(id);
        conditions.push(format!("thread_id = {p}"));
    }
    if let Some(enabled) = filter.enabled {
        let p = sql.bind(enabled);
        conditions.push(format!("enabled = {p}"));
    }
    let merged = merge_enforced(filter.metadata.as_ref(), filter.enforced.as_ref());
    match metadata_condition(sql, merged) {
        Some(condition) => conditions.extend(condition),
        None => conditions.push("false".to_owned()),
    }
    conditions
}

fn sort_column(sort_by: CronSortBy) -> &'static str {
    match sort_by {
        CronSortBy::CronId => "cron_id",
        CronSortBy::AssistantId => "assistant_id",
        CronSortBy::ThreadId => "thread_id",
        CronSortBy::CreatedAt => "created_at",
        CronSortBy::UpdatedAt => "updated_at",
        CronSortBy::NextRunDate => "next_run_date",
        CronSortBy::EndTime => "end_time",
    }
}

impl Db {
    /// Writes every mutable column of `cron` (the row was read `FOR UPDATE`).
    async fn write_cron(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        cron: &Cron,
    ) -> StoreResult<()> {
        let on_completed = cron.on_run_completed.as_ref().map(enum_text).transpose()?;
        tx.execute_cached(
            "UPDATE crons SET schedule = $2, timezone = $3, end_time = $4, next_run_date = $5,
                payload = $6, metadata = $7, on_run_completed = $8, enabled = $9, updated_at = $10
             WHERE cron_id = $1",
            &[
                &cron.cron_id,
                &cron.schedule,
                &cron.timezone,
                &cron.end_time.map(at),
                &cron.next_run_date.map(at),
                &cron.payload,
                &Value::Object(cron.metadata.clone()),
                &on_completed,
                &cron.enabled,
                &at(cron.updated_at),
            ],
        )
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// Reads a cron for update, lets `change` edit it, writes it back.
    async fn change_cron(
        &self,
        cron_id: Uuid,
        change: impl FnOnce(&mut Cron) -> StoreResult<()> + Send,
    ) -> StoreResult<Cron> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let row = tx
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM crons WHERE cron_id = $1 FOR UPDATE"),
                &[&cron_id],
            )
            .await
            .map_err(store_error)?
            .ok_or_else(not_found)?;
        let mut current = cron(&row)?;
        change(&mut current)?;
        self.write_cron(&tx, &current).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(current)
    }
}

#[async_trait]
impl CronsRepo for Db {
    async fn create(&self, new: NewCron) -> StoreResult<Cron> {
        let now = self.now();
        let schedule = Schedule::parse(&new.schedule, new.timezone.as_deref())?;
        let next = schedule.next_after(now, new.end_time);
        let on_completed = new.on_run_completed.as_ref().map(enum_text).transpose()?;
        let client = self.client().await?;
        let inserted = client
            .query_one_cached(
                static_sql!(
                    "INSERT INTO crons ({COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
                     RETURNING {COLUMNS}"
                ),
                &[
                    &new.cron_id,
                    &new.assistant_id,
                    &new.thread_id,
                    &new.user_id,
                    &new.schedule,
                    &new.timezone,
                    &new.end_time.map(at),
                    &next.map(at),
                    &new.payload,
                    &Value::Object(new.metadata),
                    &on_completed,
                    &new.enabled,
                    &at(now),
                ],
            )
            .await;
        match inserted {
            Ok(row) => cron(&row),
            Err(error) if is_foreign_key_violation(&error) => Err(StoreError::not_found(format!(
                "Thread with ID {} not found",
                new.thread_id.unwrap_or_default()
            ))),
            Err(error) if is_unique_violation(&error) => Err(StoreError::conflict(format!(
                "Cron {} already exists",
                new.cron_id
            ))),
            Err(error) => Err(store_error(error)),
        }
    }

    async fn get(&self, cron_id: Uuid) -> StoreResult<Option<Cron>> {
        let client = self.client().await?;
        client
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM crons WHERE cron_id = $1"),
                &[&cron_id],
            )
            .await
            .map_err(store_error)?
            .map(|row| cron(&row))
            .transpose()
    }

    async fn update(&self, cron_id: Uuid, patch: CronPatch) -> StoreResult<Cron> {
        let now = self.now();
        self.change_cron(cron_id, move |cron| patch.apply(cron, now))
            .await
    }

    async fn delete(&self, cron_id: Uuid) -> StoreResult<()> {
        let client = self.client().await?;
        let deleted = client
            .execute_cached("DELETE FROM crons WHERE cron_id = $1", &[&cron_id])
            .await
            .map_err(store_error)?;
        if deleted == 0 {
            return Err(not_found());
        }
        Ok(())
    }

    async fn search(&self, query: &CronQuery) -> StoreResult<Vec<Cron>> {
        let limit = self.limits.search(query.limit)?;
        let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM crons"));
        let conditions = conditions(&mut sql, &query.filter);
        push_where(&mut sql, &conditions);
        let dir = direction(query.sort_order);
        let limit_p = sql.bind(count(limit));
        let offset_p = sql.bind(count(query.offset));
        // PostgreSQL puts NULLs last ascending and first descending: "absent last".
        sql.push(&format!(
            " ORDER BY {} {dir}, cron_id {dir} LIMIT {limit_p} OFFSET {offset_p}",
            sort_column(query.sort_by)
        ));
        let client = self.client().await?;
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        rows.iter().map(cron).collect()
    }

    async fn count(&self, filter: &CronFilter) -> StoreResult<u64> {
        let mut sql = Sql::new("SELECT count(*) FROM crons");
        let conditions = conditions(&mut sql, filter);
        push_where(&mut sql, &conditions);
        let client = self.client().await?;
        let row = client.query_built_one(&sql).await.map_err(store_error)?;
        let total: i64 = Columns::of(&row, "crons").column_at(0)?;
        Ok(u64::try_from(total).unwrap_or_default())
    }

    async fn set_enabled(&self, cron_id: Uuid, enabled: bool) -> StoreResult<Cron> {
        let now = self.now();
        self.change_cron(cron_id, move |cron| {
            let overdue = cron.next_run_date.is_some_and(|at| at <= now);
            if enabled && !cron.enabled && overdue {
                cron.next_run_date = next_run(cron, now)?;
            }
            cron.enabled = enabled;
            cron.updated_at = now;
            Ok(())
        })
        .await
    }

    async fn due(&self, now: Timestamp, limit: usize) -> StoreResult<Vec<Cron>> {
        let limit = self.limits.bounded(Some(limit));
        let client = self.client().await?;
        let rows = client
            .query_cached(
                static_sql!(
                    "SELECT {COLUMNS} FROM crons WHERE enabled AND next_run_date <= $1
                     ORDER BY next_run_date, cron_id LIMIT $2"
                ),
                &[&at(now), &count(limit)],
            )
            .await
            .map_err(store_error)?;
        rows.iter().map(cron).collect()
    }

    async fn advance(&self, cron_id: Uuid, fired_for: Timestamp) -> StoreResult<Option<Cron>> {
        let now = self.now();
        let current = self.get(cron_id).await?.ok_or_else(not_found)?;
        if current.next_run_date != Some(fired_for) {
            return Ok(None);
        }
        let next = next_run(&current, now.max(fired_for))?;
        let client = self.client().await?;
        // Only the scheduler that still sees `fired_for` moves it on.
        let row = client
            .query_opt_cached(
                static_sql!(
                    "UPDATE crons SET next_run_date = $3, updated_at = $4
                     WHERE cron_id = $1 AND next_run_date = $2 AND schedule = $5
                       AND timezone IS NOT DISTINCT FROM $6
                       AND end_time IS NOT DISTINCT FROM $7
                     RETURNING {COLUMNS}"
                ),
                &[
                    &cron_id,
                    &at(fired_for),
                    &next.map(at),
                    &at(now),
                    &current.schedule,
                    &current.timezone,
                    &current.end_time.map(at),
                ],
            )
            .await
            .map_err(store_error)?;
        row.map(|row| cron(&row)).transpose()
    }
}
