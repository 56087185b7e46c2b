//! Telegram bot webhooks: the `secret_token` given to `setWebhook` comes back in
//! `X-Telegram-Bot-Api-Secret-Token`; updates are deduplicated by `update_id`;
//! replies with `sendMessage`.

use async_trait::async_trait;
use http::HeaderMap;
use serde_json::{Value, json};
use service_webhooks::AttemptError;

use crate::mac::same;
use crate::provider::{ChannelProvider, Decoded, Inbound, Message, Outgoing, post_json};

/// Telegram's Bot API.
pub(crate) const DEFAULT_API_BASE: &str = "https://api.telegram.org";
/// The header that carries the secret token.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// A Telegram bot's route.
#[derive(Clone)]
pub struct Telegram {
    secret_token: String,
    bot_token: Option<String>,
    api_base: String,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telegram")
            .field("replies", &self.bot_token.is_some())
            .finish_non_exhaustive()
    }
}

impl Telegram {
    /// A route checked with `secret_token`, replying as `bot_token` (none: no replies)
    /// through `api_base` (Telegram's own by default).
    pub fn new(secret_token: String, bot_token: Option<String>, api_base: Option<String>) -> Self {
        Self {
            secret_token,
            bot_token,
            api_base: api_base.unwrap_or_else(|| DEFAULT_API_BASE.to_owned()),
        }
    }
}

#[async_trait]
impl ChannelProvider for Telegram {
    fn kind(&self) -> &'static str {
        "telegram"
    }

    fn replies(&self) -> bool {
        self.bot_token.is_some()
    }

    fn verify(&self, inbound: &Inbound<'_>) -> Result<(), String> {
        let token = inbound
            .header(SECRET_HEADER)
            .ok_or("missing X-Telegram-Bot-Api-Secret-Token")?;
        if same(token, &self.secret_token) {
            Ok(())
        } else {
            Err("secret token mismatch".into())
        }
    }

    fn decode(&self, inbound: &Inbound<'_>) -> Result<Decoded, String> {
        let update: Value = serde_json::from_slice(inbound.body)
            .map_err(|error| format!("the body is not JSON: {error}"))?;
        let update_id = update["update_id"]
            .as_i64()
            .ok_or("update without an update_id")?;
        let Some(message) = update.get("message") else {
            return Ok(Decoded::Ignored("not a new message"));
        };
        if message["from"]["is_bot"] == Value::Bool(true) {
            return Ok(Decoded::Ignored("a bot's message"));
        }
        let Some(text) = message["text"].as_str() else {
            return Ok(Decoded::Ignored("a message without text"));
        };
        let chat = message["chat"]["id"]
            .as_i64()
            .ok_or("message without a chat id")?;
        // A forum topic is a conversation of its own.
        let (conversation, reply_to) = match message["message_thread_id"].as_i64() {
            Some(topic) => (
                format!("{chat}/{topic}"),
                vec![chat.to_string(), topic.to_string()],
            ),
            None => (chat.to_string(), vec![chat.to_string()]),
        };
        Ok(Decoded::Message(Message {
            event_id: update_id.to_string(),
            conversation,
            sender: message["from"]["username"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| message["from"]["id"].as_i64().map(|id| id.to_string()))
                .unwrap_or_default(),
            text: text.to_owned(),
            reply_to,
            ..Message::default()
        }))
    }

    async fn reply(
        &self,
        client: &reqwest::Client,
        to: &[String],
        outgoing: Outgoing<'_>,
    ) -> Result<(), AttemptError> {
        let (Some(token), Some(text)) = (&self.bot_token, outgoing.text) else {
            return Ok(());
        };
        let mut body = match to {
            [chat] => json!({"chat_id": chat}),
            [chat, topic] => json!({"chat_id": chat, "message_thread_id": topic}),
            _ => return Err(AttemptError::refused("a Telegram reply needs a chat")),
        };
        body["text"] = Value::String(text.to_owned());
        let url = format!(
            "{}/bot{token}/sendMessage",
            self.api_base.trim_end_matches('/')
        );
        post_json(
            client,
            &url,
            HeaderMap::new(),
            body.to_string().into_bytes(),
        )
        .await
        .map(drop)
    }
}
