//! Store items. Namespace matching, `max_depth` truncation, de-duplication,
//! ordering and paging all run in SQL (see `filter::namespace_prefix`); the literal
//! head of a prefix is an index range scan on the primary key (ns_path, key).
//! Expiry is enforced in every read (`expires_at > now`) and by `sweep_expired`.
//! With a semantic index an item's vectors live in `store_vectors` (written in the
//! item's transaction, deleted with it by a foreign key); a query ranks the
//! candidates by their best vector exactly (the best vectors first, every vector
//! when those leave the page short: [`Scan`]), or with `hnsw` reads the nearest
//! vectors through the index.

use async_trait::async_trait;
use serde_json::Value;
use service_store::namespace::validate_namespace;
use service_store::semantic::check_vector;
use service_store::{
    ItemSearch, ItemsRepo, NamespaceQuery, PutItem, StoreError, StoreResult, validate_item_ttl,
};
use service_types::{Item, SearchItem, Timestamp};
use tokio_postgres::Row;

use crate::db::{Built, Cached, Columns, Db, Sql, at, count, object, push_where, ts};
use crate::error::store_error;
use crate::filter::{
    indexed_equality, namespace_prefix, namespace_suffix, ns_path_range, store_filter,
};
use crate::vectors::{Vectors, nearest_vectors, vector_text};

const COLUMNS: &str = "namespace, key, value, created_at, updated_at";
/// [`COLUMNS`] of the join's item side.
const ITEM_COLUMNS: &str = "i.namespace, i.key, i.value, i.created_at, i.updated_at";
/// Plain search order.
const RECENT: &str = "updated_at DESC, namespace, key";
/// Semantic search order: best score first, unscored last, then the plain order.
const SCORED: &str = "score DESC NULLS LAST, updated_at DESC, namespace, key";

/// The expiry a refresh (or a put) sets: `now + ttl`, computed from whole
/// microseconds exactly as `Timestamp::plus_minutes` does.
const REFRESHED: &str = "CASE WHEN ttl_micros IS NULL THEN NULL \
    ELSE $NOW::timestamptz + ttl_micros * interval '1 microsecond' END";

fn item(row: &Row) -> StoreResult<Item> {
    let row = Columns::of(row, "store_items");
    Ok(Item {
        namespace: row.column("namespace")?,
        key: row.column("key")?,
        value: object(row.column("value")?, "value")?,
        created_at: ts(row.column("created_at")?),
        updated_at: ts(row.column("updated_at")?),
    })
}

/// Inserts or replaces an item: $1 ns_path, $2 key, $3 namespace, $4 value, $5 now,
/// $6 ttl in microseconds.
const PUT: &str = "INSERT INTO store_items (ns_path, key, namespace, value, created_at,
         updated_at, ttl_micros, expires_at)
     VALUES ($1, $2, $3, $4, $5, $5, $6::bigint,
         CASE WHEN $6::bigint IS NULL THEN NULL
         ELSE $5::timestamptz + $6::bigint * interval '1 microsecond' END)
     ON CONFLICT (ns_path, key) DO UPDATE SET
         value = EXCLUDED.value,
         created_at = CASE
             WHEN store_items.expires_at IS NULL OR store_items.expires_at > $5
             THEN store_items.created_at ELSE $5 END,
         updated_at = $5,
         ttl_micros = EXCLUDED.ttl_micros,
         expires_at = EXCLUDED.expires_at";

fn ttl_micros(minutes: Option<f64>) -> Option<i64> {
    minutes.map(|minutes| (minutes * 60_000_000.0) as i64)
}

/// How an exact semantic search reads the vectors under the prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// Every vector's score, each item's best joined to every candidate item, items
    /// without a vector last: the whole ranked list, paged.
    Every,
    /// Only the vectors scoring at least as well as the best `n`th (all its ties
    /// kept), their items' best ranked and paged. Every vector left out scores below
    /// every vector read, so each item read has its true best score and ranks before
    /// every item not read: a page this fills is the [`Scan::Every`] page. A page it
    /// leaves short (too few of those items under the filter, or paging past them)
    /// is not, and the search asks again with `Every`.
    Nearest(usize),
}

/// The search statement (shared with the EXPLAIN check): live items under the
/// prefix matching the filter, newest first (ties by namespace then key), paged;
/// with a query (and `vectors`), best score first, unscored items last, the exact
/// ranking read as `scan` says. With `refresh_ttl`, the returned rows' expiry moves
/// in the same statement.
pub(crate) fn search_sql(
    search: &ItemSearch,
    limit: usize,
    now: Timestamp,
    vectors: Option<&Vectors>,
    scan: Scan,
) -> Sql {
    let mut sql = Sql::new("");
    let now_p = sql.bind(at(now));
    let mut conditions = vec![format!("(expires_at IS NULL OR expires_at > {now_p})")];
    conditions.extend(namespace_prefix(&mut sql, &search.namespace_prefix));
    // A plain search with an equality the fields table holds walks that table.
    let equality = match (&search.query, vectors) {
        (Some(_), Some(_)) => None,
        _ => indexed_equality(&search.filter),
    };
    conditions.extend(store_filter(
        &mut sql,
        "value",
        &search.filter,
        equality.as_ref().map(|(position, _, _)| *position),
    ));
    let mut select = Sql::new("");
    let order = match (&search.query, vectors, scan) {
        (Some(query), Some(vectors), _) if vectors.spec.hnsw => {
            // Approximate: the nearest vectors through the HNSW index, joined to the
            // candidate items; an item without vectors is never among them.
            let query_p = sql.bind(vector_text(query));
            let nearest_p = sql.bind(count(nearest_vectors(search.offset + limit)));
            let limit_p = sql.bind(count(limit));
            let offset_p = sql.bind(count(search.offset));
            std::mem::swap(&mut select, &mut sql);
            let distance = format!(
                "v.embedding {} CAST({query_p}::text AS {})",
                vectors.cosine(),
                vectors.vector_type()
            );
            select.push(&format!(
                "WITH nearest AS (SELECT i.ns_path, {ITEM_COLUMNS}, 1 - ({distance}) AS score
                 FROM store_vectors v JOIN (SELECT ns_path, {COLUMNS} FROM store_items"
            ));
            push_where(&mut select, &conditions);
            select.push(&format!(
                ") i ON i.ns_path = v.ns_path AND i.key = v.key
                 ORDER BY {distance} LIMIT {nearest_p}),
                 best AS (SELECT DISTINCT ON (ns_path, key) * FROM nearest
                          ORDER BY ns_path, key, score DESC),
                 page AS (SELECT * FROM best ORDER BY {SCORED}
                          LIMIT {limit_p} OFFSET {offset_p})"
            ));
            SCORED
        }
        (Some(query), Some(vectors), Scan::Nearest(nearest)) => {
            // Exact, the best vectors only: pgvector's distance is most of a search's
            // time, and here each vector's is computed once and only the best `n`
            // (with ties) are kept, grouped and joined to their items by the key.
            let query_p = sql.bind(vector_text(query));
            let vectors_under = ns_path_range(&mut sql, &search.namespace_prefix, "v.ns_path")
                .map(|range| format!(" WHERE {range}"))
                .unwrap_or_default();
            let nearest_p = sql.bind(count(nearest));
            let limit_p = sql.bind(count(limit));
            let offset_p = sql.bind(count(search.offset));
            std::mem::swap(&mut select, &mut sql);
            select.push(&format!(
                "WITH nearest AS (SELECT v.ns_path AS v_ns, v.key AS v_key,
                    1 - (v.embedding {} CAST({query_p}::text AS {})) AS similarity
                    FROM store_vectors v{vectors_under}
                    ORDER BY similarity DESC FETCH FIRST ({nearest_p}) ROWS WITH TIES),
                 page AS (SELECT ns_path, {COLUMNS}, best.score FROM store_items
                 JOIN (SELECT v_ns, v_key, max(similarity) AS score FROM nearest
                    GROUP BY v_ns, v_key) best
                 ON best.v_ns = store_items.ns_path AND best.v_key = store_items.key",
                vectors.cosine(),
                vectors.vector_type()
            ));
            push_where(&mut select, &conditions);
            select.push(&format!(
                " ORDER BY {SCORED} LIMIT {limit_p} OFFSET {offset_p})"
            ));
            SCORED
        }
        (Some(query), Some(vectors), Scan::Every) => {
            // Exact: every candidate vector's distance computed once in one pass and
            // its best per item joined to the candidate items (a correlated subquery
            // per item costs an index probe each, about twice the time).
            let query_p = sql.bind(vector_text(query));
            let vectors_under = ns_path_range(&mut sql, &search.namespace_prefix, "v.ns_path")
                .map(|range| format!(" WHERE {range}"))
                .unwrap_or_default();
            let limit_p = sql.bind(count(limit));
            let offset_p = sql.bind(count(search.offset));
            std::mem::swap(&mut select, &mut sql);
            select.push(&format!(
                "WITH page AS (SELECT ns_path, {COLUMNS}, best.score FROM store_items
                 LEFT JOIN (SELECT v_ns, v_key, max(similarity) AS score
                    FROM (SELECT v.ns_path AS v_ns, v.key AS v_key,
                            1 - (v.embedding {} CAST({query_p}::text AS {})) AS similarity
                          FROM store_vectors v{vectors_under}) scored
                    GROUP BY v_ns, v_key) best
                 ON best.v_ns = store_items.ns_path AND best.v_key = store_items.key",
                vectors.cosine(),
                vectors.vector_type()
            ));
            push_where(&mut select, &conditions);
            select.push(&format!(
                " ORDER BY {SCORED} LIMIT {limit_p} OFFSET {offset_p})"
            ));
            SCORED
        }
        _ => {
            let equality = equality.map(|(_, field, value)| (sql.bind(field), sql.bind(value)));
            let limit_p = sql.bind(count(limit));
            let offset_p = sql.bind(count(search.offset));
            std::mem::swap(&mut select, &mut sql);
            match equality {
                Some((field_p, value_p)) => {
                    let walk_p = select.bind(count(search.offset + limit));
                    by_field(&mut select, &conditions, &field_p, &value_p, &walk_p);
                    select.push(&format!(
                        " ORDER BY {RECENT} LIMIT {limit_p} OFFSET {offset_p})"
                    ));
                }
                None => {
                    select.push(&format!(
                        "WITH page AS (SELECT ns_path, {COLUMNS}, NULL::float8 AS score
                         FROM store_items"
                    ));
                    push_where(&mut select, &conditions);
                    select.push(&format!(
                        " ORDER BY {RECENT} LIMIT {limit_p} OFFSET {offset_p})"
                    ));
                }
            }
            RECENT
        }
    };
    if search.refresh_ttl {
        select.push(&format!(
            ", refreshed AS (UPDATE store_items s SET expires_at = {}
               FROM page WHERE s.ns_path = page.ns_path AND s.key = page.key)",
            REFRESHED.replace("$NOW", &now_p)
        ));
    }
    select.push(&format!(
        " SELECT {COLUMNS}, score FROM page ORDER BY {order}"
    ));
    select
}

/// The page of a search with an equality condition `store_item_fields` answers
/// (migration 0012), up to its `ORDER BY`: the items with that field value, newest
/// first from the fields' index, each read by its key and tested against the other
/// conditions. The walk stops at the page's last item and whatever was updated at the
/// same instant (`WITH TIES`: the index gives no order among those), and only those
/// are sorted, instead of every item with the value.
fn by_field(sql: &mut Sql, conditions: &[String], field_p: &str, value_p: &str, walk_p: &str) {
    sql.push(&format!(
        "WITH page AS (SELECT * FROM (SELECT i.ns_path, i.namespace, i.key, i.value,
             i.created_at, i.updated_at, NULL::float8 AS score
         FROM store_item_fields f, LATERAL (SELECT ns_path, {COLUMNS} FROM store_items
             WHERE ns_path = f.ns_path AND key = f.key"
    ));
    for condition in conditions {
        sql.push(" AND ").push(condition);
    }
    sql.push(&format!(
        ") i WHERE f.field = {field_p} AND f.value = {value_p}::jsonb
         ORDER BY f.updated_at DESC FETCH FIRST {walk_p} ROWS WITH TIES) walked"
    ));
}

impl Db {
    /// The index a vector must fit: `Unsupported` without one, `Invalid` for other dims.
    fn index_for(&self, vector: &[f32]) -> StoreResult<&Vectors> {
        let vectors = self.vectors.as_ref().ok_or_else(|| {
            StoreError::unsupported("semantic search is not configured: set store.index")
        })?;
        check_vector(vector, vectors.spec.dims)?;
        Ok(vectors)
    }
}

#[async_trait]
impl ItemsRepo for Db {
    async fn put(&self, put: PutItem) -> StoreResult<()> {
        validate_namespace(&put.namespace)?;
        validate_item_ttl(put.ttl_minutes)?;
        for field in &put.vectors {
            self.index_for(&field.vector)?;
        }
        let now = at(self.now());
        let ttl = ttl_micros(put.ttl_minutes);
        let path = put.namespace.join(".");
        let value = Value::Object(put.value);
        let item: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
            [&path, &put.key, &put.namespace, &value, &now, &ttl];
        let mut client = self.client().await?;
        let Some(vectors) = &self.vectors else {
            client
                .execute_cached(PUT, &item)
                .await
                .map_err(store_error)?;
            return Ok(());
        };
        // The item and its vectors change together: a reader never sees one without
        // the other. The embedding happened before, outside this transaction.
        let fields: Vec<&str> = put
            .vectors
            .iter()
            .map(|field| field.field.as_str())
            .collect();
        let texts: Vec<String> = put
            .vectors
            .iter()
            .map(|field| vector_text(&field.vector))
            .collect();
        let tx = client.transaction().await.map_err(store_error)?;
        tx.execute_cached(PUT, &item).await.map_err(store_error)?;
        tx.execute_cached(
            "DELETE FROM store_vectors WHERE ns_path = $1 AND key = $2",
            &[&path, &put.key],
        )
        .await
        .map_err(store_error)?;
        if !fields.is_empty() {
            let insert = format!(
                "INSERT INTO store_vectors (ns_path, key, field, embedding)
                 SELECT $1, $2, field, CAST(embedding AS {})
                 FROM unnest($3::text[], $4::text[]) AS given (field, embedding)",
                vectors.vector_type()
            );
            tx.execute(&insert, &[&path, &put.key, &fields, &texts])
                .await
                .map_err(store_error)?;
        }
        tx.commit().await.map_err(store_error)
    }

    async fn get(
        &self,
        namespace: &[String],
        key: &str,
        refresh: bool,
    ) -> StoreResult<Option<Item>> {
        let now = at(self.now());
        let path = namespace.join(".");
        let client = self.client().await?;
        let statement = if refresh {
            format!(
                "UPDATE store_items SET expires_at = {}
                 WHERE ns_path = $1 AND key = $2 AND namespace = $4
                   AND (expires_at IS NULL OR expires_at > $3)
                 RETURNING {COLUMNS}",
                REFRESHED.replace("$NOW", "$3")
            )
        } else {
            format!(
                "SELECT {COLUMNS} FROM store_items
                 WHERE ns_path = $1 AND key = $2 AND namespace = $4
                   AND (expires_at IS NULL OR expires_at > $3)"
            )
        };
        client
            .query_opt(&statement, &[&path, &key, &now, &namespace])
            .await
            .map_err(store_error)?
            .map(|row| item(&row))
            .transpose()
    }

    async fn delete(&self, namespace: &[String], key: &str) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute_cached(
                "DELETE FROM store_items WHERE ns_path = $1 AND key = $2 AND namespace = $3",
                &[&namespace.join("."), &key, &namespace],
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn search(&self, search: &ItemSearch) -> StoreResult<Vec<SearchItem>> {
        let limit = self.limits.search(search.limit)?;
        let vectors = match &search.query {
            Some(query) => Some(self.index_for(query)?),
            None => None,
        };
        let now = self.now();
        let mut client = self.client().await?;
        let rows = match vectors {
            // The HNSW settings hold for this search's transaction only.
            Some(vectors) if vectors.spec.hnsw => {
                let sql = search_sql(search, limit, now, Some(vectors), Scan::Every);
                let tx = client.transaction().await.map_err(store_error)?;
                let settings = vectors.hnsw_settings(nearest_vectors(search.offset + limit));
                tx.batch_execute(&settings).await.map_err(store_error)?;
                let rows = tx
                    .query_typed(&sql.text, &sql.params())
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                rows
            }
            // Exact: the best vectors first, every vector only when they leave the
            // page short. The rows a short page refreshed lead that page too.
            Some(vectors) => {
                let nearest = Scan::Nearest(nearest_vectors(search.offset + limit));
                let sql = search_sql(search, limit, now, Some(vectors), nearest);
                let rows = client.query_built(&sql).await.map_err(store_error)?;
                if rows.len() < limit {
                    let sql = search_sql(search, limit, now, Some(vectors), Scan::Every);
                    client.query_built(&sql).await.map_err(store_error)?
                } else {
                    rows
                }
            }
            None => {
                let sql = search_sql(search, limit, now, None, Scan::Every);
                client.query_built(&sql).await.map_err(store_error)?
            }
        };
        rows.iter()
            .map(|row| {
                Ok(SearchItem {
                    item: item(row)?,
                    score: Columns::of(row, "store_items").column("score")?,
                })
            })
            .collect()
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> StoreResult<Vec<Vec<String>>> {
        query.validate()?;
        let limit = self.limits.namespaces(query.limit);
        let sql = namespaces_sql(query, limit, self.now());
        let client = self.client().await?;
        let rows = client.query_built(&sql).await.map_err(store_error)?;
        rows.iter()
            .map(|row| Columns::of(row, "store_items").column_at(0))
            .collect()
    }

    async fn sweep_expired(&self, now: Timestamp) -> StoreResult<u64> {
        let client = self.client().await?;
        client
            .execute_cached(
                "DELETE FROM store_items WHERE expires_at <= $1",
                &[&at(now)],
            )
            .await
            .map_err(store_error)
    }
}

/// The namespace listing: match (prefix, suffix), truncate to `max_depth`,
/// de-duplicate, order element-wise (text[] comparison, shorter first, bytewise "C"
/// collation) and page, all in SQL.
pub(crate) fn namespaces_sql(query: &NamespaceQuery, limit: usize, now: Timestamp) -> Sql {
    let mut sql = Sql::new("");
    let now_p = sql.bind(at(now));
    let mut conditions = vec![format!("(expires_at IS NULL OR expires_at > {now_p})")];
    if let Some(prefix) = &query.prefix {
        conditions.extend(namespace_prefix(&mut sql, prefix));
    }
    if let Some(suffix) = &query.suffix {
        conditions.extend(namespace_suffix(&mut sql, suffix));
    }
    let projected = match query.max_depth {
        Some(depth) => {
            let p = sql.bind(i32::try_from(depth).unwrap_or(i32::MAX));
            format!("namespace[1:{p}]")
        }
        None => "namespace".to_owned(),
    };
    let limit_p = sql.bind(count(limit));
    let offset_p = sql.bind(count(query.offset));
    let mut select = Sql::new("");
    std::mem::swap(&mut select, &mut sql);
    select.push(&format!(
        "SELECT DISTINCT {projected} COLLATE \"C\" AS ns FROM store_items"
    ));
    push_where(&mut select, &conditions);
    select.push(&format!(" ORDER BY ns LIMIT {limit_p} OFFSET {offset_p}"));
    select
}
