//! A run's webhook deliveries: list them (never their payload) and replay one.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use service_engine::Engine;
use service_engine::auth::{Action, Resource};
use service_store::DeliveryQuery;
use service_types::DeliveryStatus;

use crate::auth::CallerOf;
use crate::error::{ApiResult, unprocessable};
use crate::extract::{Path, QueryParams, uuid};
use crate::json::Json;
use crate::routes::Table;

pub(crate) fn routes() -> Table {
    const T: Resource = Resource::Threads;
    Table::new()
        .get(
            "/threads/{thread_id}/runs/{run_id}/deliveries",
            (T, Action::Read),
            list,
        )
        .post(
            "/threads/{thread_id}/runs/{run_id}/deliveries/{delivery_id}/replay",
            (T, Action::Update),
            replay,
        )
}

async fn list(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    let status = query
        .get("status")
        .map(|status| {
            serde_json::from_value::<DeliveryStatus>(serde_json::json!(status)).map_err(|_| {
                unprocessable(format!(
                    "Invalid delivery status: '{status}' (pending, delivering, delivered or dead)"
                ))
            })
        })
        .transpose()?;
    let count = |key: &str| -> ApiResult<Option<usize>> {
        query
            .int(key)?
            .map(|value| {
                usize::try_from(value)
                    .map_err(|_| unprocessable(format!("{key} must not be negative")))
            })
            .transpose()
    };
    let delivery_query = DeliveryQuery {
        status,
        limit: count("limit")?,
        offset: count("offset")?.unwrap_or(0),
        enforced: None,
    };
    let deliveries = engine.as_caller(&caller).deliveries();
    let deliveries = deliveries.list(thread_id, run_id, &delivery_query).await?;
    Ok(Json(deliveries).into_response())
}

async fn replay(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path((thread_id, run_id, delivery_id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    let (run_id, delivery_id) = (uuid("run", &run_id)?, uuid("delivery", &delivery_id)?);
    let deliveries = engine.as_caller(&caller).deliveries();
    let delivery = deliveries.replay(thread_id, run_id, delivery_id).await?;
    Ok(Json(delivery).into_response())
}
