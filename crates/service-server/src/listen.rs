//! The HTTP/1 connections: hyper's server driven directly (not `axum::serve`) for
//! the caps a client could otherwise hold the server with: a request head must
//! arrive within `header_read_timeout` (slow-loris; also how long an idle kept-alive
//! connection stays open), a head is never buffered past a hard size, and a response
//! write that makes no progress for `send_timeout` (a client that stopped reading)
//! closes the connection. Each request carries its peer address for the per-address
//! stream cap.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// How connections are held to account (SERVICE_HEADER_READ_TIMEOUT_MS,
/// SERVICE_SEND_TIMEOUT_MS, and the head caps the router checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Connections {
    /// The time a request head may take to arrive; `None` is no limit.
    pub header_read_timeout: Option<Duration>,
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
    peer: SocketAddr,
    app: Router,
    stopping: CancellationToken,
) {
    let state = Arc::clone(&io.state);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(request.map(Body::new))
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
