//! The one seam every provider implements: check a request's signature, decode its
//! event, and send a reply.

use async_trait::async_trait;
use http::{HeaderMap, HeaderValue, header};
use serde_json::Value;
use service_webhooks::{Attempt, AttemptError};

/// A request as it reached `POST /channels/{route_name}`.
#[derive(Clone, Copy, Debug)]
pub struct Inbound<'a> {
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Its body's exact bytes: signatures cover these, never a re-serialized body.
    pub body: &'a [u8],
    /// The time it arrived, in unix seconds (for timestamp windows).
    pub now: i64,
}

impl Inbound<'_> {
    /// A header's value as text, when present and readable.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// What a verified request asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// Answer with this body and start nothing (Slack's `url_verification`).
    Answer(Value),
    /// Acknowledge and start nothing (a bot's own message, an event not handled); the
    /// reason goes to the debug log.
    Ignored(&'static str),
    /// A message that starts a run.
    Message(Message),
}

/// One message of a conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    /// The provider's id of this delivery: a retry or replay carries the same one.
    pub event_id: String,
    /// The conversation it belongs to (one thread per route and conversation).
    pub conversation: String,
    /// Who sent it, as the provider names them.
    pub sender: String,
    /// Its text.
    pub text: String,
    /// The run's input, when the provider carries one as is (generic routes).
    pub input: Option<Value>,
    /// An assistant the event names itself (generic routes' `assistant`).
    pub assistant: Option<String>,
    /// Where a reply goes, in the provider's terms (channel and thread, chat, issue).
    pub reply_to: Vec<String>,
}

/// A settled run's reply, handed to the provider that sends it.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing<'a> {
    /// The reply text: the run's reply declaration, else its last AI message.
    pub text: Option<&'a str>,
    /// The delivery attempt itself (its body is the run's callback body).
    pub attempt: &'a Attempt,
}

/// One provider of inbound events (Slack, Telegram, GitHub, generic).
#[async_trait]
pub trait ChannelProvider: Send + Sync + std::fmt::Debug {
    /// The provider's name in the configuration and the inventory.
    fn kind(&self) -> &'static str;

    /// Whether this route sends replies (the provider can, and has what it needs).
    fn replies(&self) -> bool;

    /// Checks the request's signature; the error is why not (a 401, starts nothing).
    fn verify(&self, inbound: &Inbound<'_>) -> Result<(), String>;

    /// Decodes a verified request; the error is why it cannot be read (a 400).
    fn decode(&self, inbound: &Inbound<'_>) -> Result<Decoded, String>;

    /// Sends a reply to `to` (a [`Message::reply_to`]); `Ok` only once the provider
    /// accepted it, any failure is retried on the webhook schedule.
    async fn reply(
        &self,
        client: &reqwest::Client,
        to: &[String],
        outgoing: Outgoing<'_>,
    ) -> Result<(), AttemptError>;
}

/// Headers carrying `token` as `Authorization: Bearer`; a token that cannot be a
/// header value is refused (retrying cannot cure it).
pub(crate) fn bearer_headers(token: &str) -> Result<HeaderMap, AttemptError> {
    let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| AttemptError::refused("the token is not a valid header value"))?;
    Ok(HeaderMap::from_iter([(header::AUTHORIZATION, bearer)]))
}

/// Sends `body` as JSON to `url` with `headers`; `Ok` for a 2xx answer, whose body is
/// returned for providers that report failures inside a 200 (Slack).
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    mut headers: HeaderMap,
    body: Vec<u8>,
) -> Result<Vec<u8>, AttemptError> {
    headers
        .entry(http::header::CONTENT_TYPE)
        .or_insert(http::HeaderValue::from_static("application/json"));
    let sent = client.post(url).headers(headers).body(body).send().await;
    match sent {
        Ok(response) if response.status().is_success() => Ok(response
            .bytes()
            .await
            .map(|bytes| bytes.to_vec())
            .unwrap_or_default()),
        Ok(response) => Err(AttemptError::new(format!(
            "the provider answered HTTP {}",
            response.status().as_u16()
        ))),
        // Without the URL: Telegram's carries the bot token.
        Err(error) => {
            let error = error.without_url();
            let reason = if error.is_timeout() {
                "timed out"
            } else {
                "connection failed"
            };
            Err(AttemptError::new(reason).with_detail(error.to_string()))
        }
    }
}
