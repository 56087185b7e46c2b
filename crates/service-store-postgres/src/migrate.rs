//! The migrator: applies `migrations/NNNN_name.sql` at boot (SPEC "Versioning" 3).
//!
//! - A ledger table `service_migrations` records each applied version.
//! - A session advisory lock (keyed by the schema) serializes concurrent boots: the
//!   second instance waits, then finds the ledger up to date. It waits by polling
//!   `pg_try_advisory_lock` outside any transaction, never in a blocking
//!   `pg_advisory_lock` call, which would deadlock with `CREATE INDEX CONCURRENTLY`.
//! - A file runs in one transaction together with its ledger row, unless its first
//!   line is `-- no-transaction`; then its statements (split on `;` at line ends)
//!   run one by one outside any transaction, as `CREATE INDEX CONCURRENTLY` requires,
//!   and the ledger row is written last. A failure partway leaves no ledger row, so
//!   the next boot retries the file; its statements are idempotent (IF NOT EXISTS),
//!   and an INVALID index left by an interrupted concurrent build is dropped before
//!   its statement is retried.
//!
//! - The semantic index's tables are not a migration: they exist only when
//!   `store.index` is configured, set up by `vectors::prepare` under the same lock.
//!
//! See docs/migrations.md for why this is not sqlx's migrator.

use std::time::{Duration, Instant};

use chrono::Utc;
use tokio_postgres::{Client, NoTls};

use crate::{PgError, PgOptions};

/// One migration file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migration {
    /// Its number (the file's `NNNN` prefix).
    pub version: i32,
    /// The file name.
    pub name: &'static str,
    /// The SQL text.
    pub sql: &'static str,
}

impl Migration {
    /// True when the file's first line is `-- no-transaction`.
    pub fn no_transaction(&self) -> bool {
        self.sql
            .lines()
            .next()
            .is_some_and(|line| line.trim() == "-- no-transaction")
    }

    /// The statements of the file, split on `;` at line ends (comment-only and blank
    /// chunks dropped).
    pub fn statements(&self) -> Vec<String> {
        let mut statements = Vec::new();
        let mut current = String::new();
        for line in self.sql.lines() {
            current.push_str(line);
            current.push('\n');
            if line.trim_end().ends_with(';') {
                push_statement(&mut statements, &current);
                current.clear();
            }
        }
        push_statement(&mut statements, &current);
        statements
    }
}

fn push_statement(statements: &mut Vec<String>, chunk: &str) {
    let has_code = chunk.lines().any(|line| {
        let line = line.trim();
        !line.is_empty() && !line.starts_with("--")
    });
    if has_code {
        statements.push(chunk.trim().to_owned());
    }
}

/// The migrations shipped with this crate, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_core_tables.sql",
        sql: include_str!("../../../migrations/0001_core_tables.sql"),
    },
    Migration {
        version: 2,
        name: "0002_webhook_deliveries.sql",
        sql: include_str!("../../../migrations/0002_webhook_deliveries.sql"),
    },
    Migration {
        version: 3,
        name: "0003_assistant_versions.sql",
        sql: include_str!("../../../migrations/0003_assistant_versions.sql"),
    },
    Migration {
        version: 4,
        name: "0004_checkpoints.sql",
        sql: include_str!("../../../migrations/0004_checkpoints.sql"),
    },
    Migration {
        version: 5,
        name: "0005_performance_indexes.sql",
        sql: include_str!("../../../migrations/0005_performance_indexes.sql"),
    },
    Migration {
        version: 6,
        name: "0006_active_runs_by_thread.sql",
        sql: include_str!("../../../migrations/0006_active_runs_by_thread.sql"),
    },
    Migration {
        version: 7,
        name: "0007_drop_runs_status_created.sql",
        sql: include_str!("../../../migrations/0007_drop_runs_status_created.sql"),
    },
    Migration {
        version: 8,
        name: "0008_checkpoint_body_inline.sql",
        sql: include_str!("../../../migrations/0008_checkpoint_body_inline.sql"),
    },
    Migration {
        version: 9,
        name: "0009_thread_state_holds.sql",
        sql: include_str!("../../../migrations/0009_thread_state_holds.sql"),
    },
    Migration {
        version: 10,
        name: "0010_delivery_owner.sql",
        sql: include_str!("../../../migrations/0010_delivery_owner.sql"),
    },
    Migration {
        version: 11,
        name: "0011_run_cancel_reason.sql",
        sql: include_str!("../../../migrations/0011_run_cancel_reason.sql"),
    },
    Migration {
        version: 12,
        name: "0012_store_item_fields.sql",
        sql: include_str!("../../../migrations/0012_store_item_fields.sql"),
    },
    Migration {
        version: 13,
        name: "0013_run_traceparent.sql",
        sql: include_str!("../../../migrations/0013_run_traceparent.sql"),
    },
    Migration {
        version: 14,
        name: "0014_pending_runs_by_availability.sql",
        sql: include_str!("../../../migrations/0014_pending_runs_by_availability.sql"),
    },
];

/// The ledger table.
pub const LEDGER: &str = "service_migrations";

/// Connects with `options` (one dedicated connection, closed afterwards so the
/// session lock is released even on failure) and applies every pending migration.
/// Returns the versions this call applied.
pub async fn run(options: &PgOptions) -> Result<Vec<i32>, PgError> {
    run_migrations(options, MIGRATIONS).await
}

/// Applies `migrations` (in order) as [`run`] does; tests pass their own lists.
pub async fn run_migrations(
    options: &PgOptions,
    migrations: &[Migration],
) -> Result<Vec<i32>, PgError> {
    let (client, task) = connect_dedicated(options, "service-migrate").await?;
    let result = apply(&client, options.schema.as_deref(), migrations).await;
    drop(client);
    // The connection ends once the client is gone; the session lock goes with it.
    let _ = task.await;
    result
}

/// One connection of its own (not pooled), whose session locks end with it.
pub(crate) async fn connect_dedicated(
    options: &PgOptions,
    application_name: &str,
) -> Result<(Client, tokio::task::JoinHandle<()>), PgError> {
    let config = options.pg_config(application_name)?;
    let (client, connection) = config.connect(NoTls).await?;
    let task = tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "dedicated connection closed");
        }
    });
    Ok((client, task))
}

async fn apply(
    client: &Client,
    schema: Option<&str>,
    migrations: &[Migration],
) -> Result<Vec<i32>, PgError> {
    let scope = lock(client, schema).await?;
    if let Some(schema) = schema {
        client
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await?;
    }
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {LEDGER} (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL
            )"
        ))
        .await?;
    let applied = client
        .query(&format!("SELECT version FROM {LEDGER}"), &[])
        .await?
        .iter()
        .map(|row| row.try_get::<_, i32>(0))
        .collect::<Result<Vec<_>, _>>()?;
    let mut done = Vec::new();
    for migration in migrations {
        if applied.contains(&migration.version) {
            continue;
        }
        let failed = |source| PgError::Migration {
            version: migration.version,
            name: migration.name.to_owned(),
            source,
        };
        if migration.no_transaction() {
            apply_one_by_one(client, migration).await.map_err(failed)?;
        } else {
            apply_in_transaction(client, migration)
                .await
                .map_err(failed)?;
        }
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "migration applied"
        );
        done.push(migration.version);
    }
    unlock(client, &scope).await?;
    Ok(done)
}

/// Releases the lock [`lock`] took.
pub(crate) async fn unlock(client: &Client, scope: &str) -> Result<(), PgError> {
    client
        .execute(
            "SELECT pg_advisory_unlock(hashtext('service-migrations:' || $1::text))",
            &[&scope],
        )
        .await?;
    Ok(())
}

/// How long a boot waits for another boot's migrations before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(600);

/// Takes the session advisory lock of the schema's migrations (`schema`, else the
/// connection's current schema) and returns its scope, for [`unlock`].
pub(crate) async fn lock(client: &Client, schema: Option<&str>) -> Result<String, PgError> {
    let scope = match schema {
        Some(schema) => schema.to_owned(),
        None => client
            .query_one("SELECT coalesce(current_schema(), 'public')", &[])
            .await?
            .try_get(0)?,
    };
    take_lock(client, &scope).await?;
    Ok(scope)
}

/// Takes the session advisory lock of `scope`, polling `pg_try_advisory_lock`
/// between short sleeps. A blocking `pg_advisory_lock` would deadlock: the waiting
/// statement is an open transaction, and `CREATE INDEX CONCURRENTLY` in the boot
/// holding the lock waits for every older transaction to finish.
async fn take_lock(client: &Client, scope: &str) -> Result<(), PgError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        let taken: bool = client
            .query_one(
                "SELECT pg_try_advisory_lock(hashtext('service-migrations:' || $1::text))",
                &[&scope],
            )
            .await?
            .try_get(0)?;
        if taken {
            return Ok(());
        }
        if started.elapsed() > LOCK_WAIT {
            return Err(PgError::Config(format!(
                "another instance has been migrating {scope} for over {} s",
                LOCK_WAIT.as_secs()
            )));
        }
        tracing::debug!(scope, "waiting for another instance's migrations");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

async fn record(client: &Client, migration: &Migration) -> Result<(), tokio_postgres::Error> {
    client
        .execute(
            &format!("INSERT INTO {LEDGER} (version, name, applied_at) VALUES ($1, $2, $3)"),
            &[&migration.version, &migration.name, &Utc::now()],
        )
        .await
        .map(|_| ())
}

async fn apply_in_transaction(
    client: &Client,
    migration: &Migration,
) -> Result<(), tokio_postgres::Error> {
    client.batch_execute("BEGIN").await?;
    let result = async {
        client.batch_execute(migration.sql).await?;
        record(client, migration).await
    }
    .await;
    match result {
        Ok(()) => client.batch_execute("COMMIT").await,
        Err(error) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(error)
        }
    }
}

async fn apply_one_by_one(
    client: &Client,
    migration: &Migration,
) -> Result<(), tokio_postgres::Error> {
    for statement in migration.statements() {
        if let Some(index) = concurrent_index_name(&statement) {
            drop_invalid_index(client, &index).await?;
        }
        // One statement per simple-protocol message: PostgreSQL runs it outside any
        // transaction block, which CREATE INDEX CONCURRENTLY requires.
        client.batch_execute(&statement).await?;
    }
    record(client, migration).await
}

/// The index a `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS <name>` creates.
pub fn concurrent_index_name(statement: &str) -> Option<String> {
    let code: String = statement
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<String> = code.split_whitespace().map(str::to_owned).collect();
    let upper: Vec<String> = words.iter().map(|word| word.to_uppercase()).collect();
    let start = upper.iter().position(|word| word == "CREATE")?;
    let rest = &upper[start + 1..];
    let offset = usize::from(rest.first().is_some_and(|word| word == "UNIQUE"));
    let expected = ["INDEX", "CONCURRENTLY", "IF", "NOT", "EXISTS"];
    let matches = rest
        .get(offset..offset + expected.len())
        .is_some_and(|window| window.iter().zip(expected).all(|(have, want)| have == want));
    if !matches {
        return None;
    }
    words.get(start + 1 + offset + expected.len()).cloned()
}

/// Drops `index` in the current schema if an interrupted concurrent build left it
/// INVALID (IF NOT EXISTS would otherwise skip it and keep the broken index).
pub(crate) async fn drop_invalid_index(
    client: &Client,
    index: &str,
) -> Result<(), tokio_postgres::Error> {
    let invalid = client
        .query_opt(
            "SELECT 1 FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relname = $1 AND n.nspname = current_schema() AND NOT i.indisvalid",
            &[&index],
        )
        .await?
        .is_some();
    if invalid {
        tracing::warn!(
            index,
            "dropping an invalid index left by an interrupted build"
        );
        client
            .batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {index}"))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_index_builds_run_outside_a_transaction() {
        let flags: Vec<bool> = MIGRATIONS.iter().map(Migration::no_transaction).collect();
        assert_eq!(
            flags,
            vec![
                false, false, false, false, true, true, true, false, false, false, false, false,
                false, true
            ]
        );
    }

    #[test]
    fn statements_split_at_line_end_semicolons_and_name_their_index() {
        let statements = MIGRATIONS[4].statements();
        assert!(statements.len() > 5);
        for statement in &statements {
            assert!(concurrent_index_name(statement).is_some(), "{statement}");
        }
        assert_eq!(
            concurrent_index_name(&statements[0]).as_deref(),
            Some("threads_metadata_gin")
        );
    }
}
