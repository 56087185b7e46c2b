//! `/assistants` routes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use service_engine::Engine;
use service_engine::auth::{Action, Resource};
use service_types::{
    AssistantCreate, AssistantPatch, AssistantSearch, AssistantVersionsQuery, SetLatest,
};

use crate::auth::CallerOf;
use crate::error::{ApiResult, unprocessable};
use crate::extract::{JsonBody, Path, QueryParams};
use crate::json::Json;
use crate::project;
use crate::routes::Table;
use crate::routes::headers;

const SELECTABLE: [&str; 10] = [
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "created_at",
    "updated_at",
    "metadata",
    "version",
];

pub(crate) fn routes() -> Table {
    use Action::{Create, Delete, Read, Search, Update};
    const A: Resource = Resource::Assistants;
    Table::new()
        .post("/assistants", (A, Create), create)
        .post("/assistants/search", (A, Search), search)
        .post("/assistants/count", (A, Search), count)
        .get("/assistants/{assistant_id}", (A, Read), read)
        .patch("/assistants/{assistant_id}", (A, Update), update)
        .delete("/assistants/{assistant_id}", (A, Delete), remove)
        .post("/assistants/{assistant_id}/versions", (A, Read), versions)
        .post("/assistants/{assistant_id}/latest", (A, Update), set_latest)
        .get("/assistants/{assistant_id}/graph", (A, Read), graph)
        .get("/assistants/{assistant_id}/subgraphs", (A, Read), subgraphs)
        .get(
            "/assistants/{assistant_id}/subgraphs/{namespace}",
            (A, Read),
            subgraphs_in,
        )
        .get("/assistants/{assistant_id}/schemas", (A, Read), schemas)
}

async fn create(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<AssistantCreate>,
) -> ApiResult<Response> {
    let assistant = engine.as_caller(&caller).assistants().create(body).await?;
    Ok(Json(assistant).into_response())
}

async fn search(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<AssistantSearch>,
) -> ApiResult<Response> {
    let select = body.select.clone().unwrap_or_default();
    let page = engine.as_caller(&caller).assistants().search(body).await?;
    let items = project::select(&page.assistants, &select, &SELECTABLE)?;
    let mut pairs = vec![("x-pagination-total", page.total.to_string())];
    if let Some(next) = page.next_offset {
        pairs.push(("x-pagination-next", next.to_string()));
    }
    Ok((headers(&pairs), Json(items)).into_response())
}

async fn count(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<AssistantSearch>,
) -> ApiResult<Json<u64>> {
    Ok(Json(
        engine.as_caller(&caller).assistants().count(body).await?,
    ))
}

async fn read(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let assistant = engine.as_caller(&caller).assistants().get(&id).await?;
    Ok(Json(assistant).into_response())
}

async fn update(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<AssistantPatch>,
) -> ApiResult<Response> {
    let assistants = engine.as_caller(&caller).assistants();
    Ok(Json(assistants.update(&id, body).await?).into_response())
}

async fn remove(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<StatusCode> {
    let delete_threads = query.bool("delete_threads")?.unwrap_or(false);
    let assistants = engine.as_caller(&caller).assistants();
    assistants.delete(&id, delete_threads).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn versions(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<AssistantVersionsQuery>,
) -> ApiResult<Response> {
    let assistants = engine.as_caller(&caller).assistants();
    Ok(Json(assistants.versions(&id, body).await?).into_response())
}

async fn set_latest(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SetLatest>,
) -> ApiResult<Response> {
    let assistants = engine.as_caller(&caller).assistants();
    Ok(Json(assistants.set_latest(&id, body.version).await?).into_response())
}

/// `xray`: a boolean or a positive depth.
fn xray(query: &QueryParams) -> ApiResult<u32> {
    match query.get("xray") {
        None => Ok(0),
        Some(text) => match text.to_ascii_lowercase().as_str() {
            "false" => Ok(0),
            "true" => Ok(u32::MAX),
            digits => match digits.parse::<u32>() {
                Ok(depth) if depth > 0 => Ok(depth),
                _ => Err(unprocessable("Invalid xray value")),
            },
        },
    }
}

async fn graph(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<Json<Value>> {
    let depth = xray(&query)?;
    Ok(Json(
        engine
            .as_caller(&caller)
            .assistants()
            .graph(&id, depth)
            .await?,
    ))
}

async fn subgraphs(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let recurse = query.bool("recurse")?.unwrap_or(false);
    let assistants = engine.as_caller(&caller).assistants();
    Ok(Json(assistants.subgraphs(&id, None, recurse).await?).into_response())
}

async fn subgraphs_in(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path((id, namespace)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let recurse = query.bool("recurse")?.unwrap_or(false);
    let assistants = engine.as_caller(&caller).assistants();
    let subgraphs = assistants.subgraphs(&id, Some(namespace), recurse);
    Ok(Json(subgraphs.await?).into_response())
}

async fn schemas(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let assistants = engine.as_caller(&caller).assistants();
    Ok(Json(assistants.schemas(&id).await?).into_response())
}
