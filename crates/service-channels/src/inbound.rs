//! `POST /channels/{route_name}` and `GET /channels`, without HTTP: a request is
//! verified by its provider, decoded, deduplicated by its event id, and becomes a run
//! on its conversation's thread before it is acknowledged; the run proceeds in the
//! background and its reply goes out through the outbox.

use std::sync::Arc;

use http::HeaderMap;
use serde::Serialize;
use serde_json::{Value, json};
use service_engine::auth::{Caller, Principal, Scope};
use service_engine::{Engine, RunTarget};
use service_store::containment::Enforced;
use service_store::{Begin, StoredResponse};
use service_types::{IfNotExists, Metadata, MultitaskStrategy, RunCreate, StreamMode, StreamModes};
use uuid::Uuid;

use crate::config::{Route, Routes};
use crate::provider::{Decoded, Inbound, Message};
use crate::reply::destination;

/// The namespace of conversation thread ids (a UUID v5 of route and conversation).
const CONVERSATIONS: Uuid = Uuid::from_u128(0x6c1e_5d0a_93b4_4f3e_8a57_2f0c_b1d4_e9a1);

/// The answer to an inbound request.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: Value,
}

impl Answer {
    fn new(status: u16, body: Value) -> Self {
        Self { status, body }
    }

    fn error(status: u16, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            status,
            json!({"status": status, "message": message, "detail": message}),
        )
    }
}

/// One entry of `GET /channels`: never credentials, URLs or raw configuration.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct InventoryEntry {
    /// The route name.
    pub name: String,
    /// The provider.
    pub provider: &'static str,
    /// The assistant a message runs by default.
    pub default_assistant: String,
    /// The assistants a message may select, the default first.
    pub allowed_assistants: Vec<String>,
    /// Whether the route sends replies.
    pub outbound: bool,
}

/// The configured routes, bound to the engine their runs go to.
#[derive(Clone, Debug)]
pub struct Channels {
    engine: Engine,
    routes: Routes,
}

impl Channels {
    /// `routes` starting runs on `engine`.
    pub fn new(engine: Engine, routes: Routes) -> Self {
        Self { engine, routes }
    }

    /// The routes.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Checks at boot that every route's assistants exist.
    pub async fn check_assistants(&self) -> Result<(), String> {
        let system = self.engine.system();
        for route in self.routes.iter() {
            for assistant in &route.allowed {
                if let Err(error) = system.view().assistants().get(assistant).await {
                    return Err(format!(
                        "service.channels ({}): assistant '{assistant}' cannot be used: {}",
                        route.name, error.message
                    ));
                }
            }
        }
        Ok(())
    }

    /// `GET /channels`.
    pub fn inventory(&self) -> Vec<InventoryEntry> {
        self.routes
            .iter()
            .map(|route| InventoryEntry {
                name: route.name.clone(),
                provider: route.provider.kind(),
                default_assistant: route.assistant.clone(),
                allowed_assistants: route.allowed.clone(),
                outbound: route.provider.replies(),
            })
            .collect()
    }

    /// `POST /channels/{route_name}` with these headers and raw body.
    pub async fn receive(&self, route_name: &str, headers: &HeaderMap, body: &[u8]) -> Answer {
        let Some(route) = self.routes.get(route_name) else {
            return Answer::error(404, "Not Found");
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() as i64);
        let inbound = Inbound { headers, body, now };
        if let Err(reason) = route.provider.verify(&inbound) {
            tracing::warn!(route = route.name, reason, "channel request refused");
            return Answer::error(401, format!("Unauthorized: {reason}"));
        }
        let message = match route.provider.decode(&inbound) {
            Ok(Decoded::Message(message)) => message,
            Ok(Decoded::Answer(body)) => return Answer::new(200, body),
            Ok(Decoded::Ignored(why)) => {
                tracing::debug!(route = route.name, why, "channel event ignored");
                return Answer::new(200, json!({"ok": true}));
            }
            Err(reason) => return Answer::error(400, reason),
        };
        self.start(route, message).await
    }

    /// A verified message: its run created (once per event id) before the answer.
    async fn start(&self, route: &Arc<Route>, message: Message) -> Answer {
        let key = format!("channel/{}/{}", route.name, message.event_id);
        match self.engine.begin_idempotent(&key, "channel").await {
            Ok(Begin::Acquired) => {}
            Ok(_) => {
                tracing::info!(
                    route = route.name,
                    event = message.event_id,
                    "duplicate channel event ignored"
                );
                return Answer::new(200, json!({"ok": true, "duplicate": true}));
            }
            Err(error) => {
                tracing::error!(route = route.name, error = %error.chain(), "channel deduplication failed");
                return Answer::error(503, "The event could not be recorded; retry");
            }
        }
        match self.create_run(route, message).await {
            Ok(body) => {
                let stored = StoredResponse {
                    status: 200,
                    headers: Vec::new(),
                    body: body.to_string().into_bytes(),
                };
                if let Err(error) = self.engine.complete_idempotent(&key, stored).await {
                    // The run exists; a retry finds the key in progress until it expires.
                    tracing::warn!(route = route.name, error = %error.chain(), "recording a channel event failed");
                }
                Answer::new(200, body)
            }
            Err(answer) => {
                if let Err(error) = self.engine.abandon_idempotent(&key).await {
                    tracing::warn!(route = route.name, error = %error.chain(), "releasing a channel event failed");
                }
                answer
            }
        }
    }

    async fn create_run(&self, route: &Arc<Route>, message: Message) -> Result<Value, Answer> {
        let (assistant, text) = select_assistant(route, &message)?;
        let thread_id = conversation_thread(&route.name, &message.conversation);
        let input = match message.input {
            Some(input) => input,
            // Both shapes: a messages graph reads `messages`, a plain one `text`.
            None => json!({"messages": [{"type": "human", "content": text}], "text": text}),
        };
        let mut metadata = Metadata::new();
        metadata.insert("channel".into(), json!(route.name));
        metadata.insert("conversation".into(), json!(message.conversation));
        metadata.insert("sender".into(), json!(message.sender));
        let body = RunCreate {
            assistant_id: assistant,
            input: Some(input),
            metadata: Some(metadata),
            webhook: route
                .provider
                .replies()
                .then(|| destination(route, &message.reply_to)),
            // Values for the last AI message, custom for a reply declaration.
            stream_mode: Some(StreamModes::Many(vec![
                StreamMode::Values,
                StreamMode::Custom,
            ])),
            multitask_strategy: Some(MultitaskStrategy::Enqueue),
            if_not_exists: Some(IfNotExists::Create),
            ..RunCreate::default()
        };
        let caller = channel_caller(&route.name);
        let run = self
            .engine
            .as_caller(&caller)
            .runs()
            .create(RunTarget::Thread(thread_id), body)
            .await
            .map_err(|error| {
                tracing::error!(route = route.name, error = %error.chain(), "a channel run could not be created");
                Answer::error(503, "The run could not be started; retry")
            })?;
        Ok(json!({"ok": true, "thread_id": thread_id, "run_id": run.run_id}))
    }
}

/// The thread of a route's conversation: the same for every message of it.
pub fn conversation_thread(route: &str, conversation: &str) -> Uuid {
    let name = format!("{route}\n{conversation}");
    Uuid::new_v5(&CONVERSATIONS, name.as_bytes())
}

/// Who a route's runs run as: `channel:<route>`, whose threads are stamped and
/// scoped `metadata.owner = "channel:<route>"`, so a route reaches only its own
/// conversations, and no tenant under owner scoping (`key:…`, `jwt:…` identities)
/// reaches them.
pub fn channel_caller(route: &str) -> Caller {
    let owner = format!("channel:{route}");
    let mut stamp = Metadata::new();
    stamp.insert("owner".into(), Value::String(owner.clone()));
    Caller::new(
        Arc::new(Principal::new(owner)),
        None,
        Scope::Owned(Enforced::metadata(stamp)),
    )
}

/// The assistant a message runs and its text without the selecting prefix: a
/// generic body's `assistant`, or a first word `/name` or `!name` (Telegram's
/// `/name@bot` too) naming an allowed assistant; else the route's default.
fn select_assistant(route: &Route, message: &Message) -> Result<(String, String), Answer> {
    if let Some(named) = &message.assistant {
        return if route.allowed.contains(named) {
            Ok((named.clone(), message.text.clone()))
        } else {
            Err(Answer::error(
                422,
                format!("assistant '{named}' is not allowed on this channel"),
            ))
        };
    }
    let text = message.text.trim_start();
    let (first, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let command = first
        .strip_prefix('/')
        .or_else(|| first.strip_prefix('!'))
        .map(|name| name.split('@').next().unwrap_or(name));
    match command {
        Some(name) if route.allowed.iter().any(|allowed| allowed == name) => {
            Ok((name.to_owned(), rest.trim_start().to_owned()))
        }
        _ => Ok((route.assistant.clone(), message.text.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generic::Generic;

    #[test]
    fn a_command_prefix_selects_an_allowed_assistant_only() {
        let route = Route::new(
            "r",
            "echo",
            &["reply".to_owned()],
            Arc::new(Generic::new(vec!["k".into()], None)),
            "k",
        );
        let message = |text: &str| Message {
            text: text.into(),
            ..Message::default()
        };
        let pick = |text| select_assistant(&route, &message(text)).unwrap();
        assert_eq!(pick("/reply hello"), ("reply".into(), "hello".into()));
        assert_eq!(pick("!reply@bot  hi"), ("reply".into(), "hi".into()));
        assert_eq!(pick("/other hi"), ("echo".into(), "/other hi".into()));
        assert_eq!(pick("hello"), ("echo".into(), "hello".into()));
    }

    #[test]
    fn a_conversation_has_one_thread_per_route() {
        assert_eq!(
            conversation_thread("a", "c1"),
            conversation_thread("a", "c1")
        );
        assert_ne!(
            conversation_thread("a", "c1"),
            conversation_thread("b", "c1")
        );
        assert_ne!(
            conversation_thread("a", "c1"),
            conversation_thread("a", "c2")
        );
    }
}
