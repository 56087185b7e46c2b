//! A run's insert on an existing thread: pending, or running when its creator asked to
//! run it at once and the thread is free for it.

use super::*;

/// A run insert's failure: the database's own error, to be told apart by the caller.
pub(super) enum InsertError {
    Db(tokio_postgres::Error),
    Store(StoreError),
}

impl From<StoreError> for InsertError {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

/// True when `error` is a second running run of one thread (the partial unique index).
pub(super) fn is_one_running_violation(error: &InsertError) -> bool {
    matches!(error, InsertError::Db(error) if is_unique_violation(error)
        && error.as_db_error().and_then(|db| db.constraint())
            == Some("runs_one_running_per_thread"))
}

impl Db {
    /// Inserts a run on an existing thread (see [`RunsRepo::create`]); `None` when its
    /// assistant changed since it was read.
    pub(super) async fn insert_run(
        &self,
        new: &NewRun,
        thread_metadata: &Metadata,
        claim: bool,
    ) -> Result<Option<Row>, InsertError> {
        let now = self.now();
        let strategy = new.multitask_strategy.as_ref().map(enum_text).transpose()?;
        let as_read = new.assistant_as_read;
        let client = self.client().await?;
        // One statement, so a failed insert leaves the thread as it was. Nothing is
        // inserted (nor the thread touched) when the assistant changed since the
        // caller read it. A run to be claimed starts running when the thread is free
        // for it: no other active run, no live state hold, and the thread's row as it
        // was when the statement began (`seen` is that version, `locked` the current
        // one, waited for): a state hold taken meanwhile rewrites that row before its
        // check, so a hold and a run started here never both succeed.
        client
            .query_opt_cached(
                static_sql!(
                    "WITH seen AS (SELECT xmin::text AS version FROM threads WHERE thread_id = $2),
                     locked AS (
                         SELECT xmin::text AS version FROM threads WHERE thread_id = $2
                         FOR NO KEY UPDATE),
                     claim AS (
                         SELECT $12::boolean AND $8::timestamptz <= $4::timestamptz
                             AND (SELECT version FROM locked) = (SELECT version FROM seen)
                             AND NOT EXISTS (
                                 SELECT 1 FROM runs active
                                 WHERE active.thread_id = $2
                                   AND active.status IN ('pending', 'running'))
                             AND NOT EXISTS (
                                 SELECT 1 FROM thread_state_holds hold
                                 WHERE hold.thread_id = $2 AND hold.held_until > $4)
                             AS running),
                     run AS (
                         INSERT INTO runs ({COLUMNS}, available_at, started)
                         SELECT $1, $2, $3, $4, $4,
                                CASE WHEN claim.running THEN 'running' ELSE 'pending' END,
                                $5, $6, $7, NULL, NULL, $13, $8, claim.running
                         FROM claim
                         WHERE {ASSISTANT_UNCHANGED}
                         RETURNING {COLUMNS}),
                     thread AS (
                         UPDATE threads SET metadata = metadata || $11::jsonb,
                             status = 'busy', updated_at = $4
                         WHERE thread_id = $2 AND EXISTS (SELECT 1 FROM run))
                     SELECT {COLUMNS} FROM run"
                ),
                &[
                    &new.run_id,
                    &new.thread_id,
                    &new.assistant_id,
                    &at(now),
                    &Value::Object(new.metadata.clone()),
                    &strategy,
                    &new.kwargs,
                    &at(new.available_at),
                    &as_read.map(|stamp| stamp.version),
                    &as_read.map(|stamp| at(stamp.updated_at)),
                    &Value::Object(thread_metadata.clone()),
                    &claim,
                    &new.traceparent,
                ],
            )
            .await
            .map_err(InsertError::Db)
    }
}
