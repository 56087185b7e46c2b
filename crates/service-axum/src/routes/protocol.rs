//! Protocol v2 routes (the Python SDK's `client.threads.stream()`): commands on a
//! thread, and the thread's events over SSE or a WebSocket that also takes commands.
//! Served with the run routes, and left out with them.

use std::collections::VecDeque;

use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use service_engine::Caller;
use service_engine::auth::{Action, Resource};
use service_engine::protocol::{
    EventFilter, Lagged, ProtocolFailure, ThreadEvents, command_params,
};
use service_engine::{Engine, EngineError, ErrorKind};
use service_types::{
    AgentTreeParams, EventStreamRequest, InputRespondParams, ProtocolCommand, ProtocolErrorCode,
    ProtocolEvent, ProtocolResponse, RunStartParams, UnsubscribeParams,
};
use uuid::Uuid;

use crate::ClientLimits;
use crate::auth::CallerOf;
use crate::error::{ApiError, ApiResult, status_of};
use crate::extract::{BodyLimit, Path, read_body, uuid};
use crate::json::Json;
use crate::metrics::{OpenSocket, WsMetrics};
use crate::routes::Table;
use crate::sse::{HEARTBEAT, HEARTBEAT_COMMENT, encode, event_stream_response};
use crate::streams::StreamSlot;

pub(crate) fn routes() -> Table {
    const T: Resource = Resource::Threads;
    Table::new()
        .post(
            "/threads/{thread_id}/commands",
            (T, Action::CreateRun),
            command,
        )
        .post(EVENTS_ROUTE, (T, Action::Read), events)
        .get(EVENTS_ROUTE, (T, Action::Read), websocket)
}

/// The thread's event stream: server-sent events on `POST`, the WebSocket on `GET`.
pub(crate) const EVENTS_ROUTE: &str = "/threads/{thread_id}/stream/events";

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError(EngineError::bad_request(message))
}

/// A request body as JSON (an empty one as `{}`); not JSON is a 400.
async fn json_body(request: Request) -> ApiResult<Value> {
    let limit = BodyLimit::of(request.extensions());
    let (parts, body) = request.into_parts();
    let bytes = read_body(&parts.headers, body, limit).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes).map_err(|_| bad_request("Invalid JSON body"))
}

/// The caller as a command sees it: the caller of the route, and whether commands
/// that create runs must first be authorized as run creations (on a WebSocket, a read
/// route).
struct CommandCaller {
    caller: Caller,
    ask_to_create: bool,
}

/// `POST /threads/{id}/commands`: one command, answered with a success or error
/// envelope (HTTP 200); a malformed envelope is a 400 with an error envelope.
async fn command(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    request: Request,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &id)?;
    let body = json_body(request).await?;
    let command = match ProtocolCommand::from_value(body) {
        Ok(command) => command,
        Err(answer) => {
            let answer = Json(answer.with_detail());
            return Ok((axum::http::StatusCode::BAD_REQUEST, answer).into_response());
        }
    };
    let caller = CommandCaller {
        caller,
        ask_to_create: false,
    };
    let answer = match command.method.as_str() {
        "subscription.subscribe" | "subscription.unsubscribe" | "subscription.reconnect" => {
            ProtocolResponse::error(
                Some(command.id),
                ProtocolErrorCode::NotSupported,
                format!(
                    "{} is served on the WebSocket at /threads/{{thread_id}}/stream/events",
                    command.method
                ),
            )
        }
        _ => dispatch(&engine, &caller, thread_id, &command).await,
    };
    Ok(Json(answer).into_response())
}

/// The commands both transports serve.
async fn dispatch(
    engine: &Engine,
    caller: &CommandCaller,
    thread_id: Uuid,
    command: &ProtocolCommand,
) -> ProtocolResponse {
    let id = command.id;
    let outcome = match command.method.as_str() {
        "run.start" => run_start(engine, caller, thread_id, command).await,
        "input.respond" => input_respond(engine, caller, thread_id, command).await,
        "agent.getTree" => agent_tree(engine, caller, thread_id, command).await,
        method => Err(ProtocolFailure::new(
            ProtocolErrorCode::UnknownCommand,
            format!("Unknown protocol command: {method}"),
        )),
    };
    match outcome {
        Ok(result) => ProtocolResponse::success(id, result),
        Err(failure) => ProtocolResponse::error(Some(id), failure.code, failure.message),
    }
}

impl CommandCaller {
    /// The caller a run is created as.
    async fn creating(&self, thread_id: Uuid) -> Result<Caller, ProtocolFailure> {
        if !self.ask_to_create {
            return Ok(self.caller.clone());
        }
        let path = json!({ "thread_id": thread_id.to_string() });
        Ok(self
            .caller
            .acting_as(Resource::Threads, Action::CreateRun, path)
            .await?)
    }
}

async fn run_start(
    engine: &Engine,
    caller: &CommandCaller,
    thread_id: Uuid,
    command: &ProtocolCommand,
) -> Result<Value, ProtocolFailure> {
    let params: RunStartParams = command_params(command)?;
    if params.assistant_id.is_empty() {
        return Err(ProtocolFailure::new(
            ProtocolErrorCode::InvalidArgument,
            "run.start requires an assistant_id.",
        ));
    }
    let creator = caller.creating(thread_id).await?;
    let protocol = engine.as_caller(&creator).protocol();
    let run = protocol.start_run(thread_id, params).await?;
    Ok(json!({ "run_id": run.run_id }))
}

async fn input_respond(
    engine: &Engine,
    caller: &CommandCaller,
    thread_id: Uuid,
    command: &ProtocolCommand,
) -> Result<Value, ProtocolFailure> {
    let params: InputRespondParams = command_params(command)?;
    let creator = caller.creating(thread_id).await?;
    let protocol = engine.as_caller(&creator).protocol();
    protocol.respond(thread_id, params).await?;
    Ok(json!({}))
}

async fn agent_tree(
    engine: &Engine,
    caller: &CommandCaller,
    thread_id: Uuid,
    command: &ProtocolCommand,
) -> Result<Value, ProtocolFailure> {
    let params: AgentTreeParams = command_params(command)?;
    let run_id = match params.run_id.as_deref() {
        Some(text) => Some(Uuid::parse_str(text).map_err(|_| {
            ProtocolFailure::new(
                ProtocolErrorCode::InvalidArgument,
                format!("Invalid run_id: {text}"),
            )
        })?),
        None => None,
    };
    let protocol = engine.as_caller(&caller.caller).protocol();
    protocol.agent_tree(thread_id, run_id).await
}

/// The filter of a stream request, or the 400 saying what is wrong with it.
fn stream_filter(body: Value) -> ApiResult<(EventFilter, u64)> {
    let request: EventStreamRequest = serde_json::from_value(body)
        .map_err(|error| bad_request(format!("Invalid event stream request: {error}")))?;
    let filter = EventFilter::new(&request).map_err(bad_request)?;
    Ok((filter, request.since.unwrap_or(0)))
}

fn event_json(event: &ProtocolEvent) -> Vec<u8> {
    // Events are built from JSON values: they always serialize.
    serde_json::to_vec(event).unwrap_or_default()
}

/// `POST /threads/{id}/stream/events`: the thread's events on the requested channels,
/// those after `since`, then live ones; never ends while the thread lives.
async fn events(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    slot: StreamSlot,
    request: Request,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &id)?;
    let (filter, since) = stream_filter(json_body(request).await?)?;
    let events = engine
        .as_caller(&caller)
        .protocol()
        .events(thread_id)
        .await?;
    let body = futures::stream::unfold(Some(events), move |events| {
        let filter = filter.clone();
        async move {
            let mut events = events?;
            loop {
                tokio::select! {
                    next = events.next() => match next? {
                        Ok(event) if event.seq > since && filter.matches(&event) => {
                            let frame = encode(&event.method, &event_json(&event), Some(event.seq.to_string()));
                            return Some((Ok(frame), Some(events)));
                        }
                        Ok(_) => {}
                        // Aborted, not ended: the client reconnects with `since`.
                        Err(Lagged) => {
                            let error = std::io::Error::other("subscriber fell behind the stream bus");
                            return Some((Err(error), None));
                        }
                    },
                    () = tokio::time::sleep(HEARTBEAT) => {
                        return Some((Ok(Bytes::from_static(HEARTBEAT_COMMENT)), Some(events)));
                    }
                }
            }
        }
    });
    Ok(slot.held_by(event_stream_response(body)))
}

/// `GET /threads/{id}/stream/events` upgraded to a WebSocket: commands in, answers
/// and the events of its subscriptions out. Access to the thread is answered after
/// the upgrade, as a close code (4000 + the HTTP status), since browsers report a
/// refused upgrade only as 1006; a thread that does not exist yet may be one the
/// client made up, so the socket then waits for the `run.start` that creates it.
async fn websocket(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    (Extension(limits), Extension(BodyLimit(body_limit)), metrics): (
        Extension<ClientLimits>,
        Extension<BodyLimit>,
        Option<Extension<WsMetrics>>,
    ),
    slot: StreamSlot,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let upgrade = upgrade.map_err(|rejection| {
        bad_request(format!(
            "This route is a WebSocket ({}); POST it for server-sent events",
            rejection.body_text()
        ))
    })?;
    // A message no larger than a request body: the socket is no way around the limit.
    let upgrade = upgrade
        .max_message_size(body_limit)
        .max_frame_size(body_limit);
    let trace = service_engine::trace_context::current();
    Ok(upgrade.on_upgrade(move |mut socket| async move {
        // The principal's stream slot is held for as long as the socket is open.
        let _slot = slot;
        let metrics = metrics.map(|Extension(metrics)| metrics.opened());
        let thread_id = match uuid("thread", &id) {
            Ok(thread_id) => thread_id,
            Err(ApiError(error)) => return refuse(&mut socket, &error).await,
        };
        let events = match engine.as_caller(&caller).protocol().events(thread_id).await {
            Ok(events) => Some(events),
            Err(error) if error.kind == ErrorKind::NotFound => None,
            Err(error) => return refuse(&mut socket, &error).await,
        };
        let session = Session {
            engine,
            caller: CommandCaller {
                caller,
                ask_to_create: true,
            },
            thread_id,
            max_subscriptions: limits.max_ws_subscriptions,
            subscriptions: Vec::new(),
            seen: Seen::new(limits.ws_replay_events, limits.ws_replay_bytes),
            metrics,
            trace,
        };
        session.run(socket, events).await;
    }))
}

/// Closes a socket whose thread the caller may not stream: 4000 + the status of a
/// 4xx; anything else is the stream failing (an error frame, then 1011).
async fn refuse(socket: &mut WebSocket, error: &EngineError) {
    let status = status_of(error.kind);
    if status.is_client_error() {
        let code = 4000 + status.as_u16();
        let _ = socket.send(close(code, error.message.clone())).await;
        return;
    }
    tracing::error!(error = %error.chain(), "thread stream access check failed");
    let frame = ProtocolResponse::error(
        None,
        ProtocolErrorCode::UnknownError,
        "Thread event stream failed.",
    );
    let _ = socket.send(Message::text(json_text(&frame))).await;
    let _ = socket
        .send(close(close_code::ERROR, "thread stream ended".into()))
        .await;
}

/// One WebSocket's state.
struct Session {
    engine: Engine,
    caller: CommandCaller,
    thread_id: Uuid,
    /// Subscriptions the socket may hold (SERVICE_MAX_WS_SUBSCRIPTIONS).
    max_subscriptions: usize,
    /// Subscription ids and what each takes.
    subscriptions: Vec<(String, EventFilter)>,
    /// The latest events, for subscriptions made after they passed.
    seen: Seen,
    /// Counts the socket while open and the frames it sends (with `/metrics`).
    metrics: Option<OpenSocket>,
    /// The upgrade request's trace context, when traces are exported.
    trace: Option<String>,
}

/// The latest events of a socket, within a count and a byte bound (oldest dropped
/// first): a subscription made later replays only what is still here.
struct Seen {
    /// Events with their size as JSON, oldest first.
    events: VecDeque<(ProtocolEvent, usize)>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
}

impl Seen {
    fn new(max_events: usize, max_bytes: usize) -> Self {
        Self {
            events: VecDeque::new(),
            bytes: 0,
            max_events,
            max_bytes,
        }
    }

    /// Keeps `event` (`size` bytes as JSON), dropping the oldest beyond the bounds;
    /// one larger than the byte bound by itself is not kept.
    fn push(&mut self, event: ProtocolEvent, size: usize) {
        self.events.push_back((event, size));
        self.bytes += size;
        while self.events.len() > self.max_events || self.bytes > self.max_bytes {
            let Some((_, dropped)) = self.events.pop_front() else {
                break;
            };
            self.bytes -= dropped;
        }
    }

    fn iter(&self) -> impl Iterator<Item = &ProtocolEvent> {
        self.events.iter().map(|(event, _)| event)
    }

    /// The oldest `seq` still kept, when events after `since` were dropped already.
    fn oldest_dropped_after(&self, since: u64) -> Option<u64> {
        let oldest = self.events.front()?.0.seq;
        (since.saturating_add(1) < oldest).then_some(oldest)
    }
}

/// The error answer of a reconnect whose `since` is older than the socket keeps.
fn resume_gap(id: i64, since: u64, min_available_seq: u64) -> String {
    let message = format!(
        "resume gap: since={since} is older than min_available_seq={min_available_seq}; \
         read the thread's state, or open the SSE route with since"
    );
    let mut answer = serde_json::to_value(ProtocolResponse::error(
        Some(id),
        ProtocolErrorCode::ResumeGap,
        message,
    ))
    .unwrap_or_default();
    answer["since"] = json!(since);
    answer["min_available_seq"] = json!(min_available_seq);
    answer.to_string()
}

/// The socket's next thread event; never ready while its thread does not exist yet.
async fn next_event(events: &mut Option<ThreadEvents>) -> Option<Result<ProtocolEvent, Lagged>> {
    match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

/// True for a well-formed command other than `run.start` (the one command a socket
/// waiting for its thread to exist may take).
fn is_other_than_run_start(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|value| ProtocolCommand::from_value(value).ok())
        .is_some_and(|command| command.method != "run.start")
}

impl Session {
    fn sent(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.sent();
        }
    }

    /// Serves the socket; `events` is `None` while its thread does not exist yet.
    async fn run(mut self, mut socket: WebSocket, mut events: Option<ThreadEvents>) {
        loop {
            tokio::select! {
                message = socket.recv() => {
                    let text = match message {
                        Some(Ok(Message::Text(text))) => text.to_string(),
                        Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                        Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                    };
                    let awaiting_thread = events.is_none();
                    if awaiting_thread && is_other_than_run_start(&text) {
                        let reason = "Thread not found: start a run on it first".into();
                        let _ = socket.send(close(4404, reason)).await;
                        return;
                    }
                    let (frames, succeeded) = self.answer(&text).await;
                    for frame in frames {
                        if socket.send(Message::text(frame)).await.is_err() {
                            return;
                        }
                        self.sent();
                    }
                    if awaiting_thread && succeeded {
                        let view = self.engine.as_caller(&self.caller.caller);
                        match view.protocol().events(self.thread_id).await {
                            Ok(opened) => events = Some(opened),
                            Err(error) => return refuse(&mut socket, &error).await,
                        }
                    }
                }
                next = next_event(&mut events) => {
                    let event = match next {
                        Some(Ok(event)) => event,
                        Some(Err(Lagged)) => {
                            let error = ProtocolResponse::error(
                                None,
                                ProtocolErrorCode::UnknownError,
                                "The connection fell behind the thread's stream; reconnect with since.",
                            );
                            let _ = socket.send(Message::text(json_text(&error))).await;
                            let _ = socket.send(close(close_code::ERROR, "fell behind".into())).await;
                            return;
                        }
                        None => {
                            let _ = socket.send(close(close_code::AWAY, "thread stream ended".into())).await;
                            return;
                        }
                    };
                    let text = json_text(&event);
                    let size = text.len();
                    let wanted = self.subscriptions.iter().any(|(_, filter)| filter.matches(&event));
                    if wanted {
                        if socket.send(Message::text(text)).await.is_err() {
                            return;
                        }
                        self.sent();
                    }
                    self.seen.push(event, size);
                }
            }
        }
    }

    /// The frames answering one text frame (the answer, then a new subscription's
    /// replayed events), and whether a command both transports serve succeeded.
    async fn answer(&mut self, text: &str) -> (Vec<String>, bool) {
        let value = match serde_json::from_str::<Value>(text) {
            Ok(value) => value,
            Err(_) => {
                let error = ProtocolResponse::error(
                    None,
                    ProtocolErrorCode::InvalidArgument,
                    "Protocol commands must be valid JSON.",
                );
                return (vec![json_text(&error)], false);
            }
        };
        let command = match ProtocolCommand::from_value(value) {
            Ok(command) => command,
            Err(error) => return (vec![json_text(&error)], false),
        };
        match command.method.as_str() {
            "subscription.subscribe" => (self.subscribe(&command, false), false),
            "subscription.reconnect" => (self.subscribe(&command, true), false),
            "subscription.unsubscribe" => (vec![json_text(&self.unsubscribe(&command))], false),
            _ => {
                // The upgrade request's span has ended: each command is a span of its
                // own in the request's trace, so the runs it starts are too.
                let scope = service_engine::trace_context::child_of(
                    self.trace.as_deref(),
                    "protocol.command",
                    service_engine::trace_context::SpanKind::Internal,
                );
                scope.record(|span| span.name = format!("protocol {}", command.method).into());
                let answer = scope
                    .instrument(dispatch(
                        &self.engine,
                        &self.caller,
                        self.thread_id,
                        &command,
                    ))
                    .await;
                (vec![json_text(&answer)], !answer.is_error())
            }
        }
    }

    /// `subscription.subscribe`, or `subscription.reconnect` (a subscription made
    /// again after a dropped socket: `since` is required, a `subscription_id` of the
    /// client's may be kept, and events older than the socket still holds are a
    /// `resume_gap` rather than a silent hole).
    fn subscribe(&mut self, command: &ProtocolCommand, reconnect: bool) -> Vec<String> {
        if self.subscriptions.len() >= self.max_subscriptions {
            let error = ProtocolResponse::error(
                Some(command.id),
                ProtocolErrorCode::LimitExceeded,
                format!(
                    "This socket holds {} subscriptions, the most one may \
                     (SERVICE_MAX_WS_SUBSCRIPTIONS); unsubscribe one first",
                    self.max_subscriptions
                ),
            );
            return vec![json_text(&error)];
        }
        let request: EventStreamRequest = match command_params(command) {
            Ok(request) => request,
            Err(failure) => {
                let error =
                    ProtocolResponse::error(Some(command.id), failure.code, failure.message);
                return vec![json_text(&error)];
            }
        };
        let filter = match EventFilter::new(&request) {
            Ok(filter) => filter,
            Err(message) => {
                let error = ProtocolResponse::error(
                    Some(command.id),
                    ProtocolErrorCode::InvalidArgument,
                    message,
                );
                return vec![json_text(&error)];
            }
        };
        let since = match (reconnect, request.since) {
            (_, Some(since)) => since,
            (false, None) => 0,
            (true, None) => {
                let error = ProtocolResponse::error(
                    Some(command.id),
                    ProtocolErrorCode::InvalidArgument,
                    "subscription.reconnect requires a non-negative integer since.",
                );
                return vec![json_text(&error)];
            }
        };
        if reconnect && let Some(oldest) = self.seen.oldest_dropped_after(since) {
            return vec![resume_gap(command.id, since, oldest)];
        }
        let replayed: Vec<String> = self
            .seen
            .iter()
            .filter(|event| event.seq > since && filter.matches(event))
            .map(json_text)
            .collect();
        let kept = reconnect
            .then(|| command.params.get("subscription_id")?.as_str())
            .flatten()
            .filter(|id| {
                !id.is_empty() && !self.subscriptions.iter().any(|(known, _)| known == id)
            });
        let subscription_id = kept.map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
        self.subscriptions.push((subscription_id.clone(), filter));
        let result = json!({"subscription_id": subscription_id, "replayed_events": replayed.len()});
        let mut frames = vec![json_text(&ProtocolResponse::success(command.id, result))];
        frames.extend(replayed);
        frames
    }

    fn unsubscribe(&mut self, command: &ProtocolCommand) -> ProtocolResponse {
        let params: UnsubscribeParams = match command_params(command) {
            Ok(params) => params,
            Err(failure) => {
                return ProtocolResponse::error(Some(command.id), failure.code, failure.message);
            }
        };
        let before = self.subscriptions.len();
        self.subscriptions
            .retain(|(id, _)| *id != params.subscription_id);
        if self.subscriptions.len() == before {
            return ProtocolResponse::error(
                Some(command.id),
                ProtocolErrorCode::NoSuchSubscription,
                format!("Unknown subscription: {}", params.subscription_id),
            );
        }
        ProtocolResponse::success(command.id, json!({}))
    }
}

fn json_text(value: &impl serde::Serialize) -> String {
    // Envelopes and events are built from JSON values: they always serialize.
    serde_json::to_string(value).unwrap_or_default()
}

/// A close frame; its reason cut to the 123 bytes a close frame can carry.
fn close(code: u16, mut reason: String) -> Message {
    if reason.len() > 123 {
        let mut end = 123;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> ProtocolEvent {
        serde_json::from_value(json!({
            "type": "event", "event_id": seq.to_string(), "seq": seq, "method": "custom",
            "params": {"namespace": [], "timestamp": 0, "data": null},
        }))
        .expect("an event")
    }

    fn seqs(seen: &Seen) -> Vec<u64> {
        seen.iter().map(|event| event.seq).collect()
    }

    #[test]
    fn the_replay_buffer_keeps_the_newest_events_within_its_count() {
        let mut seen = Seen::new(2, usize::MAX);
        for seq in 1..=5 {
            seen.push(event(seq), 10);
        }
        assert_eq!(seqs(&seen), [4, 5]);
    }

    #[test]
    fn a_reconnect_past_what_the_buffer_keeps_is_a_gap() {
        let mut seen = Seen::new(2, usize::MAX);
        assert_eq!(seen.oldest_dropped_after(0), None, "nothing seen, no gap");
        for seq in 1..=5 {
            seen.push(event(seq), 10);
        }
        assert_eq!(seen.oldest_dropped_after(2), Some(4), "event 3 is gone");
        assert_eq!(seen.oldest_dropped_after(3), None);
        assert_eq!(seen.oldest_dropped_after(u64::MAX), None);
        let gap: Value = serde_json::from_str(&resume_gap(7, 2, 4)).unwrap();
        assert_eq!(
            (&gap["type"], &gap["id"], &gap["error"]),
            (&json!("error"), &json!(7), &json!("resume_gap"))
        );
        assert_eq!(
            (&gap["since"], &gap["min_available_seq"]),
            (&json!(2), &json!(4))
        );
    }

    #[test]
    fn the_replay_buffer_keeps_the_newest_events_within_its_bytes() {
        let mut seen = Seen::new(100, 25);
        for seq in 1..=5 {
            seen.push(event(seq), 10);
        }
        assert_eq!(seqs(&seen), [4, 5]);
        assert_eq!(seen.bytes, 20);
        seen.push(event(6), 30);
        assert!(
            seqs(&seen).is_empty(),
            "one event over the bound is not kept"
        );
        assert_eq!(seen.bytes, 0);
    }
}
