//! Assistants: the live row in `assistants`, immutable snapshots in
//! `assistant_versions` (migration 0003).

use async_trait::async_trait;
use serde_json::Value;
use service_store::{
    AssistantFilter, AssistantPage, AssistantPatch, AssistantQuery, AssistantSortBy,
    AssistantsRepo, NewAssistant, StoreError, StoreResult, VersionQuery,
};
use service_types::{Assistant, AssistantVersion, IfExists};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::{
    Built, Cached, Columns, Db, Sql, at, count, decode, direction, encode, object, push_where,
    static_sql, ts,
};
use crate::error::store_error;
use crate::filter::metadata_condition;
use service_store::containment::merge_enforced;

const COLUMNS: &str = "assistant_id, graph_id, config, context, metadata, name, description, \
                       version, created_at, updated_at";

const VERSION_COLUMNS: &str =
    "assistant_id, version, graph_id, config, context, metadata, name, description, created_at";

fn not_found(id: Uuid) -> StoreError {
    StoreError::not_found(format!("Assistant {id} not found"))
}

fn assistant(row: &Row) -> StoreResult<Assistant> {
    let row = Columns::of(row, "assistants");
    Ok(Assistant {
        assistant_id: row.column("assistant_id")?,
        graph_id: row.column("graph_id")?,
        config: decode(row.column("config")?, "config")?,
        context: object(row.column("context")?, "context")?,
        metadata: object(row.column("metadata")?, "metadata")?,
        name: row.column("name")?,
        description: row.column("description")?,
        version: row.column("version")?,
        created_at: ts(row.column("created_at")?),
        updated_at: ts(row.column("updated_at")?),
    })
}

fn version(row: &Row) -> StoreResult<AssistantVersion> {
    let row = Columns::of(row, "assistant_versions");
    Ok(AssistantVersion {
        assistant_id: row.column("assistant_id")?,
        version: row.column("version")?,
        graph_id: row.column("graph_id")?,
        config: decode(row.column("config")?, "config")?,
        context: object(row.column("context")?, "context")?,
        metadata: object(row.column("metadata")?, "metadata")?,
        name: row.column("name")?,
        description: row.column("description")?,
        created_at: ts(row.column("created_at")?),
    })
}

/// WHERE conditions of an assistant filter, all in SQL (metadata by `@>`).
fn conditions(sql: &mut Sql, filter: &AssistantFilter) -> Vec<String> {
    let mut conditions = Vec::new();
    if let Some(graph_id) = &filter.graph_id {
        let p = sql.bind(graph_id.clone());
        conditions.push(format!("graph_id = {p}"));
    }
    let merged = merge_enforced(filter.metadata.as_ref(), filter.enforced.as_ref());
    match metadata_condition(sql, merged) {
        Some(condition) => conditions.extend(condition),
        None => conditions.push("false".to_owned()),
    }
    if let Some(name) = &filter.name {
        let p = sql.bind(name.clone());
        conditions.push(format!(
            "strpos(lower(name COLLATE \"default\"), lower({p}::text COLLATE \"default\")) > 0"
        ));
    }
    conditions
}

fn sort_column(sort_by: AssistantSortBy) -> &'static str {
    match sort_by {
        AssistantSortBy::AssistantId => "assistant_id",
        AssistantSortBy::GraphId => "graph_id",
        AssistantSortBy::Name => "name",
        AssistantSortBy::CreatedAt => "created_at",
        AssistantSortBy::UpdatedAt => "updated_at",
    }
}

async fn insert_version(
    tx: &deadpool_postgres::Transaction<'_>,
    snapshot: &AssistantVersion,
) -> StoreResult<()> {
    tx.execute_cached(
        static_sql!(
            "INSERT INTO assistant_versions ({VERSION_COLUMNS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        ),
        &[
            &snapshot.assistant_id,
            &snapshot.version,
            &snapshot.graph_id,
            &encode(&snapshot.config)?,
            &Value::Object(snapshot.context.clone()),
            &Value::Object(snapshot.metadata.clone()),
            &snapshot.name,
            &snapshot.description,
            &at(snapshot.created_at),
        ],
    )
    .await
    .map_err(store_error)?;
    Ok(())
}

/// Makes `snapshot` the live row of its assistant, stamped `updated_at = now`.
async fn activate(
    tx: &deadpool_postgres::Transaction<'_>,
    snapshot: &AssistantVersion,
    now: service_types::Timestamp,
) -> StoreResult<Assistant> {
    let row = tx
        .query_opt_cached(
            static_sql!(
                "UPDATE assistants SET version = $2, graph_id = $3, config = $4, context = $5,
                    metadata = $6, name = $7, description = $8, updated_at = $9
                 WHERE assistant_id = $1 RETURNING {COLUMNS}"
            ),
            &[
                &snapshot.assistant_id,
                &snapshot.version,
                &snapshot.graph_id,
                &encode(&snapshot.config)?,
                &Value::Object(snapshot.context.clone()),
                &Value::Object(snapshot.metadata.clone()),
                &snapshot.name,
                &snapshot.description,
                &at(now),
            ],
        )
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_found(snapshot.assistant_id))?;
    assistant(&row)
}

#[async_trait]
impl AssistantsRepo for Db {
    async fn create(&self, new: NewAssistant, if_exists: IfExists) -> StoreResult<Assistant> {
        let now = self.now();
        let created = Assistant {
            assistant_id: new.assistant_id,
            graph_id: new.graph_id,
            config: new.config,
            context: new.context,
            metadata: new.metadata,
            name: new.name,
            description: new.description,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let inserted = tx
            .query_opt_cached(
                static_sql!(
                    "INSERT INTO assistants ({COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8)
                     ON CONFLICT (assistant_id) DO NOTHING RETURNING {COLUMNS}"
                ),
                &[
                    &created.assistant_id,
                    &created.graph_id,
                    &encode(&created.config)?,
                    &Value::Object(created.context.clone()),
                    &Value::Object(created.metadata.clone()),
                    &created.name,
                    &created.description,
                    &at(now),
                ],
            )
            .await
            .map_err(store_error)?;
        let Some(row) = inserted else {
            let existing = tx
                .query_opt_cached(
                    static_sql!("SELECT {COLUMNS} FROM assistants WHERE assistant_id = $1"),
                    &[&created.assistant_id],
                )
                .await
                .map_err(store_error)?
                .ok_or_else(|| StoreError::transient("assistant vanished during create"))?;
            return match if_exists {
                IfExists::Raise => Err(StoreError::conflict(format!(
                    "Assistant {} already exists",
                    created.assistant_id
                ))),
                IfExists::DoNothing => assistant(&existing),
            };
        };
        let stored = assistant(&row)?;
        insert_version(&tx, &stored.snapshot()).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(stored)
    }

    async fn get(&self, assistant_id: Uuid) -> StoreResult<Option<Assistant>> {
        let client = self.client().await?;
        client
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM assistants WHERE assistant_id = $1"),
                &[&assistant_id],
            )
            .await
            .map_err(store_error)?
            .map(|row| assistant(&row))
            .transpose()
    }

    async fn update(&self, assistant_id: Uuid, patch: AssistantPatch) -> StoreResult<Assistant> {
        let now = self.now();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let live = tx
            .query_opt_cached(
                static_sql!("SELECT {COLUMNS} FROM assistants WHERE assistant_id = $1 FOR UPDATE"),
                &[&assistant_id],
            )
            .await
            .map_err(store_error)?
            .ok_or_else(|| not_found(assistant_id))?;
        let live = assistant(&live)?;
        let row = tx
            .query_one_cached(
                "SELECT max(version) FROM assistant_versions WHERE assistant_id = $1",
                &[&assistant_id],
            )
            .await
            .map_err(store_error)?;
        let max: Option<i64> = Columns::of(&row, "assistant_versions").column_at(0)?;
        let snapshot = patch.mint(&live, max.unwrap_or(0) + 1, now);
        insert_version(&tx, &snapshot).await?;
        let updated = activate(&tx, &snapshot, now).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(updated)
    }

    async fn set_latest(&self, assistant_id: Uuid, wanted: i64) -> StoreResult<Assistant> {
        let now = self.now();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let row = tx
            .query_opt_cached(
                static_sql!(
                    "SELECT {VERSION_COLUMNS} FROM assistant_versions
                     WHERE assistant_id = $1 AND version = $2"
                ),
                &[&assistant_id, &wanted],
            )
            .await
            .map_err(store_error)?
            .ok_or_else(|| {
                StoreError::not_found(format!(
                    "Version {wanted} not found for assistant {assistant_id}"
                ))
            })?;
        let updated = activate(&tx, &version(&row)?, now).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(updated)
    }

    async fn delete(&self, assistant_id: Uuid) -> StoreResult<()> {
        let client = self.client().await?;
        let deleted = client
            .execute_cached(
                "DELETE FROM assistants WHERE assistant_id = $1",
                &[&assistant_id],
            )
            .await
            .map_err(store_error)?;
        if deleted == 0 {
            return Err(StoreError::not_found(format!(
                "Assistant with ID {assistant_id} not found"
            )));
        }
        Ok(())
    }

    async fn search(&self, query: &AssistantQuery) -> StoreResult<AssistantPage> {
        let limit = self.limits.search(query.limit)?;
        let mut sql = Sql::new(&format!(
            "SELECT {COLUMNS}, count(*) OVER () AS total FROM assistants"
        ));
        let conditions = conditions(&mut sql, &query.filter);
        push_where(&mut sql, &conditions);
        let dir = direction(query.sort_order);
        let limit_p = sql.bind(count(limit));
        let offset_p = sql.bind(count(query.offset));
        sql.push(&format!(
            " ORDER BY {} {dir}, assistant_id {dir} LIMIT {limit_p} OFFSET {offset_p}",
            sort_column(query.sort_by)
        ));
        let client = self.client().await?;
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        let total = match rows.first() {
            Some(row) => {
                let total = Columns::of(row, "assistants").column::<i64>("total")?;
                u64::try_from(total).unwrap_or_default()
            }
            None => self.count(&query.filter).await?,
        };
        let items = rows.iter().map(assistant).collect::<StoreResult<_>>()?;
        Ok(AssistantPage { items, total })
    }

    async fn count(&self, filter: &AssistantFilter) -> StoreResult<u64> {
        let mut sql = Sql::new("SELECT count(*) FROM assistants");
        let conditions = conditions(&mut sql, filter);
        push_where(&mut sql, &conditions);
        let client = self.client().await?;
        let row = client.query_built_one(&sql).await.map_err(store_error)?;
        let total: i64 = Columns::of(&row, "assistants").column_at(0)?;
        Ok(u64::try_from(total).unwrap_or_default())
    }

    async fn versions(
        &self,
        assistant_id: Uuid,
        query: &VersionQuery,
    ) -> StoreResult<Vec<AssistantVersion>> {
        let limit = self.limits.search(query.limit)?;
        let client = self.client().await?;
        let exists = client
            .query_opt_cached(
                "SELECT 1 FROM assistants WHERE assistant_id = $1",
                &[&assistant_id],
            )
            .await
            .map_err(store_error)?;
        if exists.is_none() {
            return Err(not_found(assistant_id));
        }
        let mut sql = Sql::new(&format!("SELECT {VERSION_COLUMNS} FROM assistant_versions"));
        let id = sql.bind(assistant_id);
        let mut conditions = vec![format!("assistant_id = {id}")];
        if let Some(metadata) = &query.metadata {
            let p = sql.bind(Value::Object(metadata.clone()));
            conditions.push(format!("metadata @> {p}::jsonb"));
        }
        push_where(&mut sql, &conditions);
        let limit_p = sql.bind(count(limit));
        let offset_p = sql.bind(count(query.offset));
        sql.push(&format!(
            " ORDER BY version DESC LIMIT {limit_p} OFFSET {offset_p}"
        ));
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        rows.iter().map(version).collect()
    }
}
