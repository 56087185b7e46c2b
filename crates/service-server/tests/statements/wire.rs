//! A counting proxy between the server and PostgreSQL: it forwards every byte
//! unchanged and reads the protocol messages as they pass, so a test learns what the
//! server asked of the database (statements, round trips, transactions) without any
//! hook in the driver.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server asked of the database over some span, all connections together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Statements executed: extended-protocol `Execute`s and simple `Query`s.
    pub(crate) statements: u64,
    /// Exchanges the client waited on (one `ReadyForQuery` each), leaving out the
    /// prepares that only fill a connection's statement cache.
    pub(crate) round_trips: u64,
    /// Transactions ended (a `ReadyForQuery` back to idle after a statement ran).
    pub(crate) transactions: u64,
    /// Statement-cache fills: a named statement prepared on a connection for the
    /// first time. Not part of a run's steady cost.
    pub(crate) cache_fills: u64,
    /// Connections opened.
    pub(crate) connections: u64,
    /// Exchanges sent and not answered yet.
    pub(crate) in_flight: u64,
    /// The text of each statement executed, in order, prefixed by the connection's
    /// `application_name`.
    pub(crate) executed: Vec<String>,
}

impl Counts {
    /// What happened after `before` was taken.
    pub(crate) fn since(&self, before: &Counts) -> Counts {
        Counts {
            statements: self.statements - before.statements,
            round_trips: self.round_trips - before.round_trips,
            transactions: self.transactions - before.transactions,
            cache_fills: self.cache_fills - before.cache_fills,
            connections: self.connections - before.connections,
            in_flight: self.in_flight,
            executed: self.executed[before.executed.len()..].to_vec(),
        }
    }
}

/// The proxy: listens on a loopback port and forwards each connection to `upstream`.
pub(crate) struct Proxy {
    pub(crate) port: u16,
    counts: Arc<Mutex<Counts>>,
}

impl Proxy {
    /// Starts listening; connections are served on the current tokio runtime.
    pub(crate) async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Mutex::new(Counts::default()));
        let shared = Arc::clone(&counts);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(&upstream).await.unwrap();
                tokio::spawn(relay(client, server, Arc::clone(&shared)));
            }
        });
        Self { port, counts }
    }

    /// Everything counted so far.
    pub(crate) fn counts(&self) -> Counts {
        self.counts.lock().unwrap().clone()
    }
}

/// One connection's protocol state, shared by its two directions.
#[derive(Default)]
struct Session {
    application: String,
    /// Prepared statements by name, and the text bound last (what `Execute` runs).
    prepared: HashMap<String, String>,
    bound: String,
    /// Since the last `Sync`: whether a statement was executed, and whether a named
    /// statement was prepared.
    cycle_executed: bool,
    cycle_prepared: bool,
    /// One entry per exchange sent and not yet answered, in order: (executed,
    /// only a cache fill).
    pending: VecDeque<(bool, bool)>,
    started: bool,
}

async fn relay(client: TcpStream, server: TcpStream, counts: Arc<Mutex<Counts>>) {
    let session = Arc::new(Mutex::new(Session::default()));
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = {
        let session = Arc::clone(&session);
        let counts = Arc::clone(&counts);
        async move {
            let mut frames = Frames::untyped_first();
            let mut buffer = vec![0; 64 * 1024];
            loop {
                let read = client_read.read(&mut buffer).await.unwrap_or(0);
                if read == 0 {
                    break;
                }
                // Read before forwarding, so an exchange is queued before its answer.
                for (kind, body) in frames.feed(&buffer[..read]) {
                    frontend(kind, &body, &session, &counts);
                }
                if server_write.write_all(&buffer[..read]).await.is_err() {
                    break;
                }
            }
            let _ = server_write.shutdown().await;
        }
    };
    let downstream = async move {
        let mut frames = Frames::typed();
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let read = server_read.read(&mut buffer).await.unwrap_or(0);
            if read == 0 {
                break;
            }
            for (kind, body) in frames.feed(&buffer[..read]) {
                if kind == b'Z' {
                    ready(body.first() == Some(&b'I'), &session, &counts);
                }
            }
            if client_write.write_all(&buffer[..read]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// A message from the client.
fn frontend(kind: u8, body: &[u8], session: &Mutex<Session>, counts: &Mutex<Counts>) {
    let mut session = session.lock().unwrap();
    match kind {
        // The startup message (no type byte): protocol version, then name/value pairs.
        0 => {
            let mut fields = body.get(4..).unwrap_or_default().split(|byte| *byte == 0);
            while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
                if name == b"application_name" {
                    session.application = String::from_utf8_lossy(value).into_owned();
                }
            }
            counts.lock().unwrap().connections += 1;
        }
        b'P' => {
            let mut fields = body.splitn(3, |byte| *byte == 0);
            let name = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
            let text = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
            if !name.is_empty() {
                session.cycle_prepared = true;
            }
            session.prepared.insert(name, text);
        }
        b'B' => {
            let mut fields = body.splitn(3, |byte| *byte == 0);
            let _portal = fields.next();
            let name = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
            session.bound = session.prepared.get(&name).cloned().unwrap_or_default();
        }
        b'E' => {
            session.cycle_executed = true;
            let line = format!("{}: {}", session.application, session.bound);
            let mut counts = counts.lock().unwrap();
            counts.statements += 1;
            counts.executed.push(line);
        }
        b'Q' => {
            let text = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(body));
            let line = format!("{}: {text}", session.application);
            let mut counts = counts.lock().unwrap();
            counts.statements += 1;
            counts.in_flight += 1;
            counts.executed.push(line);
            drop(counts);
            session.pending.push_back((true, false));
        }
        b'S' => {
            let exchange = (session.cycle_executed, session.cycle_prepared);
            session
                .pending
                .push_back((exchange.0, !exchange.0 && exchange.1));
            session.cycle_executed = false;
            session.cycle_prepared = false;
        }
        _ => {}
    }
}

/// A `ReadyForQuery` from the server: one exchange answered, the connection now `idle`
/// (outside a transaction) or not.
fn ready(idle: bool, session: &Mutex<Session>, counts: &Mutex<Counts>) {
    let mut session = session.lock().unwrap();
    if !session.started {
        // The end of the connection's startup.
        session.started = true;
        return;
    }
    let (executed, cache_fill) = session.pending.pop_front().unwrap_or((false, false));
    drop(session);
    let mut counts = counts.lock().unwrap();
    counts.in_flight = counts.in_flight.saturating_sub(1);
    if cache_fill {
        counts.cache_fills += 1;
    } else {
        counts.round_trips += 1;
    }
    if executed && idle {
        counts.transactions += 1;
    }
}

/// Splits a byte stream into protocol messages: (type, body).
struct Frames {
    buffer: Vec<u8>,
    untyped_first: bool,
}

impl Frames {
    fn untyped_first() -> Self {
        Self {
            buffer: Vec::new(),
            untyped_first: true,
        }
    }

    fn typed() -> Self {
        Self {
            buffer: Vec::new(),
            untyped_first: false,
        }
    }

    fn feed(&mut self, bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        self.buffer.extend_from_slice(bytes);
        let mut messages = Vec::new();
        loop {
            let header = if self.untyped_first { 0 } else { 1 };
            if self.buffer.len() < header + 4 {
                break;
            }
            let length = u32::from_be_bytes(self.buffer[header..header + 4].try_into().unwrap());
            let total = header + length as usize;
            if self.buffer.len() < total {
                break;
            }
            let kind = if self.untyped_first {
                0
            } else {
                self.buffer[0]
            };
            messages.push((kind, self.buffer[header + 4..total].to_vec()));
            self.buffer.drain(..total);
            self.untyped_first = false;
        }
        messages
    }
}
