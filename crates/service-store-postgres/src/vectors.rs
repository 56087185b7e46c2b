//! The semantic index on PostgreSQL (pgvector), set up only when `store.index` is
//! configured: a step of its own after the numbered migrations, under the same
//! advisory lock, never recorded in the ledger, so a deployment without an index
//! never needs the extension. Every boot with an index re-checks it:
//!
//! - the `vector` extension (created when missing: in `public` when the store has a
//!   schema of its own, so dropping that schema never drops the type other schemas
//!   use); types and operators are schema-qualified, whatever the search_path;
//! - `store_vectors` (one row per embedded field, removed with its item by a foreign
//!   key) and `store_index_settings` (the dims the vectors have);
//! - a boot error when stored vectors have another dimensionality than configured;
//! - `hnsw: true` pins the column to the dims (never unpinned later) and builds the
//!   index concurrently; off drops that index, so a search is an exact scan again.

use std::sync::atomic::{AtomicBool, Ordering};

use service_store::IndexSpec;
use tokio_postgres::Client;

use crate::PgError;
use crate::migrate::{connect_dedicated, drop_invalid_index, lock, unlock};

/// The name of the approximate index.
const HNSW_INDEX: &str = "store_vectors_hnsw";

/// What the repositories need to read and write vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Vectors {
    /// The configured index.
    pub(crate) spec: IndexSpec,
    /// The extension's schema, quoted, for qualified names.
    pub(crate) ext: String,
    /// pgvector 0.8 or later: an HNSW scan can go on past `ef_search` until a
    /// filtered search has its rows (`hnsw.iterative_scan`).
    pub(crate) iterative: bool,
}

impl Vectors {
    /// The `vector` type, qualified.
    pub(crate) fn vector_type(&self) -> String {
        format!("{}.vector", self.ext)
    }

    /// The cosine distance operator, qualified.
    pub(crate) fn cosine(&self) -> String {
        format!("OPERATOR({}.<=>)", self.ext)
    }

    /// The settings of one approximate search reading `candidates` rows: the HNSW
    /// beam at least that wide (pgvector caps it at 1000), and from 0.8 on a scan that
    /// goes on until a filter has let enough rows through.
    pub(crate) fn hnsw_settings(&self, candidates: usize) -> String {
        let beam = candidates.clamp(40, 1000);
        let mut settings = format!("SET LOCAL hnsw.ef_search = {beam};");
        if self.iterative {
            settings.push_str(" SET LOCAL hnsw.iterative_scan = relaxed_order;");
        }
        settings
    }
}

/// How many nearest vectors a search reads for a page ending at `end` (an exact one
/// first, with the ties of the last; an approximate one through the HNSW index):
/// items with several vectors take several, so twice the page and then some.
pub(crate) fn nearest_vectors(end: usize) -> usize {
    end.saturating_mul(2).saturating_add(10)
}

/// A vector in pgvector's text form, `[1,0.5,-2]`: Rust prints the shortest text that
/// reads back as the same f32, so the value stored is the value embedded.
pub(crate) fn vector_text(vector: &[f32]) -> String {
    let mut text = String::with_capacity(vector.len() * 10 + 2);
    text.push('[');
    for (n, x) in vector.iter().enumerate() {
        if n > 0 {
            text.push(',');
        }
        text.push_str(&x.to_string());
    }
    text.push(']');
    text
}

/// Sets up (or checks) the index of `spec` on its own connection, serialized with
/// other boots by the migrations' advisory lock.
pub(crate) async fn prepare(
    options: &crate::PgOptions,
    spec: IndexSpec,
) -> Result<Vectors, PgError> {
    let (client, task) = connect_dedicated(options, "service-vectors").await?;
    let scope = lock(&client, options.schema.as_deref()).await?;
    let result = prepare_locked(&client, options.schema.is_some(), spec).await;
    let unlocked = unlock(&client, &scope).await;
    drop(client);
    let _ = task.await;
    let vectors = result?;
    unlocked?;
    Ok(vectors)
}

async fn prepare_locked(
    client: &Client,
    own_schema: bool,
    spec: IndexSpec,
) -> Result<Vectors, PgError> {
    let (version, ext) = extension(client, own_schema).await?;
    let iterative = !older_than_0_8(&version);
    if spec.hnsw && !iterative {
        warn_old_extension(&version);
    }
    let vectors = Vectors {
        spec,
        ext,
        iterative,
    };
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS store_vectors (
                ns_path text COLLATE \"C\" NOT NULL,
                key text COLLATE \"C\" NOT NULL,
                field text NOT NULL,
                embedding {} NOT NULL,
                PRIMARY KEY (ns_path, key, field),
                FOREIGN KEY (ns_path, key) REFERENCES store_items (ns_path, key) ON DELETE CASCADE
            );
            CREATE TABLE IF NOT EXISTS store_index_settings (
                only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
                dims integer NOT NULL
            )",
            vectors.vector_type()
        ))
        .await?;
    check_dims(client, &vectors).await?;
    let pinned: i32 = client
        .query_one(
            "SELECT atttypmod FROM pg_attribute
             WHERE attrelid = 'store_vectors'::regclass AND attname = 'embedding'",
            &[],
        )
        .await?
        .try_get(0)?;
    let dims = i32::try_from(spec.dims)
        .map_err(|_| PgError::Config(format!("store.index.dims {} is too large", spec.dims)))?;
    // Pinned at other dims with no rows left (checked above): follow the new dims.
    if pinned != dims && (spec.hnsw || pinned > 0) {
        client
            .batch_execute(&format!(
                "ALTER TABLE store_vectors ALTER COLUMN embedding TYPE {}({dims})",
                vectors.vector_type()
            ))
            .await?;
    }
    if spec.hnsw {
        drop_invalid_index(client, HNSW_INDEX).await?;
        client
            .batch_execute(&format!(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {HNSW_INDEX}
                 ON store_vectors USING hnsw (embedding {}.vector_cosine_ops)",
                vectors.ext
            ))
            .await?;
    } else {
        client
            .batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {HNSW_INDEX}"))
            .await?;
    }
    Ok(vectors)
}

/// The extension's version and (quoted) schema, creating it when missing.
async fn extension(client: &Client, own_schema: bool) -> Result<(String, String), PgError> {
    const FIND: &str = "SELECT e.extversion, quote_ident(n.nspname)
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'";
    if let Some(row) = client.query_opt(FIND, &[]).await? {
        return Ok((row.try_get(0)?, row.try_get(1)?));
    }
    let create = if own_schema {
        "CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"
    } else {
        "CREATE EXTENSION IF NOT EXISTS vector"
    };
    let created = client.batch_execute(create).await;
    // Another database session may have created it at the same moment.
    match client.query_opt(FIND, &[]).await? {
        Some(row) => Ok((row.try_get(0)?, row.try_get(1)?)),
        None => Err(PgError::Config(format!(
            "store.index needs the pgvector extension, and it could not be created ({}): install pgvector on the database server, or have a superuser run CREATE EXTENSION vector",
            created.err().map_or_else(
                || "no error reported".to_owned(),
                |error| crate::error::describe(&error)
            )
        ))),
    }
}

/// Refuses dims other than the stored vectors'; records them when none are stored.
async fn check_dims(client: &Client, vectors: &Vectors) -> Result<(), PgError> {
    let dims = vectors.spec.dims;
    let recorded: Option<i32> = client
        .query_opt("SELECT dims FROM store_index_settings", &[])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
    let wanted = i32::try_from(dims)
        .map_err(|_| PgError::Config(format!("store.index.dims {dims} is too large")))?;
    if recorded == Some(wanted) {
        return Ok(());
    }
    let stored = client
        .query_opt(
            &format!(
                "SELECT {}.vector_dims(embedding) FROM store_vectors LIMIT 1",
                vectors.ext
            ),
            &[],
        )
        .await?;
    if let Some(row) = stored {
        let have: i32 = row.try_get(0)?;
        return Err(PgError::Config(format!(
            "store.index.dims is {dims}, but the store holds vectors of {have} dimensions: configure dims {have} (and the embedder that made them), or delete the store_vectors rows to re-embed"
        )));
    }
    client
        .execute(
            "INSERT INTO store_index_settings (dims) VALUES ($1)
             ON CONFLICT (only_row) DO UPDATE SET dims = EXCLUDED.dims",
            &[&wanted],
        )
        .await?;
    Ok(())
}

fn older_than_0_8(version: &str) -> bool {
    let mut parts = version
        .split('.')
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) < (0, 8)
}

/// Once per process: namespace-filtered approximate search needs pgvector's iterative
/// scans (0.8).
fn warn_old_extension(version: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            version,
            "pgvector is older than 0.8: hnsw searches under a namespace prefix or with a filter may return fewer items than asked; upgrade the extension"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_written_in_pgvector_text_form() {
        assert_eq!(vector_text(&[1.0, 0.5, -2.0, 0.1]), "[1,0.5,-2,0.1]");
    }

    #[test]
    fn versions_before_0_8_are_old() {
        assert!(older_than_0_8("0.7.4"));
        assert!(!older_than_0_8("0.8.0"));
        assert!(!older_than_0_8("1.0"));
    }
}
