//! The cap on streams (SSE streams, WebSockets and waits) one client holds open at
//! once: each open stream holds a [`StreamSlot`], released when its body or socket is
//! dropped (the stream ended or the client went away).
//!
//! A client is its authenticated principal, else its IP address. Requests without a
//! principal are not pooled as one "anonymous": one shared bucket would turn a
//! per-client cap into a server-wide one that a few clients exhaust for all.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use service_engine::{EngineError, ErrorKind};

use crate::auth::Authenticated;
use crate::error::ApiError;

/// Who holds streams.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Client {
    Principal(String),
    Address(IpAddr),
}

/// Open streams per client, shared by every request of one router.
#[derive(Clone, Debug)]
pub(crate) struct StreamSlots {
    per_principal: usize,
    /// 0: addresses are not capped.
    per_address: usize,
    open: Arc<Mutex<HashMap<Client, usize>>>,
}

impl StreamSlots {
    /// Slots within `limits`' caps per principal and per address.
    pub(crate) fn new(limits: &crate::ClientLimits) -> Self {
        Self {
            per_principal: limits.max_streams_per_principal,
            per_address: limits.max_streams_per_address,
            open: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Client, usize>> {
        // Every update under this lock is one increment or decrement: a panic elsewhere
        // cannot leave it half-done.
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One more open stream of `client`, or the 429 saying it holds the most it may;
    /// `None` when no cap applies.
    fn acquire(&self, client: Client) -> Result<Option<Held>, ApiError> {
        let (limit, who, knob) = match client {
            Client::Principal(_) => (
                self.per_principal,
                "principal",
                "SERVICE_MAX_STREAMS_PER_PRINCIPAL",
            ),
            Client::Address(_) if self.per_address == 0 => return Ok(None),
            Client::Address(_) => (
                self.per_address,
                "address",
                "SERVICE_MAX_STREAMS_PER_ADDRESS",
            ),
        };
        let mut open = self.lock();
        let count = open.entry(client.clone()).or_default();
        if *count >= limit {
            return Err(ApiError(EngineError::new(
                ErrorKind::TooManyRequests,
                format!(
                    "This {who} already holds {limit} open streams and waits, the most one \
                     may ({knob}); close one first"
                ),
            )));
        }
        *count += 1;
        Ok(Some(Held {
            slots: self.clone(),
            client,
        }))
    }
}

/// One open stream of a client.
#[derive(Debug)]
struct Held {
    slots: StreamSlots,
    client: Client,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        if let Some(count) = open.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

/// The slot a stream route takes before it opens its stream: a 429 when the
/// client holds the most open streams it may; empty when no cap applies.
#[derive(Debug)]
pub(crate) struct StreamSlot(Option<Held>);

impl<S: Send + Sync> FromRequestParts<S> for StreamSlot {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(slots) = parts.extensions.get::<StreamSlots>() else {
            return Ok(Self(None));
        };
        let client = match parts.extensions.get::<Authenticated>() {
            Some(Authenticated(principal)) => Client::Principal(principal.identity.clone()),
            None => match parts.extensions.get::<ConnectInfo<SocketAddr>>() {
                Some(ConnectInfo(peer)) => Client::Address(peer.ip()),
                None => return Ok(Self(None)),
            },
        };
        Ok(Self(slots.acquire(client)?))
    }
}

impl StreamSlot {
    /// `response` with its body holding this slot until the body is dropped.
    pub(crate) fn held_by(self, response: Response) -> Response {
        let Some(held) = self.0 else {
            return response;
        };
        response.map(|body| Body::new(Holding { body, _held: held }))
    }
}

/// A body holding a slot. Its size is the inner body's, so a short answer (a wait
/// that had its result at once) keeps its `Content-Length` instead of going chunked.
struct Holding {
    body: Body,
    _held: Held,
}

impl http_body::Body for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[test]
    fn a_held_body_keeps_its_size_and_the_slot_until_dropped() {
        let limits = crate::ClientLimits {
            max_streams_per_address: 1,
            ..crate::ClientLimits::default()
        };
        let slots = StreamSlots::new(&limits);
        let client = Client::Address(IpAddr::from([127, 0, 0, 1]));
        let held = slots.acquire(client.clone()).unwrap();
        let response = StreamSlot(held).held_by(Response::new(Body::from("{}")));
        // A known size is sent as Content-Length, not chunked.
        assert_eq!(response.body().size_hint().exact(), Some(2));
        assert!(slots.acquire(client.clone()).is_err(), "the slot is held");
        drop(response);
        assert!(slots.acquire(client).unwrap().is_some(), "and released");
    }
}
