//! Slack's Events API: `X-Slack-Signature: v0=<hex>` over `v0:<timestamp>:<raw body>`
//! keyed by the app's signing secret, within five minutes of
//! `X-Slack-Request-Timestamp`; `url_verification` answered with its challenge;
//! replies with `chat.postMessage` in the message's thread.

use async_trait::async_trait;
use serde_json::{Value, json};
use service_webhooks::AttemptError;

use crate::mac::{fresh, hex_hmac, same};
use crate::provider::{
    ChannelProvider, Decoded, Inbound, Message, Outgoing, bearer_headers, post_json,
};

/// Slack's Web API.
pub(crate) const DEFAULT_API_BASE: &str = "https://slack.com/api";
/// Slack's replay window.
const WINDOW_SECONDS: i64 = 300;

/// A Slack app's route.
#[derive(Clone)]
pub struct Slack {
    signing_secret: String,
    bot_token: Option<String>,
    api_base: String,
}

impl std::fmt::Debug for Slack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slack")
            .field("replies", &self.bot_token.is_some())
            .finish_non_exhaustive()
    }
}

impl Slack {
    /// A route checked with `signing_secret`, replying with `bot_token` (none: no
    /// replies) through `api_base` (Slack's own by default).
    pub fn new(
        signing_secret: String,
        bot_token: Option<String>,
        api_base: Option<String>,
    ) -> Self {
        Self {
            signing_secret,
            bot_token,
            api_base: api_base.unwrap_or_else(|| DEFAULT_API_BASE.to_owned()),
        }
    }

    /// The headers Slack would send with `body` at `timestamp` (for tests and tools).
    pub fn sign(signing_secret: &str, timestamp: i64, body: &[u8]) -> String {
        let base = format!("v0:{timestamp}:");
        format!(
            "v0={}",
            hex_hmac(signing_secret.as_bytes(), &[base.as_bytes(), body])
        )
    }
}

#[async_trait]
impl ChannelProvider for Slack {
    fn kind(&self) -> &'static str {
        "slack"
    }

    fn replies(&self) -> bool {
        self.bot_token.is_some()
    }

    fn verify(&self, inbound: &Inbound<'_>) -> Result<(), String> {
        let timestamp = inbound
            .header("x-slack-request-timestamp")
            .ok_or("missing X-Slack-Request-Timestamp")?
            .parse::<i64>()
            .map_err(|_| "malformed X-Slack-Request-Timestamp")?;
        let signature = inbound
            .header("x-slack-signature")
            .ok_or("missing X-Slack-Signature")?;
        if !fresh(timestamp, inbound.now, WINDOW_SECONDS) {
            return Err("stale request: the timestamp is outside the five-minute window".into());
        }
        let expected = Self::sign(&self.signing_secret, timestamp, inbound.body);
        if same(signature, &expected) {
            Ok(())
        } else {
            Err("signature mismatch".into())
        }
    }

    fn decode(&self, inbound: &Inbound<'_>) -> Result<Decoded, String> {
        let body: Value = serde_json::from_slice(inbound.body)
            .map_err(|error| format!("the body is not JSON: {error}"))?;
        match body["type"].as_str() {
            Some("url_verification") => {
                let challenge = body["challenge"]
                    .as_str()
                    .ok_or("url_verification without a challenge")?;
                Ok(Decoded::Answer(json!({ "challenge": challenge })))
            }
            Some("event_callback") => decode_event(&body),
            _ => Ok(Decoded::Ignored("not an event callback")),
        }
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
        let [channel, thread_ts] = to else {
            return Err(AttemptError::refused(
                "a Slack reply needs a channel and a thread",
            ));
        };
        let headers = bearer_headers(token)?;
        let body = json!({"channel": channel, "thread_ts": thread_ts, "text": text});
        let url = format!("{}/chat.postMessage", self.api_base.trim_end_matches('/'));
        let answer = post_json(client, &url, headers, body.to_string().into_bytes()).await?;
        // Slack reports failures inside a 200.
        let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        if answer["ok"] == Value::Bool(true) {
            Ok(())
        } else {
            let error = answer["error"].as_str().unwrap_or("no ok in the answer");
            Err(AttemptError::new(format!(
                "Slack refused the message: {error}"
            )))
        }
    }
}

/// A message or mention event; edits, bots (this app's own replies among them) and
/// other events are acknowledged and ignored.
fn decode_event(body: &Value) -> Result<Decoded, String> {
    body["event_id"]
        .as_str()
        .ok_or("event without an event_id")?;
    let event = &body["event"];
    if !matches!(event["type"].as_str(), Some("message" | "app_mention")) {
        return Ok(Decoded::Ignored("event type not handled"));
    }
    if event.get("bot_id").is_some() || event.get("subtype").is_some() {
        return Ok(Decoded::Ignored("a bot's message or an edit"));
    }
    let channel = event["channel"].as_str().ok_or("event without a channel")?;
    let ts = event["ts"].as_str().ok_or("event without a ts")?;
    // A reply in a thread belongs to the thread's first message.
    let thread = event["thread_ts"].as_str().unwrap_or(ts);
    let text = strip_mentions(event["text"].as_str().unwrap_or_default());
    Ok(Decoded::Message(Message {
        // The message, not the event: a retry repeats its event, and a mention in a
        // channel the app also reads arrives as two events (`app_mention` and
        // `message`) of one message.
        event_id: format!("{channel}/{ts}"),
        conversation: format!("{channel}/{thread}"),
        sender: event["user"].as_str().unwrap_or_default().to_owned(),
        text,
        reply_to: vec![channel.to_owned(), thread.to_owned()],
        ..Message::default()
    }))
}

/// The text without the leading `<@U…>` mentions that address the app.
fn strip_mentions(text: &str) -> String {
    let mut rest = text.trim_start();
    while let Some(after) = rest.strip_prefix("<@")
        && let Some(end) = after.find('>')
    {
        rest = after[end + 1..].trim_start();
    }
    rest.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_slacks_documented_example() {
        // The example of Slack's "Verifying requests from Slack" page.
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            Slack::sign("8f742231b10e8888abcd99yyyzzz85a5", 1531420618, body),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn mentions_are_stripped_from_the_front_only() {
        assert_eq!(strip_mentions("<@U1> <@U2> hi <@U3>"), "hi <@U3>");
        assert_eq!(strip_mentions("plain"), "plain");
    }
}
