//! The cap on streams (SSE streams and WebSockets) one authenticated principal holds
//! open at once: each open stream holds a [`StreamSlot`], released when its body or
//! socket is dropped (the stream ended or the client went away).
//!
//! Requests without an authenticated principal are not capped: without an
//! authenticator every client is the same "anonymous", and one shared bucket would
//! turn a per-client cap into a server-wide one that a few clients exhaust for all;
//! limiting anonymous clients belongs to the proxy in front, which sees addresses.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::Response;
use http_body_util::BodyExt;
use service_engine::{EngineError, ErrorKind};

use crate::auth::Authenticated;
use crate::error::ApiError;

/// Open streams per principal identity, shared by every request of one router.
#[derive(Clone, Debug)]
pub(crate) struct StreamSlots {
    limit: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl StreamSlots {
    /// Slots of at most `limit` open streams per principal.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            open: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        // Every update under this lock is one increment or decrement: a panic elsewhere
        // cannot leave it half-done.
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One more open stream of `identity`, or the 429 saying it holds the most it may.
    fn acquire(&self, identity: &str) -> Result<Held, ApiError> {
        let mut open = self.lock();
        let count = open.entry(identity.to_owned()).or_default();
        if *count >= self.limit {
            return Err(ApiError(EngineError::new(
                ErrorKind::TooManyRequests,
                format!(
                    "This principal already holds {} open streams, the most one may \
                     (SERVICE_MAX_STREAMS_PER_PRINCIPAL); close one first",
                    self.limit
                ),
            )));
        }
        *count += 1;
        Ok(Held {
            slots: self.clone(),
            identity: identity.to_owned(),
        })
    }
}

/// One open stream of an authenticated principal.
#[derive(Debug)]
struct Held {
    slots: StreamSlots,
    identity: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        if let Some(count) = open.get_mut(&self.identity) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.identity);
            }
        }
    }
}

/// The slot a stream route takes before it opens its stream: a 429 when the
/// principal holds the most open streams it may; empty when no cap applies.
#[derive(Debug)]
pub(crate) struct StreamSlot(Option<Held>);

impl<S: Send + Sync> FromRequestParts<S> for StreamSlot {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let slots = parts.extensions.get::<StreamSlots>();
        let principal = parts.extensions.get::<Authenticated>();
        match (slots, principal) {
            (Some(slots), Some(Authenticated(principal))) => {
                Ok(Self(Some(slots.acquire(&principal.identity)?)))
            }
            _ => Ok(Self(None)),
        }
    }
}

impl StreamSlot {
    /// `response` with its body holding this slot until the body is dropped.
    pub(crate) fn held_by(self, response: Response) -> Response {
        if self.0.is_none() {
            return response;
        }
        response.map(|body| {
            Body::new(body.map_frame(move |frame| {
                let _held = &self;
                frame
            }))
        })
    }
}
