//! `/runs/crons` routes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use service_engine::Engine;
use service_engine::auth::{Action, Resource};
use service_types::{CronCreate, CronPatch, CronSearch};

use crate::auth::CallerOf;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Path, uuid};
use crate::json::Json;
use crate::project;
use crate::routes::Table;
use crate::routes::headers;

const SELECTABLE: [&str; 15] = [
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "enabled",
    "now",
];

pub(crate) fn routes() -> Table {
    use Action::{Create, Delete, Read, Search, Update};
    const C: Resource = Resource::Crons;
    Table::new()
        .post("/runs/crons", (C, Create), create_stateless)
        .post("/runs/crons/search", (C, Search), search)
        .post("/runs/crons/count", (C, Search), count)
        .get("/runs/crons/{cron_id}", (C, Read), read)
        .patch("/runs/crons/{cron_id}", (C, Update), update)
        .delete("/runs/crons/{cron_id}", (C, Delete), remove)
        .post(
            "/threads/{thread_id}/runs/crons",
            (C, Create),
            create_on_thread,
        )
}

async fn create_stateless(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<CronCreate>,
) -> ApiResult<Response> {
    let cron = engine.as_caller(&caller).crons().create(None, body).await?;
    Ok(Json(cron).into_response())
}

async fn create_on_thread(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<CronCreate>,
) -> ApiResult<Response> {
    let thread_id = Some(uuid("thread", &thread_id)?);
    let cron = engine.as_caller(&caller).crons().create(thread_id, body);
    Ok(Json(cron.await?).into_response())
}

async fn read(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(cron_id): Path<String>,
) -> ApiResult<Response> {
    let cron_id = uuid("cron", &cron_id)?;
    Ok(Json(engine.as_caller(&caller).crons().get(cron_id).await?).into_response())
}

async fn update(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(cron_id): Path<String>,
    JsonBody(body): JsonBody<CronPatch>,
) -> ApiResult<Response> {
    let cron_id = uuid("cron", &cron_id)?;
    let cron = engine.as_caller(&caller).crons().update(cron_id, body);
    Ok(Json(cron.await?).into_response())
}

async fn remove(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(cron_id): Path<String>,
) -> ApiResult<StatusCode> {
    let cron_id = uuid("cron", &cron_id)?;
    engine.as_caller(&caller).crons().delete(cron_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn search(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<CronSearch>,
) -> ApiResult<Response> {
    let select: Vec<String> = body
        .select
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|field| field != "now")
        .collect();
    let page = engine.as_caller(&caller).crons().search(body).await?;
    let items = project::select(&page.crons, &select, &SELECTABLE)?;
    let mut pairs = vec![("x-pagination-total", page.total.to_string())];
    if let Some(next) = page.next_offset {
        pairs.push(("x-pagination-next", next.to_string()));
    }
    Ok((headers(&pairs), Json(items)).into_response())
}

async fn count(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<CronSearch>,
) -> ApiResult<Json<u64>> {
    Ok(Json(engine.as_caller(&caller).crons().count(body).await?))
}
