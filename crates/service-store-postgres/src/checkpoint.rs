//! The PostgreSQL checkpoint saver (SPEC "What the service does" 4: checkpointer
//! `default`). Coordinates, parent, metadata and body (json text, TOASTed when large)
//! live in `checkpoints`, writes in `checkpoint_writes` (migrations 0004, 0008).
//! Ids come from `new_checkpoint_id()` (monotonic text), so "latest" and history
//! pages are backward range scans of the primary key.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use deadpool_postgres::{Object, Pool};
use serde_json::Value;
use service_graph::{
    CheckpointConfig, CheckpointListOptions, CheckpointTuple, Checkpointer, GraphError, NamedStep,
    NewCheckpoint, PendingWrite, new_checkpoint_id,
};
use service_store::StoreError;
use service_types::{JsonText, Metadata, PruneStrategy, Timestamp};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;

use crate::db::{ASYNC_COMMIT, Cached, Columns, static_sql};

/// A [`Checkpointer`] on PostgreSQL.
pub struct PostgresSaver {
    pool: Pool,
    _guard: Option<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for PostgresSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresSaver").finish_non_exhaustive()
    }
}

fn db_error(error: tokio_postgres::Error) -> GraphError {
    GraphError::checkpointer_caused_by(crate::error::describe(&error), error)
}

fn pool_error(error: deadpool_postgres::PoolError) -> GraphError {
    GraphError::checkpointer_caused_by(format!("database pool: {error}"), error)
}

/// A column that does not decode ([`Columns`]), as the saver reports it.
fn column_error(error: StoreError) -> GraphError {
    GraphError::Checkpointer {
        message: error.message,
        source: error.source,
    }
}

fn not_found(config: &CheckpointConfig) -> GraphError {
    GraphError::NotFound(format!("Checkpoint {config:?} not found"))
}

fn corrupt_write() -> GraphError {
    GraphError::checkpointer("corrupt checkpoint write")
}

/// The columns every read returns: coordinates, parent, metadata, time, body and the
/// writes in write order.
const SELECT: &str = "SELECT c.checkpoint_id, c.parent_checkpoint_id, c.metadata, c.created_at,
        c.body,
        (SELECT coalesce(jsonb_agg(jsonb_build_array(w.task_id, w.channel, w.value)
                                   ORDER BY w.seq), '[]'::jsonb)
         FROM checkpoint_writes w
         WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
           AND w.checkpoint_id = c.checkpoint_id) AS writes
    FROM checkpoints c";

/// A history page (shared with the EXPLAIN check): `$1` thread, `$2` namespace,
/// `$3` before (or NULL), `$4` metadata filter (or NULL), `$5` limit. The filter
/// is `@>` (GIN-friendly) plus per-key jsonb equality, the saver's rule
/// (`service_graph::metadata_matches`: each key equal, not merely contained; jsonb
/// compares numbers by value, so `1` equals `1.0` here).
pub(crate) fn list_sql() -> &'static str {
    static_sql!(
        "{SELECT}
         WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
           AND ($3::text IS NULL OR c.checkpoint_id < $3::text)
           AND ($4::jsonb IS NULL OR (c.metadata @> $4::jsonb AND NOT EXISTS (
               SELECT 1 FROM jsonb_each($4::jsonb) f
               WHERE c.metadata -> f.key IS DISTINCT FROM f.value)))
         ORDER BY c.checkpoint_id DESC
         LIMIT $5"
    )
}

impl PostgresSaver {
    /// A saver on `pool` (whose schema has been migrated).
    pub fn new(pool: Pool) -> Self {
        Self::with_guard(pool, None)
    }

    pub(crate) fn with_guard(pool: Pool, guard: Option<Arc<dyn Any + Send + Sync>>) -> Self {
        Self {
            pool,
            _guard: guard,
        }
    }

    /// Stores `chain` under `ids` after the checkpoint `config` names, each checkpoint
    /// the parent of the next, with `writes` recorded against the checkpoints they
    /// name: one statement, so one round trip, and atomic (the writes' foreign key
    /// fails the whole statement when their checkpoint is unknown; foreign keys are
    /// checked at the statement's end, when the new checkpoint rows exist). Committed
    /// asynchronously: a run's settle, or the thread mirror after a state update,
    /// makes it durable (`ASYNC_COMMIT`). Returns the new checkpoints' coordinates.
    async fn insert_checkpoints(
        &self,
        config: &CheckpointConfig,
        ids: Vec<String>,
        chain: Vec<NewCheckpoint>,
        writes: WriteColumns,
    ) -> Result<Vec<CheckpointConfig>, GraphError> {
        let mut parents = vec![config.checkpoint_id.clone()];
        parents.extend(ids.iter().cloned().map(Some));
        parents.truncate(ids.len());
        let (on, tasks, channels, values) = writes.into_parts();
        let (bodies, metadata): (Vec<JsonText>, Vec<Value>) = chain
            .into_iter()
            .map(|new| (new.checkpoint, Value::Object(new.metadata)))
            .unzip();
        let bodies: Vec<&str> = bodies.iter().map(JsonText::as_str).collect();
        let client = self.client().await?;
        let written = client
            .execute_cached(
                static_sql!(
                    "WITH writes AS (
                         INSERT INTO checkpoint_writes (thread_id, checkpoint_ns,
                             checkpoint_id, task_id, channel, value)
                         SELECT $1, $2, write.checkpoint_id, write.task_id, write.channel,
                             write.value
                         FROM unnest($3::text[], $8::text[], $9::text[], $10::jsonb[])
                             WITH ORDINALITY
                             AS write(checkpoint_id, task_id, channel, value, position)
                         ORDER BY write.position
                         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, channel)
                         DO UPDATE SET value = EXCLUDED.value,
                             seq = nextval('checkpoint_write_seq'))
                     INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id,
                         parent_checkpoint_id, metadata, created_at, body)
                     SELECT $1, $2, new.id, new.parent, new.metadata, $6, new.body::json
                     FROM unnest($4::text[], $5::text[], $7::jsonb[], $11::text[])
                         AS new(id, parent, metadata, body), {ASYNC_COMMIT}"
                ),
                &[
                    &config.thread_id,
                    &config.checkpoint_ns,
                    &on,
                    &ids,
                    &parents,
                    &Utc::now(),
                    &metadata,
                    &tasks,
                    &channels,
                    &values,
                    &bodies,
                ],
            )
            .await;
        match written {
            Ok(_) => Ok(ids
                .into_iter()
                .map(|id| CheckpointConfig {
                    thread_id: config.thread_id.clone(),
                    checkpoint_ns: config.checkpoint_ns.clone(),
                    checkpoint_id: Some(id),
                })
                .collect()),
            Err(error) if error.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                Err(not_found(config))
            }
            Err(error) => Err(db_error(error)),
        }
    }

    /// Stores one checkpoint after `config`, with `task_writes` against `config`'s.
    async fn insert_checkpoint(
        &self,
        config: &CheckpointConfig,
        task_writes: Vec<(String, Vec<(String, Value)>)>,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        let writes = WriteColumns::on(config.checkpoint_id.as_deref(), task_writes)
            .ok_or_else(|| not_found(config))?;
        let new = NewCheckpoint {
            checkpoint,
            metadata,
        };
        let mut stored = self
            .insert_checkpoints(config, vec![new_checkpoint_id()], vec![new], writes)
            .await?;
        stored
            .pop()
            .ok_or_else(|| GraphError::checkpointer("no checkpoint was stored"))
    }

    async fn client(&self) -> Result<Object, GraphError> {
        self.pool.get().await.map_err(pool_error)
    }
}

fn tuple(config: &CheckpointConfig, row: &Row) -> Result<CheckpointTuple, GraphError> {
    let at = |id: String| CheckpointConfig {
        thread_id: config.thread_id.clone(),
        checkpoint_ns: config.checkpoint_ns.clone(),
        checkpoint_id: Some(id),
    };
    let row = Columns::of(row, "checkpoints");
    let metadata = match row.column::<Value>("metadata").map_err(column_error)? {
        Value::Object(map) => map,
        _ => Metadata::new(),
    };
    let writes: Value = row.column("writes").map_err(column_error)?;
    let pending_writes = match writes {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Array(mut parts) if parts.len() == 3 => {
                    let value = parts.pop().unwrap_or_default();
                    let channel = parts.pop().and_then(|c| c.as_str().map(str::to_owned));
                    let task = parts.pop().and_then(|t| t.as_str().map(str::to_owned));
                    match (task, channel) {
                        (Some(task_id), Some(channel)) => Ok(PendingWrite {
                            task_id,
                            channel,
                            value,
                        }),
                        _ => Err(corrupt_write()),
                    }
                }
                _ => Err(corrupt_write()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => Vec::new(),
    };
    let parent: Option<String> = row.column("parent_checkpoint_id").map_err(column_error)?;
    Ok(CheckpointTuple {
        config: at(row.column("checkpoint_id").map_err(column_error)?),
        parent_config: parent.map(at),
        checkpoint: row.column("body").map_err(column_error)?,
        metadata,
        created_at: Timestamp::new(row.column("created_at").map_err(column_error)?),
        pending_writes,
    })
}

#[async_trait]
impl Checkpointer for PostgresSaver {
    async fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, GraphError> {
        let client = self.client().await?;
        let row = match &config.checkpoint_id {
            Some(id) => client
                .query_opt_cached(
                    static_sql!(
                        "{SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
                         AND c.checkpoint_id = $3"
                    ),
                    &[&config.thread_id, &config.checkpoint_ns, id],
                )
                .await
                .map_err(db_error)?,
            None => client
                .query_opt_cached(
                    static_sql!(
                        "{SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
                         ORDER BY c.checkpoint_id DESC LIMIT 1"
                    ),
                    &[&config.thread_id, &config.checkpoint_ns],
                )
                .await
                .map_err(db_error)?,
        };
        row.map(|row| tuple(config, &row)).transpose()
    }

    async fn list(
        &self,
        config: &CheckpointConfig,
        options: CheckpointListOptions,
    ) -> Result<Vec<CheckpointTuple>, GraphError> {
        if options.limit == Some(0) {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let limit = options
            .limit
            .map_or(i64::MAX, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let filter = options.filter.clone().map(Value::Object);
        let rows = match &config.checkpoint_id {
            Some(id) => client
                .query_cached(
                    static_sql!(
                        "{SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
                         AND c.checkpoint_id = $6
                         AND ($3::text IS NULL OR c.checkpoint_id < $3::text)
                         AND ($4::jsonb IS NULL OR (c.metadata @> $4::jsonb AND NOT EXISTS (
               SELECT 1 FROM jsonb_each($4::jsonb) f
               WHERE c.metadata -> f.key IS DISTINCT FROM f.value)))
                         LIMIT $5"
                    ),
                    &[
                        &config.thread_id,
                        &config.checkpoint_ns,
                        &options.before,
                        &filter,
                        &limit,
                        id,
                    ],
                )
                .await
                .map_err(db_error)?,
            None => client
                .query_cached(
                    list_sql(),
                    &[
                        &config.thread_id,
                        &config.checkpoint_ns,
                        &options.before,
                        &filter,
                        &limit,
                    ],
                )
                .await
                .map_err(db_error)?,
        };
        rows.iter().map(|row| tuple(config, row)).collect()
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        self.insert_checkpoint(config, Vec::new(), checkpoint, metadata)
            .await
    }

    async fn put_named(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        let client = self.client().await?;
        // Committed asynchronously, as `put` is.
        client
            .execute_cached(
                static_sql!(
                    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id,
                         parent_checkpoint_id, metadata, created_at, body)
                     SELECT $1, $2, $3, $4, $5, $6, $7::text::json FROM {ASYNC_COMMIT}
                     ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
                     SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
                         metadata = EXCLUDED.metadata, body = EXCLUDED.body"
                ),
                &[
                    &config.thread_id,
                    &config.checkpoint_ns,
                    &checkpoint_id,
                    &config.checkpoint_id,
                    &Value::Object(metadata),
                    &Utc::now(),
                    &checkpoint.as_str(),
                ],
            )
            .await
            .map_err(db_error)?;
        Ok(CheckpointConfig {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: Some(checkpoint_id.to_owned()),
        })
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
    ) -> Result<(), GraphError> {
        let missing = || not_found(config);
        let id = config.checkpoint_id.as_ref().ok_or_else(missing)?;
        let client = self.client().await?;
        if writes.is_empty() {
            let exists = client
                .query_opt_cached(
                    "SELECT 1 FROM checkpoints
                     WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
                    &[&config.thread_id, &config.checkpoint_ns, id],
                )
                .await
                .map_err(db_error)?;
            return exists.map(drop).ok_or_else(missing);
        }
        let (_, _, channels, values) = WriteColumns::on(Some(id), [(task_id.to_owned(), writes)])
            .ok_or_else(missing)?
            .into_parts();
        // Committed asynchronously, as `put` is.
        let written = client
            .execute_cached(
                static_sql!(
                    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id,
                     task_id, channel, value)
                 SELECT $1, $2, $3, $4, write.channel, write.value
                 FROM unnest($5::text[], $6::jsonb[]) WITH ORDINALITY
                     AS write(channel, value, position), {ASYNC_COMMIT}
                 ORDER BY write.position
                 ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, channel)
                 DO UPDATE SET value = EXCLUDED.value, seq = nextval('checkpoint_write_seq')"
                ),
                &[
                    &config.thread_id,
                    &config.checkpoint_ns,
                    id,
                    &task_id,
                    &channels,
                    &values,
                ],
            )
            .await;
        match written {
            Ok(_) => Ok(()),
            // The checkpoint row is gone (or never was): the writes' foreign key.
            Err(error) if error.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => Err(missing()),
            Err(error) => Err(db_error(error)),
        }
    }

    async fn put_after_writes(
        &self,
        config: &CheckpointConfig,
        task_writes: Vec<(String, Vec<(String, Value)>)>,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        self.insert_checkpoint(config, task_writes, checkpoint, metadata)
            .await
    }

    async fn put_steps(
        &self,
        config: &CheckpointConfig,
        steps: Vec<NamedStep>,
    ) -> Result<(), GraphError> {
        let mut writes = WriteColumns::default();
        let mut ids = Vec::with_capacity(steps.len());
        let mut chain = Vec::with_capacity(steps.len());
        let mut parent = config.checkpoint_id.clone();
        for step in steps {
            writes
                .add(parent.as_deref(), step.task_writes)
                .ok_or_else(|| not_found(config))?;
            parent = Some(step.checkpoint_id.clone());
            ids.push(step.checkpoint_id);
            chain.push(NewCheckpoint {
                checkpoint: step.checkpoint,
                metadata: step.metadata,
            });
        }
        self.insert_checkpoints(config, ids, chain, writes)
            .await
            .map(drop)
    }

    async fn merge_metadata(
        &self,
        config: &CheckpointConfig,
        metadata: Metadata,
    ) -> Result<(), GraphError> {
        let missing = || not_found(config);
        let id = config.checkpoint_id.as_ref().ok_or_else(missing)?;
        let client = self.client().await?;
        let merged = client
            .execute_cached(
                "UPDATE checkpoints SET metadata = metadata || $4
                 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
                &[
                    &config.thread_id,
                    &config.checkpoint_ns,
                    id,
                    &Value::Object(metadata),
                ],
            )
            .await
            .map_err(db_error)?;
        if merged == 0 {
            return Err(missing());
        }
        Ok(())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), GraphError> {
        let client = self.client().await?;
        // Writes follow through ON DELETE CASCADE.
        client
            .execute_cached(
                "DELETE FROM checkpoints WHERE thread_id = $1",
                &[&thread_id],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn copy_thread(&self, from: &str, to: &str) -> Result<(), GraphError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let statements = [
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id,
                 parent_checkpoint_id, metadata, created_at, body)
             SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata, created_at,
                 body
             FROM checkpoints WHERE thread_id = $1",
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,
                 channel, seq, value)
             SELECT $2, checkpoint_ns, checkpoint_id, task_id, channel, seq, value
             FROM checkpoint_writes WHERE thread_id = $1",
        ];
        if from != to {
            tx.execute_cached("DELETE FROM checkpoints WHERE thread_id = $1", &[&to])
                .await
                .map_err(db_error)?;
            for statement in statements {
                tx.execute(statement, &[&from, &to])
                    .await
                    .map_err(db_error)?;
            }
        }
        tx.commit().await.map_err(db_error)
    }

    async fn prune(&self, thread_id: &str, strategy: PruneStrategy) -> Result<(), GraphError> {
        let client = self.client().await?;
        let statement = match strategy {
            PruneStrategy::Delete => "DELETE FROM checkpoints WHERE thread_id = $1",
            PruneStrategy::KeepLatest => {
                "DELETE FROM checkpoints c WHERE c.thread_id = $1 AND c.checkpoint_id < (
                     SELECT max(l.checkpoint_id) FROM checkpoints l
                     WHERE l.thread_id = c.thread_id AND l.checkpoint_ns = c.checkpoint_ns)"
            }
        };
        client
            .execute(statement, &[&thread_id])
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<(), GraphError> {
        let client = self.client().await?;
        client
            .execute_cached(
                "DELETE FROM checkpoints
                 WHERE thread_id = $1 AND metadata -> 'run_id' = to_jsonb($2::text)",
                &[&thread_id, &run_id],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

/// Task writes as the columns of one insert. A rewrite of the same task and channel
/// replaces the value and moves it to the end of the write order, as the in-memory saver
/// does; one statement cannot update a row twice, so a checkpoint, task and channel
/// repeated within one statement keeps its last value, at its last position.
#[derive(Default)]
struct WriteColumns {
    checkpoints: Vec<String>,
    tasks: Vec<String>,
    channels: Vec<String>,
    values: Vec<Value>,
}

impl WriteColumns {
    /// `task_writes` against the checkpoint `on`; `None` when there are writes and no
    /// checkpoint for them (the thread has none yet).
    fn on(
        on: Option<&str>,
        task_writes: impl IntoIterator<Item = (String, Vec<(String, Value)>)>,
    ) -> Option<Self> {
        let mut columns = Self::default();
        columns.add(on, task_writes)?;
        Some(columns)
    }

    /// Adds `task_writes` against the checkpoint `on`, as [`WriteColumns::on`] takes them.
    fn add(
        &mut self,
        on: Option<&str>,
        task_writes: impl IntoIterator<Item = (String, Vec<(String, Value)>)>,
    ) -> Option<()> {
        for (task_id, writes) in task_writes {
            for (channel, value) in writes {
                let on = on?;
                let earlier = (0..self.tasks.len()).find(|&at| {
                    self.checkpoints[at] == on
                        && self.tasks[at] == task_id
                        && self.channels[at] == channel
                });
                if let Some(at) = earlier {
                    self.checkpoints.remove(at);
                    self.tasks.remove(at);
                    self.channels.remove(at);
                    self.values.remove(at);
                }
                self.checkpoints.push(on.to_owned());
                self.tasks.push(task_id.clone());
                self.channels.push(channel);
                self.values.push(value);
            }
        }
        Some(())
    }

    fn into_parts(self) -> (Vec<String>, Vec<String>, Vec<String>, Vec<Value>) {
        (self.checkpoints, self.tasks, self.channels, self.values)
    }
}
