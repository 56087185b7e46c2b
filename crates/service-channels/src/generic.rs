//! Generic routes: this server's own signature scheme (`X-Service-Signature`, checked
//! by the webhooks verifier, secrets rotated by listing several) over a JSON body
//! `{conversation_id, text | input, assistant?}`; replies are the run's callback body,
//! signed with the route's newest secret, POSTed to the route's `reply_url`.

use std::time::Duration;

use async_trait::async_trait;
use http::HeaderValue;
use serde::Deserialize;
use serde_json::Value;
use service_webhooks::{AttemptError, DELIVERY_ID_HEADER, SIGNATURE_HEADER, sign, verify_header};

use crate::mac::hex_hmac;
use crate::provider::{ChannelProvider, Decoded, Inbound, Message, Outgoing, post_json};

/// The window a signature's timestamp must fall in, either way.
const TOLERANCE: Duration = Duration::from_secs(300);

/// A generic route.
#[derive(Clone)]
pub struct Generic {
    secrets: Vec<String>,
    reply_url: Option<String>,
}

impl std::fmt::Debug for Generic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generic")
            .field("replies", &self.reply_url.is_some())
            .finish_non_exhaustive()
    }
}

impl Generic {
    /// A route checked with any of `secrets` (newest first; the first signs replies),
    /// replying to `reply_url` (none: no replies).
    pub fn new(secrets: Vec<String>, reply_url: Option<String>) -> Self {
        Self { secrets, reply_url }
    }
}

/// The body a generic route takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    conversation_id: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    assistant: Option<String>,
    #[serde(default)]
    sender: Option<String>,
}

#[async_trait]
impl ChannelProvider for Generic {
    fn kind(&self) -> &'static str {
        "generic"
    }

    fn replies(&self) -> bool {
        self.reply_url.is_some()
    }

    fn verify(&self, inbound: &Inbound<'_>) -> Result<(), String> {
        let header = inbound
            .header(SIGNATURE_HEADER)
            .ok_or("missing X-Service-Signature")?;
        verify_header(header, inbound.body, &self.secrets, TOLERANCE, inbound.now)
            .map_err(|rejection| rejection.to_string())
    }

    fn decode(&self, inbound: &Inbound<'_>) -> Result<Decoded, String> {
        let body: Body = serde_json::from_slice(inbound.body).map_err(|error| {
            format!("the body must be {{conversation_id, text | input}}: {error}")
        })?;
        if body.conversation_id.is_empty() {
            return Err("conversation_id must not be empty".into());
        }
        if body.text.is_none() && body.input.is_none() {
            return Err("the body needs text or input".into());
        }
        // A sender's delivery id, else the signature itself: a replayed request carries
        // the same one, a new request (another timestamp) another.
        let event_id = match inbound.header(DELIVERY_ID_HEADER) {
            Some(id) => format!("id:{id}"),
            None => format!(
                "sig:{}",
                hex_hmac(
                    b"generic",
                    &[inbound
                        .header(SIGNATURE_HEADER)
                        .unwrap_or_default()
                        .as_bytes()]
                )
            ),
        };
        Ok(Decoded::Message(Message {
            event_id,
            reply_to: vec![body.conversation_id.clone()],
            conversation: body.conversation_id,
            sender: body.sender.unwrap_or_default(),
            text: body.text.unwrap_or_default(),
            input: body.input,
            assistant: body.assistant,
        }))
    }

    async fn reply(
        &self,
        client: &reqwest::Client,
        _to: &[String],
        outgoing: Outgoing<'_>,
    ) -> Result<(), AttemptError> {
        let Some(url) = &self.reply_url else {
            return Ok(());
        };
        // The callback body as the webhook path sends it, signed with this route's
        // secret rather than the webhooks' one, so the receiver checks one secret.
        let attempt = outgoing.attempt;
        let mut headers = attempt.headers.clone();
        headers.remove(SIGNATURE_HEADER);
        if let Some(secret) = self.secrets.first() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs() as i64);
            let signature = sign(secret, now, &attempt.body);
            if let Ok(value) = HeaderValue::from_str(&signature) {
                headers.insert(SIGNATURE_HEADER, value);
            }
        }
        post_json(client, url, headers, attempt.body.to_vec())
            .await
            .map(drop)
    }
}
