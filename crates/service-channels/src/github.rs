//! GitHub webhooks: `X-Hub-Signature-256: sha256=<hex>` over the raw body keyed by
//! the webhook's secret; deliveries deduplicated by `X-GitHub-Delivery`; an opened
//! issue and a new issue comment are messages of the issue's conversation; replies
//! are issue comments.

use async_trait::async_trait;
use http::{HeaderValue, header};
use serde_json::{Value, json};
use service_webhooks::AttemptError;

use crate::mac::{hex_hmac, same};
use crate::provider::{
    ChannelProvider, Decoded, Inbound, Message, Outgoing, bearer_headers, post_json,
};

/// GitHub's REST API.
pub(crate) const DEFAULT_API_BASE: &str = "https://api.github.com";

/// A GitHub webhook's route.
#[derive(Clone)]
pub struct GitHub {
    secret: String,
    token: Option<String>,
    api_base: String,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("replies", &self.token.is_some())
            .finish_non_exhaustive()
    }
}

impl GitHub {
    /// A route checked with the webhook's `secret`, commenting with `token` (none: no
    /// replies) through `api_base` (GitHub's own by default).
    pub fn new(secret: String, token: Option<String>, api_base: Option<String>) -> Self {
        Self {
            secret,
            token,
            api_base: api_base.unwrap_or_else(|| DEFAULT_API_BASE.to_owned()),
        }
    }

    /// The `X-Hub-Signature-256` value GitHub sends with `body`.
    pub fn sign(secret: &str, body: &[u8]) -> String {
        format!("sha256={}", hex_hmac(secret.as_bytes(), &[body]))
    }
}

#[async_trait]
impl ChannelProvider for GitHub {
    fn kind(&self) -> &'static str {
        "github"
    }

    fn replies(&self) -> bool {
        self.token.is_some()
    }

    fn verify(&self, inbound: &Inbound<'_>) -> Result<(), String> {
        let signature = inbound
            .header("x-hub-signature-256")
            .ok_or("missing X-Hub-Signature-256")?;
        if same(signature, &Self::sign(&self.secret, inbound.body)) {
            Ok(())
        } else {
            Err("signature mismatch".into())
        }
    }

    fn decode(&self, inbound: &Inbound<'_>) -> Result<Decoded, String> {
        let delivery = inbound
            .header("x-github-delivery")
            .ok_or("missing X-GitHub-Delivery")?;
        let event = inbound.header("x-github-event").unwrap_or_default();
        let body: Value = serde_json::from_slice(inbound.body)
            .map_err(|error| format!("the body is not JSON: {error}"))?;
        let (text, author) = match (event, body["action"].as_str()) {
            ("issues", Some("opened")) => {
                let issue = &body["issue"];
                let title = issue["title"].as_str().unwrap_or_default();
                let text = match issue["body"].as_str() {
                    Some(text) if !text.is_empty() => format!("{title}\n\n{text}"),
                    _ => title.to_owned(),
                };
                (text, &issue["user"])
            }
            ("issue_comment", Some("created")) => {
                let comment = &body["comment"];
                (
                    comment["body"].as_str().unwrap_or_default().to_owned(),
                    &comment["user"],
                )
            }
            _ => return Ok(Decoded::Ignored("event or action not handled")),
        };
        // This route's own comments come back as events: a bot's are not messages.
        if author["type"].as_str() == Some("Bot") {
            return Ok(Decoded::Ignored("a bot's comment"));
        }
        let repository = body["repository"]["full_name"]
            .as_str()
            .ok_or("event without repository.full_name")?;
        let number = body["issue"]["number"]
            .as_i64()
            .ok_or("event without issue.number")?;
        Ok(Decoded::Message(Message {
            event_id: delivery.to_owned(),
            conversation: format!("{repository}#{number}"),
            sender: author["login"].as_str().unwrap_or_default().to_owned(),
            text,
            reply_to: vec![repository.to_owned(), number.to_string()],
            ..Message::default()
        }))
    }

    async fn reply(
        &self,
        client: &reqwest::Client,
        to: &[String],
        outgoing: Outgoing<'_>,
    ) -> Result<(), AttemptError> {
        let (Some(token), Some(text)) = (&self.token, outgoing.text) else {
            return Ok(());
        };
        let [repository, number] = to else {
            return Err(AttemptError::refused(
                "a GitHub reply needs a repository and an issue",
            ));
        };
        let mut headers = bearer_headers(token)?;
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/vnd.github+json"),
        );
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("service-channels/", env!("CARGO_PKG_VERSION"))),
        );
        let url = format!(
            "{}/repos/{repository}/issues/{number}/comments",
            self.api_base.trim_end_matches('/')
        );
        let body = json!({ "body": text }).to_string().into_bytes();
        post_json(client, &url, headers, body).await.map(drop)
    }
}
