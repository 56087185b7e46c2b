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

/// The request body limit when none is configured: 25 MiB, room for agent inputs
/// that carry images or long histories.
pub const DEFAULT_MAX_BODY_BYTES: usize = 25 * 1024 * 1024;

/// How the router treats requests.
#[derive(Clone, Copy, Debug)]
pub struct RouterOptions {
    /// Largest request body read (SERVICE_MAX_BODY_BYTES); a larger one gets 413.
    pub max_body_bytes: usize,
}

impl Default for RouterOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// Every route of the service, bound to `engine`, with the default options. Nest it
/// under any path: the `Location` headers it sends include the mount path.
pub fn router(engine: Engine) -> Router {
    router_with(engine, RouterOptions::default())
}

/// Every route of the service, bound to `engine`, with `options`.
pub fn router_with(engine: Engine, options: RouterOptions) -> Router {
    let routes = Router::new()
        .merge(routes::assistants::routes())
        .merge(routes::threads::routes())
        .merge(routes::crons::routes())
        .merge(routes::runs::routes())
        .merge(routes::deliveries::routes())
        .merge(routes::store::routes())
        .merge(routes::meta::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(engine.clone());
    let limit = extract::BodyLimit(options.max_body_bytes);
    // Wrapping the whole route table (not each route) lets an idempotent replay
    // re-dispatch to a different route (the join of the recorded run).
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn_with_state(
            engine,
            idempotency::idempotency,
        ))
        .layer(axum::Extension(limit))
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
