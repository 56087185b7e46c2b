//! `/store` routes: the long-term key/value store.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use service_engine::Engine;
use service_engine::auth::{Action, Resource};
use service_store::namespace;
use service_types::{StoreDelete, StoreListNamespaces, StorePut, StoreSearch};

use crate::auth::CallerOf;
use crate::error::ApiResult;
use crate::extract::{JsonBody, QueryParams};
use crate::json::Json;
use crate::routes::Table;

pub(crate) fn routes() -> Table {
    use Action::{Create, Delete, Read, Search};
    const S: Resource = Resource::Store;
    Table::new()
        .put("/store/items", (S, Create), put_item)
        .get("/store/items", (S, Read), get_item)
        .delete("/store/items", (S, Delete), delete_item)
        .post("/store/items/search", (S, Search), search)
        .post("/store/namespaces", (S, Search), namespaces)
}

async fn put_item(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<StorePut>,
) -> ApiResult<StatusCode> {
    engine.as_caller(&caller).items().put(body).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /store/items?namespace=a.b&key=k`: the item, or `null` (never 404).
async fn get_item(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    query: QueryParams,
) -> ApiResult<Response> {
    let Some(key) = query.get("key") else {
        return Ok((
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "Key is required"})),
        )
            .into_response());
    };
    let namespace: Vec<String> = query
        .get("namespace")
        .map(namespace::from_dotted)
        .unwrap_or_default();
    let refresh = query.bool("refresh_ttl")?;
    let store = engine.as_caller(&caller).items();
    let item = store.get(namespace, key, refresh).await?;
    Ok(Json(item).into_response())
}

async fn delete_item(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<StoreDelete>,
) -> ApiResult<StatusCode> {
    let store = engine.as_caller(&caller).items();
    store.delete(body.namespace, &body.key).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn search(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<StoreSearch>,
) -> ApiResult<Response> {
    let items = engine.as_caller(&caller).items().search(body).await?;
    Ok(Json(json!({ "items": items })).into_response())
}

async fn namespaces(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<StoreListNamespaces>,
) -> ApiResult<Response> {
    let namespaces = engine.as_caller(&caller).items().namespaces(body).await?;
    Ok(Json(json!({ "namespaces": namespaces })).into_response())
}
