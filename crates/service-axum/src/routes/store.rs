//! `/store` routes: the long-term key/value store.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use service_engine::auth::{Action, Resource, Scope};
use service_engine::{Engine, validate_namespace};
use service_types::{StoreDelete, StoreListNamespaces, StorePut, StoreSearch};

use crate::auth::Scoped;
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

/// The namespace prefix a scoped caller's store lives under (empty when unscoped).
fn tenant(scope: &Scope) -> &[String] {
    match scope {
        Scope::Namespace(prefix) => prefix,
        Scope::All | Scope::Owned(_) => &[],
    }
}

/// `namespace` moved under the caller's prefix.
fn within(prefix: &[String], namespace: &[String]) -> Vec<String> {
    prefix.iter().chain(namespace).cloned().collect()
}

/// A stored namespace as the caller sees it: without its prefix.
fn outside(prefix: &[String], mut namespace: Vec<String>) -> Vec<String> {
    if namespace.starts_with(prefix) {
        namespace.drain(..prefix.len());
    }
    namespace
}

async fn put_item(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    JsonBody(mut body): JsonBody<StorePut>,
) -> ApiResult<StatusCode> {
    let prefix = tenant(&scope);
    if !prefix.is_empty() {
        validate_namespace(&body.namespace)?;
        body.namespace = within(prefix, &body.namespace);
    }
    engine.put_item(body).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /store/items?namespace=a.b&key=k`: the item, or `null` (never 404).
async fn get_item(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
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
        .map(|text| text.split('.').map(str::to_owned).collect())
        .unwrap_or_default();
    let refresh = query.bool("refresh_ttl")?;
    let prefix = tenant(&scope);
    let item = engine
        .get_item(&within(prefix, &namespace), key, refresh)
        .await?
        .map(|mut item| {
            item.namespace = outside(prefix, item.namespace);
            item
        });
    Ok(Json(item).into_response())
}

async fn delete_item(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    JsonBody(body): JsonBody<StoreDelete>,
) -> ApiResult<StatusCode> {
    let namespace = within(tenant(&scope), &body.namespace);
    engine.delete_item(&namespace, &body.key).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn search(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    JsonBody(mut body): JsonBody<StoreSearch>,
) -> ApiResult<Response> {
    let prefix = tenant(&scope);
    body.namespace_prefix = within(prefix, &body.namespace_prefix);
    let mut items = engine.search_items(body).await?;
    for found in &mut items {
        found.item.namespace = outside(prefix, std::mem::take(&mut found.item.namespace));
    }
    Ok(Json(json!({ "items": items })).into_response())
}

async fn namespaces(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    JsonBody(mut body): JsonBody<StoreListNamespaces>,
) -> ApiResult<Response> {
    let prefix = tenant(&scope);
    if !prefix.is_empty() {
        let own = body.prefix.take().unwrap_or_default();
        body.prefix = Some(within(prefix, &own));
        body.max_depth = body
            .max_depth
            .map(|depth| depth.saturating_add(prefix.len() as i64));
    }
    let namespaces: Vec<Vec<String>> = engine
        .list_namespaces(body)
        .await?
        .into_iter()
        .map(|namespace| outside(prefix, namespace))
        .collect();
    Ok(Json(json!({ "namespaces": namespaces })).into_response())
}
