//! `/assistants` routes.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use service_engine::Engine;
use service_types::{
    AssistantCreate, AssistantPatch, AssistantSearch, AssistantVersionsQuery, SetLatest,
};

use crate::error::{ApiResult, unprocessable};
use crate::extract::{JsonBody, Path, QueryParams};
use crate::json::Json;
use crate::project;
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

pub(crate) fn routes() -> Router<Engine> {
    Router::new()
        .route("/assistants", post(create))
        .route("/assistants/search", post(search))
        .route("/assistants/count", post(count))
        .route(
            "/assistants/{assistant_id}",
            get(read).patch(update).delete(remove),
        )
        .route("/assistants/{assistant_id}/versions", post(versions))
        .route("/assistants/{assistant_id}/latest", post(set_latest))
        .route("/assistants/{assistant_id}/graph", get(graph))
        .route("/assistants/{assistant_id}/subgraphs", get(subgraphs))
        .route(
            "/assistants/{assistant_id}/subgraphs/{namespace}",
            get(subgraphs_in),
        )
        .route("/assistants/{assistant_id}/schemas", get(schemas))
}

async fn create(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<AssistantCreate>,
) -> ApiResult<Response> {
    Ok(Json(engine.create_assistant(body).await?).into_response())
}

async fn search(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<AssistantSearch>,
) -> ApiResult<Response> {
    let select = body.select.clone().unwrap_or_default();
    let page = engine.search_assistants(body).await?;
    let items = project::select(&page.assistants, &select, &SELECTABLE)?;
    let mut pairs = vec![("x-pagination-total", page.total.to_string())];
    if let Some(next) = page.next_offset {
        pairs.push(("x-pagination-next", next.to_string()));
    }
    Ok((headers(&pairs), Json(items)).into_response())
}

async fn count(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<AssistantSearch>,
) -> ApiResult<Json<u64>> {
    Ok(Json(engine.count_assistants(body).await?))
}

async fn read(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(Json(engine.get_assistant(&id).await?).into_response())
}

async fn update(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<AssistantPatch>,
) -> ApiResult<Response> {
    Ok(Json(engine.update_assistant(&id, body).await?).into_response())
}

async fn remove(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<StatusCode> {
    let delete_threads = query.bool("delete_threads")?.unwrap_or(false);
    engine.delete_assistant(&id, delete_threads).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn versions(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<AssistantVersionsQuery>,
) -> ApiResult<Response> {
    Ok(Json(engine.assistant_versions(&id, body).await?).into_response())
}

async fn set_latest(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SetLatest>,
) -> ApiResult<Response> {
    Ok(Json(
        engine
            .set_latest_assistant_version(&id, body.version)
            .await?,
    )
    .into_response())
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
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<Json<Value>> {
    let depth = xray(&query)?;
    Ok(Json(engine.assistant_graph(&id, depth).await?))
}

async fn subgraphs(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let recurse = query.bool("recurse")?.unwrap_or(false);
    Ok(Json(engine.assistant_subgraphs(&id, None, recurse).await?).into_response())
}

async fn subgraphs_in(
    State(engine): State<Engine>,
    Path((id, namespace)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let recurse = query.bool("recurse")?.unwrap_or(false);
    Ok(Json(
        engine
            .assistant_subgraphs(&id, Some(namespace), recurse)
            .await?,
    )
    .into_response())
}

async fn schemas(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(Json(engine.assistant_schemas(&id).await?).into_response())
}
