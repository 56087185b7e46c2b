//! Server-sent events and streamed JSON bodies.
//!
//! Frames are written as `event:`/`data:`/`id:` lines with CR LF endings, one-line
//! JSON data, and a `: heartbeat` comment after 5 s of silence. The body pulls the
//! next frame only when hyper asks for it (after the previous chunk was written), so a
//! slow client holds back only its own subscription, never the graph. A subscriber the
//! bus drops as lagging gets its connection aborted, not cleanly ended, so both SDKs
//! treat it as a network error and reconnect with `Last-Event-ID`.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use futures::{Stream, StreamExt};
use service_engine::bus::{Delivery, Frame, Subscription};

/// Idle time after which a heartbeat comment is written.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(5);

/// The heartbeat comment.
pub(crate) const HEARTBEAT_COMMENT: &[u8] = b": heartbeat\r\n\r\n";

/// The last frame of a stream whose bus went away: an error without an id, so the
/// client's `Last-Event-ID` stays that of the last frame it got.
const UNAVAILABLE_FRAME: &[u8] = b"event: error\r\ndata: {\"error\":\"StreamUnavailable\",\"name\":\"StreamUnavailable\",\"message\":\"The run's stream cannot be read now (the stream bus is unavailable); the run goes on. Reconnect with Last-Event-ID to resume.\"}\r\n\r\n";

/// Which frames a join passes on: empty means every frame; otherwise a frame passes
/// when its name is listed, when its mode (the part before the first `|`) is listed,
/// or when a messages mode is listed and the name starts with `messages`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ModeFilter {
    modes: Vec<String>,
}

impl ModeFilter {
    pub(crate) fn new(modes: Vec<String>) -> Self {
        Self { modes }
    }

    fn passes(&self, event: &str) -> bool {
        if self.modes.is_empty() {
            return true;
        }
        let mode = event.split('|').next().unwrap_or(event);
        self.modes.iter().any(|wanted| {
            wanted == event
                || wanted == mode
                || ((wanted == "messages" || wanted == "messages-tuple")
                    && event.starts_with("messages"))
        })
    }
}

/// Runs a closure when dropped: how a closed connection cancels its run.
pub(crate) struct OnDrop(Option<Box<dyn FnOnce() + Send>>);

impl OnDrop {
    pub(crate) fn new(action: impl FnOnce() + Send + 'static) -> Self {
        Self(Some(Box::new(action)))
    }

    /// Drops `guard` without running its action (the run it would cancel has ended).
    pub(crate) fn disarm(guard: Option<Self>) {
        if let Some(mut guard) = guard {
            guard.0 = None;
        }
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(action) = self.0.take() {
            action();
        }
    }
}

/// Encodes one frame.
pub(crate) fn encode_frame(frame: &Frame, with_id: bool) -> Bytes {
    encode(
        &frame.event,
        &frame.data,
        with_id.then(|| frame.id.to_string()),
    )
}

/// Encodes an event from its parts.
pub(crate) fn encode(event: &str, data: &[u8], id: Option<String>) -> Bytes {
    let mut out = BytesMut::with_capacity(event.len() + data.len() + 48);
    out.put_slice(b"event: ");
    out.put_slice(event.as_bytes());
    out.put_slice(b"\r\ndata: ");
    out.put_slice(data);
    out.put_slice(b"\r\n");
    if let Some(id) = id {
        out.put_slice(b"id: ");
        out.put_slice(id.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
    out.freeze()
}

/// What an SSE body writes besides the subscription's frames.
pub(crate) struct SseBody {
    /// Frames written before the subscription's (e.g. a join error frame).
    pub(crate) prelude: Vec<Bytes>,
    /// The frames to write; `None` writes only the prelude.
    pub(crate) subscription: Option<Subscription>,
    /// Write `id:` lines.
    pub(crate) with_ids: bool,
    /// Which frames pass.
    pub(crate) filter: ModeFilter,
    /// Run when the connection goes away (cancel on disconnect).
    pub(crate) on_drop: Option<OnDrop>,
}

/// Builds the body stream of an SSE response.
pub(crate) fn sse_stream(
    body: SseBody,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    struct State {
        subscription: Option<Subscription>,
        with_ids: bool,
        filter: ModeFilter,
        _on_drop: Option<OnDrop>,
    }
    let prelude = futures::stream::iter(body.prelude.into_iter().map(Ok));
    let state = State {
        subscription: body.subscription,
        with_ids: body.with_ids,
        filter: body.filter,
        _on_drop: body.on_drop,
    };
    let frames = futures::stream::unfold(state, |mut state| async move {
        let subscription = state.subscription.as_mut()?;
        loop {
            tokio::select! {
                next = subscription.next() => match next {
                    Some(Delivery::Frame(frame)) => {
                        if frame.is_internal() || !state.filter.passes(&frame.event) {
                            continue;
                        }
                        let bytes = encode_frame(&frame, state.with_ids);
                        return Some((Ok(bytes), state));
                    }
                    Some(Delivery::Lagged) => {
                        state.subscription = None;
                        let error = std::io::Error::other("subscriber fell behind the stream bus");
                        return Some((Err(error), state));
                    }
                    Some(Delivery::Unavailable) => {
                        state.subscription = None;
                        return Some((Ok(Bytes::from_static(UNAVAILABLE_FRAME)), state));
                    }
                    None => return None,
                },
                () = tokio::time::sleep(HEARTBEAT) => {
                    return Some((Ok(Bytes::from_static(HEARTBEAT_COMMENT)), state));
                }
            }
        }
    });
    prelude.chain(frames)
}

/// An SSE response with the headers both SDKs expect, plus `extra` (Location,
/// Content-Location).
pub(crate) fn sse_response(body: SseBody, extra: HeaderMap) -> Response {
    let mut response = event_stream_response(sse_stream(body));
    response.headers_mut().extend(extra);
    response
}

/// An SSE response writing `stream`'s chunks (frames and heartbeats), with the headers
/// both SDKs expect.
pub(crate) fn event_stream_response<S>(stream: S) -> Response
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    let mut response = Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// How long a wait holds its answer back for the result: a run that ends within it is
/// answered in one piece (one write, with a Content-Length) instead of headers first
/// and a chunked body after; a longer one gets its headers then and heartbeats until
/// the result.
const QUICK_RESULT: Duration = Duration::from_millis(100);

/// A JSON answer that may take long: the result when it comes within
/// [`QUICK_RESULT`], otherwise a streamed body with a newline every [`HEARTBEAT`]
/// (JSON ignores the whitespace) so proxies keep the connection, then the result.
/// `on_drop` runs if the client goes away first.
pub(crate) async fn waiting_json_response<F>(
    result: F,
    extra: HeaderMap,
    on_drop: Option<OnDrop>,
) -> Response
where
    F: std::future::Future<Output = Bytes> + Send + 'static,
{
    let mut result = Box::pin(result);
    let mut response = match tokio::time::timeout(QUICK_RESULT, &mut result).await {
        Ok(bytes) => {
            OnDrop::disarm(on_drop);
            Body::from(bytes).into_response()
        }
        Err(_) => {
            let stream =
                futures::stream::unfold((Some(result), on_drop), |(pending, on_drop)| async move {
                    let mut pending = pending?;
                    tokio::select! {
                        bytes = &mut pending => {
                            OnDrop::disarm(on_drop);
                            Some((Ok::<_, std::io::Error>(bytes), (None, None)))
                        }
                        () = tokio::time::sleep(HEARTBEAT) => {
                            Some((Ok(Bytes::from_static(b"\n")), (Some(pending), on_drop)))
                        }
                    }
                });
            Body::from_stream(stream).into_response()
        }
    };
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.headers_mut().extend(extra);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use service_engine::bus::EventId;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn frame(seq: u64, event: &str) -> Delivery {
        Delivery::Frame(Frame {
            id: EventId { millis: 1, seq },
            event: event.to_owned(),
            data: Bytes::from_static(b"{}"),
        })
    }

    fn body(subscription: Subscription) -> SseBody {
        SseBody {
            prelude: Vec::new(),
            subscription: Some(subscription),
            with_ids: true,
            filter: ModeFilter::default(),
            on_drop: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_stream_sends_a_heartbeat_comment_every_five_seconds() {
        let mut stream = Box::pin(sse_stream(body(futures::stream::pending().boxed())));
        let started = tokio::time::Instant::now();
        let chunk = stream.next().await.unwrap().unwrap();
        assert_eq!(&chunk[..], b": heartbeat\r\n\r\n");
        assert_eq!(started.elapsed(), HEARTBEAT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_body_writes_a_newline_every_five_seconds_then_the_json() {
        use http_body_util::BodyExt;
        let result = async {
            tokio::time::sleep(HEARTBEAT * 2 + HEARTBEAT / 2).await;
            Bytes::from_static(b"{\"done\":true}")
        };
        let response = waiting_json_response(result, HeaderMap::new(), None).await;
        assert_eq!(
            axum::body::HttpBody::size_hint(response.body()).exact(),
            None
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"\n\n{\"done\":true}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_result_is_one_plain_body_and_cancels_nothing() {
        use http_body_util::BodyExt;
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = cancelled.clone();
        let on_drop = OnDrop::new(move || flag.store(true, Ordering::SeqCst));
        let result = async {
            tokio::time::sleep(QUICK_RESULT / 2).await;
            Bytes::from_static(b"{\"done\":true}")
        };
        let response = waiting_json_response(result, HeaderMap::new(), Some(on_drop)).await;
        // Hyper writes a Content-Length from an exact size.
        assert_eq!(
            axum::body::HttpBody::size_hint(response.body()).exact(),
            Some(13)
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"{\"done\":true}");
        assert!(!cancelled.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_gone_before_the_result_runs_the_disconnect_action() {
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = cancelled.clone();
        let on_drop = OnDrop::new(move || flag.store(true, Ordering::SeqCst));
        let response = waiting_json_response(
            futures::future::pending::<Bytes>(),
            HeaderMap::new(),
            Some(on_drop),
        );
        // Hyper drops the answer future when the connection closes mid-wait.
        let early = tokio::time::timeout(QUICK_RESULT / 2, response).await;
        assert!(early.is_err());
        assert!(cancelled.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_lagging_subscriber_gets_its_connection_aborted() {
        let deliveries = futures::stream::iter(vec![frame(0, "values"), Delivery::Lagged]).boxed();
        let items: Vec<_> = sse_stream(body(deliveries)).collect().await;
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok());
        assert!(
            items[1].is_err(),
            "an error item makes hyper abort instead of ending cleanly"
        );
    }

    #[tokio::test]
    async fn internal_records_are_never_written() {
        let deliveries =
            futures::stream::iter(vec![frame(0, "values"), frame(1, "__outcome__")]).boxed();
        let items: Vec<_> = sse_stream(body(deliveries)).collect().await;
        assert_eq!(items.len(), 1);
        assert!(items[0].as_ref().unwrap().starts_with(b"event: values\r\n"));
    }

    #[tokio::test]
    async fn closing_the_connection_runs_the_disconnect_action() {
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = cancelled.clone();
        let mut sse = body(futures::stream::pending().boxed());
        sse.on_drop = Some(OnDrop::new(move || flag.store(true, Ordering::SeqCst)));
        let stream = sse_stream(sse);
        drop(stream);
        assert!(cancelled.load(Ordering::SeqCst));
    }

    #[test]
    fn frames_use_crlf_and_one_data_line() {
        let bytes = encode("values", br#"{"a":1}"#, Some("17-0".into()));
        assert_eq!(
            &bytes[..],
            b"event: values\r\ndata: {\"a\":1}\r\nid: 17-0\r\n\r\n"
        );
        let bytes = encode("metadata", b"{}", None);
        assert_eq!(&bytes[..], b"event: metadata\r\ndata: {}\r\n\r\n");
    }

    #[test]
    fn join_filter_follows_the_reference_rules() {
        let all = ModeFilter::default();
        assert!(all.passes("metadata"));
        let values = ModeFilter::new(vec!["values".into()]);
        assert!(values.passes("values"));
        assert!(values.passes("values|child:1"));
        assert!(!values.passes("metadata"));
        assert!(!values.passes("updates"));
        let messages = ModeFilter::new(vec!["messages-tuple".into()]);
        assert!(messages.passes("messages"));
        assert!(messages.passes("messages/partial"));
    }
}
