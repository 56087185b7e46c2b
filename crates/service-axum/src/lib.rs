//! The axum adapter: the Router for every route, SSE with Last-Event-ID replay,
//! Idempotency-Key handling and the one mapping from engine errors to HTTP.
//!
//! Embed the service in an existing axum app by nesting [`router`]:
//!
//! ```no_run
//! # fn demo(engine: service_engine::Engine) {
//! let app: axum::Router = axum::Router::new().nest("/agents", service_axum::router(engine));
//! # }
//! ```

mod cors;
mod error;
mod extract;
mod idempotency;
mod json;
mod project;
mod routes;
mod sse;

use axum::Router;
use service_engine::Engine;

pub use error::{ApiError, ApiResult, status_of};

/// Every route of the service, bound to `engine`. Nest it under any path: the
/// `Location` headers it sends include the mount path.
pub fn router(engine: Engine) -> Router {
    let routes = Router::new()
        .merge(routes::assistants::routes())
        .merge(routes::threads::routes())
        .merge(routes::crons::routes())
        .merge(routes::runs::routes())
        .merge(routes::store::routes())
        .merge(routes::meta::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(engine.clone());
    // Wrapping the whole route table (not each route) lets an idempotent replay
    // re-dispatch to a different route (the join of the recorded run).
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn_with_state(
            engine,
            idempotency::idempotency,
        ))
        .layer(axum::middleware::from_fn(cors::cors))
}

async fn not_found() -> ApiError {
    ApiError(service_engine::EngineError::not_found("Not Found"))
}

async fn method_not_allowed() -> ApiError {
    ApiError(service_engine::EngineError::new(
        service_engine::ErrorKind::MethodNotAllowed,
        "Method Not Allowed",
    ))
}
