//! Query plans of the hot statements, for the EXPLAIN check in
//! `tests/explain.rs`: each entry runs `EXPLAIN` on the exact SQL the driver
//! sends (built by the same functions), with sample parameters.

use serde_json::json;
use service_store::filter::StoreFilter;
use service_store::{ActiveRunsQuery, ItemSearch, ThreadFilter, ThreadQuery};
use service_types::{RunStatus, Timestamp};
use tokio_postgres::Client;
use tokio_postgres::types::{ToSql, Type};
use uuid::Uuid;

use crate::db::{Sql, at};
use crate::{checkpoint, items, runs, threads};

/// The names of the checked statements, in the order [`explain_all`] returns them.
pub const NAMES: [&str; 10] = [
    "claim next run",
    "thread search by metadata",
    "latest run of a thread",
    "checkpoint history page",
    "store search by namespace",
    "active runs of a thread",
    "running runs across threads",
    "store search by filter",
    "settle, mirror and claim the next run",
    "next delayed run",
];

/// Which plan [`explain_all`] shows. A statement runs prepared (the static ones from the
/// start, the ones built at run time once their shape is cached), so PostgreSQL plans
/// its first executions with the parameters' values and may then keep one generic
/// plan for all: both must use the indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planning {
    /// Planned with the sample parameters' values.
    Custom,
    /// Planned once for any values (`plan_cache_mode = force_generic_plan`).
    Generic,
}

/// `EXPLAIN` of `sql` with `params` typed, as the driver sends it.
async fn explain(
    client: &Client,
    planning: Planning,
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Result<String, tokio_postgres::Error> {
    let rows = match planning {
        Planning::Custom => {
            client
                .query_typed(&format!("EXPLAIN {sql}"), params)
                .await?
        }
        Planning::Generic => {
            // A generic plan holds for any values, so the arguments can be NULLs
            // (EXECUTE's arguments cannot refer to the outer statement's parameters).
            let types: Vec<&str> = params.iter().map(|(_, pg)| pg.name()).collect();
            let arguments = vec!["NULL"; params.len()].join(", ");
            client
                .batch_execute(&format!(
                    "SET plan_cache_mode = force_generic_plan;
                     PREPARE explained ({}) AS {sql}",
                    types.join(", ")
                ))
                .await?;
            let explained = client
                .query(&format!("EXPLAIN EXECUTE explained ({arguments})"), &[])
                .await;
            client
                .batch_execute("DEALLOCATE explained; RESET plan_cache_mode")
                .await?;
            explained?
        }
    };
    let lines = rows
        .iter()
        .map(|row| row.try_get::<_, String>(0))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(lines.join("\n"))
}

fn explain_sql(sql: Sql) -> (String, Sql) {
    (sql.text.clone(), sql)
}

/// `(name, plan text)` of each checked statement, planned as `planning` says on
/// `client` (whose search_path points at a migrated schema).
pub async fn explain_all(
    client: &Client,
    planning: Planning,
    now: Timestamp,
) -> Result<Vec<(&'static str, String)>, tokio_postgres::Error> {
    let mut plans = Vec::new();
    plans.push((
        NAMES[0],
        explain(
            client,
            planning,
            runs::CLAIM_SQL,
            &[(&at(now), Type::TIMESTAMPTZ)],
        )
        .await?,
    ));

    let query = ThreadQuery {
        filter: ThreadFilter {
            metadata: json!({"owner": "alice"}).as_object().cloned(),
            ..ThreadFilter::default()
        },
        limit: Some(10),
        ..ThreadQuery::default()
    };
    let sql = threads::search_sql(&query, 10)
        .ok()
        .flatten()
        .unwrap_or_default();
    let (text, sql) = explain_sql(sql);
    plans.push((
        NAMES[1],
        explain(client, planning, &text, &sql.params()).await?,
    ));

    plans.push((
        NAMES[2],
        explain(
            client,
            planning,
            runs::LATEST_SQL,
            &[(&Uuid::nil(), Type::UUID)],
        )
        .await?,
    ));

    let before: Option<String> = Some("ffffffff".to_owned());
    let filter: Option<serde_json::Value> = None;
    plans.push((
        NAMES[3],
        explain(
            client,
            planning,
            checkpoint::list_sql(),
            &[
                (&"thread", Type::TEXT),
                (&"", Type::TEXT),
                (&before, Type::TEXT),
                (&filter, Type::JSONB),
                (&10_i64, Type::INT8),
            ],
        )
        .await?,
    ));

    let search = ItemSearch {
        namespace_prefix: vec!["users".to_owned(), "alice".to_owned()],
        filter: StoreFilter::default(),
        limit: Some(10),
        ..ItemSearch::default()
    };
    let (text, sql) = explain_sql(items::search_sql(
        &search,
        10,
        now,
        None,
        items::Scan::Every,
    ));
    plans.push((
        NAMES[4],
        explain(client, planning, &text, &sql.params()).await?,
    ));

    plans.push((
        NAMES[5],
        explain(
            client,
            planning,
            runs::ACTIVE_OF_THREAD_SQL,
            &[(&Uuid::nil(), Type::UUID), (&10_i64, Type::INT8)],
        )
        .await?,
    ));

    let running = ActiveRunsQuery {
        status: Some(RunStatus::Running),
        ..ActiveRunsQuery::default()
    };
    let (text, sql) = explain_sql(runs::active_sql(&running, 100).unwrap_or_default());
    plans.push((
        NAMES[6],
        explain(client, planning, &text, &sql.params()).await?,
    ));

    // Bench S5's shape: one namespace holds many items, an equality filter picks few.
    let search = ItemSearch {
        namespace_prefix: vec!["users".to_owned()],
        filter: StoreFilter::parse(&json!({"n": 77})).unwrap_or_default(),
        limit: Some(10),
        ..ItemSearch::default()
    };
    let (text, sql) = explain_sql(items::search_sql(
        &search,
        10,
        now,
        None,
        items::Scan::Every,
    ));
    plans.push((
        NAMES[7],
        explain(client, planning, &text, &sql.params()).await?,
    ));

    let (run, next, none) = (Uuid::nil(), Uuid::max(), None::<String>);
    let (values, interrupts) = (json!({}), json!([]));
    let (status, settled, cancelled, error) = ("idle", "success", "interrupted", json!(null));
    plans.push((
        NAMES[8],
        explain(
            client,
            planning,
            runs::settle_and_mirror_sql(true, false),
            &[
                (&run, Type::UUID),
                (&status, Type::TEXT),
                (&true, Type::BOOL),
                (&values, Type::JSONB),
                (&interrupts, Type::JSONB),
                (&at(now), Type::TIMESTAMPTZ),
                (&none, Type::TEXT),
                (&settled, Type::TEXT),
                (&cancelled, Type::TEXT),
                (&error, Type::JSONB),
                (&next, Type::UUID),
                (&at(now), Type::TIMESTAMPTZ),
            ],
        )
        .await?,
    ));

    plans.push((
        NAMES[9],
        explain(
            client,
            planning,
            runs::NEXT_AVAILABLE_SQL,
            &[(&at(now), Type::TIMESTAMPTZ)],
        )
        .await?,
    ));
    Ok(plans)
}
