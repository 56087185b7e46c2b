//! `/runs/crons` routes.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use service_engine::Engine;
use service_types::{CronCreate, CronPatch, CronSearch};

use crate::error::ApiResult;
use crate::extract::{JsonBody, Path, uuid};
use crate::json::Json;
use crate::project;
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

pub(crate) fn routes() -> Router<Engine> {
    Router::new()
        .route("/runs/crons", post(create_stateless))
        .route("/runs/crons/search", post(search))
        .route("/runs/crons/count", post(count))
        .route(
            "/runs/crons/{cron_id}",
            get(read).patch(update).delete(remove),
        )
        .route("/threads/{thread_id}/runs/crons", post(create_on_thread))
}

async fn create_stateless(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<CronCreate>,
) -> ApiResult<Response> {
    Ok(Json(engine.create_cron(None, body).await?).into_response())
}

async fn create_on_thread(
    State(engine): State<Engine>,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<CronCreate>,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    Ok(Json(engine.create_cron(Some(thread_id), body).await?).into_response())
}

async fn read(State(engine): State<Engine>, Path(cron_id): Path<String>) -> ApiResult<Response> {
    Ok(Json(engine.get_cron(uuid("cron", &cron_id)?).await?).into_response())
}

async fn update(
    State(engine): State<Engine>,
    Path(cron_id): Path<String>,
    JsonBody(body): JsonBody<CronPatch>,
) -> ApiResult<Response> {
    Ok(Json(engine.update_cron(uuid("cron", &cron_id)?, body).await?).into_response())
}

async fn remove(
    State(engine): State<Engine>,
    Path(cron_id): Path<String>,
) -> ApiResult<StatusCode> {
    engine.delete_cron(uuid("cron", &cron_id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn search(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<CronSearch>,
) -> ApiResult<Response> {
    let select: Vec<String> = body
        .select
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|field| field != "now")
        .collect();
    let page = engine.search_crons(body).await?;
    let items = project::select(&page.crons, &select, &SELECTABLE)?;
    let mut pairs = vec![("x-pagination-total", page.total.to_string())];
    if let Some(next) = page.next_offset {
        pairs.push(("x-pagination-next", next.to_string()));
    }
    Ok((headers(&pairs), Json(items)).into_response())
}

async fn count(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<CronSearch>,
) -> ApiResult<Json<u64>> {
    Ok(Json(engine.count_crons(body).await?))
}
