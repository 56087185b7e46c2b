//! `GET /channels` (the inventory, `assistants:read`) and `POST /channels/{route_name}`
//! (public: a provider's own signature authenticates it, checked by service-channels).
//! Both exist only when routes are configured.

use axum::Extension;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use service_channels::{Channels, InventoryEntry};
use service_engine::auth::{Action, Resource};

use crate::auth::{Access, CallerOf};
use crate::extract::{BodyLimit, Path, read_body};
use crate::json::Json;
use crate::routes::Table;

/// The largest inbound event read: providers' events are small, and these requests
/// are read before anything has authenticated them.
const MAX_EVENT_BYTES: usize = 1024 * 1024;

pub(crate) fn routes() -> Table {
    Table::new()
        .get("/channels", (Resource::Assistants, Action::Read), inventory)
        .post("/channels/{route_name}", Access::Public, receive)
}

/// The guard has asked for `assistants:read`; the inventory is configuration, the same
/// for every caller, and holds no credentials or URLs.
async fn inventory(
    CallerOf(_caller): CallerOf,
    Extension(channels): Extension<Channels>,
) -> Json<Vec<InventoryEntry>> {
    Json(channels.inventory())
}

async fn receive(
    Extension(channels): Extension<Channels>,
    Path(route_name): Path<String>,
    headers: HeaderMap,
    request: axum::extract::Request<Body>,
) -> Response {
    let limit = BodyLimit::of(request.extensions()).min(MAX_EVENT_BYTES);
    let body = match read_body(&headers, request.into_body(), limit).await {
        Ok(body) => body,
        Err(error) => return error.into_response(),
    };
    let answer = channels.receive(&route_name, &headers, &body).await;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(answer.body)).into_response()
}
