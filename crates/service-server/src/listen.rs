//! The HTTP/1 connections: hyper's server driven directly (not `axum::serve`) for
//! the caps a client could otherwise hold the server with: a request head must
//! arrive within `header_read_timeout` (slow-loris; also how long an idle kept-alive
//! connection stays open), its body within `body_read_timeout` of the head (a client
//! trickling a body is answered 408), a head is never buffered past a hard size, and
//! a response write that makes no progress for `send_timeout` (a client that stopped
//! reading) closes the connection. Each request carries its peer address for the
//! per-address stream cap.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// How connections are held to account (SERVICE_HEADER_READ_TIMEOUT_MS,
/// SERVICE_BODY_READ_TIMEOUT_MS, SERVICE_SEND_TIMEOUT_MS, and the head caps the
/// router checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Connections {
    /// The time a request head may take to arrive; `None` is no limit.
    pub header_read_timeout: Option<Duration>,
    /// The time a request body may take to arrive after its head; `None` is no limit.
    pub body_read_timeout: Option<Duration>,
    /// The time a response write may make no progress; `None` is no limit.
    pub send_timeout: Option<Duration>,
    /// The router's caps (414/431 with a JSON message); the connection refuses a
    /// head twice their size with hyper's bare 431, so none is buffered unbounded.
    pub max_uri_bytes: usize,
    pub max_headers: usize,
    pub max_header_bytes: usize,
}

/// hyper's smallest read buffer.
const MIN_BUFFER: usize = 8192;

impl Connections {
    fn builder(&self) -> hyper::server::conn::http1::Builder {
        let mut http = hyper::server::conn::http1::Builder::new();
        let hard_head = 2 * (self.max_uri_bytes + self.max_header_bytes) + 64;
        http.timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            .max_headers(2 * self.max_headers)
            .max_header_size(hard_head)
            .max_buf_size((hard_head + MIN_BUFFER).max(400 * 1024));
        http
    }
}

/// Serves `app` on `listener` until `stopping`, then waits for the open connections,
/// each told to finish its request in flight and close.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    connections: Connections,
    stopping: CancellationToken,
) {
    let http = connections.builder();
    let open = TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(&error).await;
                    continue;
                }
            },
            () = stopping.cancelled() => break,
        };
        // Streamed answers (wait bodies, SSE) are written in several small pieces;
        // without TCP_NODELAY, Nagle's algorithm holds each back until the client's
        // delayed ACK.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY");
        }
        open.spawn(connection(
            http.clone(),
            Guarded::new(tcp, connections.send_timeout),
            connections.body_read_timeout,
            peer,
            app.clone(),
            stopping.clone(),
        ));
    }
    open.close();
    open.wait().await;
}

/// One connection, to its end.
async fn connection(
    http: hyper::server::conn::http1::Builder,
    io: Guarded,
    body_read_timeout: Option<Duration>,
    peer: SocketAddr,
    app: Router,
    stopping: CancellationToken,
) {
    let state = Arc::clone(&io.state);
    let requests = Arc::clone(&state);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let deadline = body_read_timeout.map(|timeout| Instant::now() + timeout);
        let state = Arc::clone(&requests);
        let request = request.map(|body| {
            Body::new(TimedBody {
                body,
                deadline,
                timer: None,
                state: Arc::clone(&state),
            })
        });
        let answer = app.clone().oneshot(request);
        async move {
            let Ok(response) = answer.await;
            // HTTP/1 serves one request at a time: the flag is this request's.
            let response = match state.body_timed_out.swap(false, Ordering::Relaxed) {
                true => body_timeout(),
                false => response,
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let serving = http
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(serving);
    let served = tokio::select! {
        served = serving.as_mut() => served,
        () = stopping.cancelled() => {
            serving.as_mut().graceful_shutdown();
            serving.as_mut().await
        }
    };
    if let Err(error) = served {
        // A client that sent part of a head and stalled hears why it is cut off; an
        // idle kept-alive connection closes silently (a 408 there could be read as
        // the answer to the request a client sends just then).
        if error.is_timeout() && state.head_started.load(Ordering::Relaxed) {
            state.farewell.store(true, Ordering::Relaxed);
        }
        tracing::debug!(%error, %peer, "connection ended");
    }
    // Dropping the connection drops the socket, which sends the farewell first.
}

/// Accept errors are the listener's (out of file descriptors, mostly), not one
/// client's: pausing lets connections close before the next try.
async fn accept_failed(error: &io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    ) {
        return;
    }
    tracing::error!(%error, "cannot accept a connection");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// What a connection's socket and its driver share.
#[derive(Debug, Default)]
struct Shared {
    /// Bytes of a request arrived since the last answer was written.
    head_started: AtomicBool,
    /// Send the 408 when the socket is dropped.
    farewell: AtomicBool,
    /// The request's body did not arrive within the body timeout.
    body_timed_out: AtomicBool,
}

/// A request body that fails once its deadline passes with the body incomplete. The
/// timer is armed only when a read has to wait: a body that came with its head
/// (nearly every one) costs no timer.
struct TimedBody {
    body: Incoming,
    deadline: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
    state: Arc<Shared>,
}

/// The error a body that took too long ends with (the handler's answer is replaced
/// by the 408).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within SERVICE_BODY_READ_TIMEOUT_MS")]
struct BodyTimedOut;

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|frame| frame.map_err(Into::into))),
            Poll::Pending => {
                let Some(deadline) = this.deadline else {
                    return Poll::Pending;
                };
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.state.body_timed_out.store(true, Ordering::Relaxed);
                        Poll::Ready(Some(Err(BodyTimedOut.into())))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The 408 for a body that did not arrive in time; the connection closes (the rest
/// of the body is not read).
fn body_timeout() -> axum::response::Response {
    let status = StatusCode::REQUEST_TIMEOUT;
    let body = service_axum::error_body(
        status,
        "The request body did not arrive within SERVICE_BODY_READ_TIMEOUT_MS",
    );
    let mut response = (status, axum::Json(body)).into_response();
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// The socket with the send timeout, and the 408 written as it closes.
struct Guarded {
    tcp: TcpStream,
    send_timeout: Option<Duration>,
    /// Running while a write is pending.
    stalled: Option<Pin<Box<Sleep>>>,
    state: Arc<Shared>,
}

impl Guarded {
    fn new(tcp: TcpStream, send_timeout: Option<Duration>) -> Self {
        Self {
            tcp,
            send_timeout,
            stalled: None,
            state: Arc::default(),
        }
    }

    /// A write made progress (or failed): the stall clock stops.
    fn wrote<T>(&mut self, written: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if written.is_ready() {
            self.stalled = None;
            self.state.head_started.store(false, Ordering::Relaxed);
        }
        written
    }

    /// A write is pending: an error once it has been for the send timeout.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let Some(limit) = self.send_timeout else {
            return Poll::Pending;
        };
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for SERVICE_SEND_TIMEOUT_MS",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if self.state.farewell.load(Ordering::Relaxed) {
            // The head never completed, so nothing else is being written: the send
            // buffer is empty and this small write goes out whole or not at all.
            let _ = self.tcp.try_write(&request_timeout());
        }
    }
}

/// The 408 for a head that did not arrive in time.
fn request_timeout() -> Vec<u8> {
    let status = StatusCode::REQUEST_TIMEOUT;
    let body = service_axum::error_body(
        status,
        "The request head did not arrive within SERVICE_HEADER_READ_TIMEOUT_MS",
    )
    .to_string();
    format!(
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.state.head_started.store(true, Ordering::Relaxed);
        }
        read
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.tcp).poll_write(cx, buf) {
            Poll::Pending => this.stall(cx),
            written => this.wrote(written),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs) {
            Poll::Pending => this.stall(cx),
            written => this.wrote(written),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
