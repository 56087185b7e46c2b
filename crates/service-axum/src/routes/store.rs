//! `/store` routes: the long-term key/value store.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use serde_json::json;
use service_engine::Engine;
use service_types::{StoreDelete, StoreListNamespaces, StorePut, StoreSearch};

use crate::error::ApiResult;
use crate::extract::{JsonBody, QueryParams};
use crate::json::Json;

pub(crate) fn routes() -> Router<Engine> {
    Router::new()
        .route(
            "/store/items",
            put(put_item).get(get_item).delete(delete_item),
        )
        .route("/store/items/search", post(search))
        .route("/store/namespaces", post(namespaces))
}

async fn put_item(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<StorePut>,
) -> ApiResult<StatusCode> {
    engine.put_item(body).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /store/items?namespace=a.b&key=k`: the item, or `null` (never 404).
async fn get_item(State(engine): State<Engine>, query: QueryParams) -> ApiResult<Response> {
    let Some(key) = query.get("key") else {
        return Ok((
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "Key is required"})),
        )
            .into_response());
    };
    let namespace: Vec<String> = query
        .get("namespace")
        .map(|text| text.split('.').map(str::to_owned).collect())
        .unwrap_or_default();
    let refresh = query.bool("refresh_ttl")?;
    Ok(Json(engine.get_item(&namespace, key, refresh).await?).into_response())
}

async fn delete_item(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<StoreDelete>,
) -> ApiResult<StatusCode> {
    engine.delete_item(&body.namespace, &body.key).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn search(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<StoreSearch>,
) -> ApiResult<Response> {
    let items = engine.search_items(body).await?;
    Ok(Json(json!({ "items": items })).into_response())
}

async fn namespaces(
    State(engine): State<Engine>,
    JsonBody(body): JsonBody<StoreListNamespaces>,
) -> ApiResult<Response> {
    let namespaces = engine.list_namespaces(body).await?;
    Ok(Json(json!({ "namespaces": namespaces })).into_response())
}
