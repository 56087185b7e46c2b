//! Replies: a channel run carries its reply destination as its webhook URL,
//! `channel://<route>/<where…>?mac=<hex>`, so the reply is a delivery row of the
//! outbox, written with the run's terminal status and retried like any webhook.
//! [`ChannelDispatcher`] sends those rows through the route's provider and every other
//! row over HTTP. The MAC (keyed by the route's inbound secret) means only this
//! server names a channel: a client cannot send a run's result into a Slack channel
//! by giving its URL as a webhook.

use std::sync::Arc;

use async_trait::async_trait;
use percent_encoding::percent_decode_str;
use serde_json::Value;
use service_webhooks::{Attempt, AttemptError, Dispatcher};
use url::Url;

use crate::config::{Route, Routes};
use crate::mac::{hex_hmac, same};
use crate::provider::Outgoing;

/// The scheme of reply destinations.
pub const SCHEME: &str = "channel";

/// The reply destination of a message of `route` that goes to `to`.
pub(crate) fn destination(route: &Route, to: &[String]) -> String {
    let mut url = Url::parse(&format!("{SCHEME}://{}", route.name))
        .unwrap_or_else(|_| Url::parse("channel://invalid").expect("a constant URL parses"));
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.extend(to);
    }
    url.query_pairs_mut().append_pair("mac", &mac(route, to));
    url.into()
}

fn mac(route: &Route, to: &[String]) -> String {
    let mut parts: Vec<&[u8]> = vec![b"service-channel-reply\n", route.name.as_bytes()];
    for segment in to {
        parts.push(b"\n");
        parts.push(segment.as_bytes());
    }
    hex_hmac(route.destination_key.as_bytes(), &parts)
}

/// The route and address a reply destination names, when this server made it.
pub(crate) fn parse<'r>(routes: &'r Routes, url: &Url) -> Option<(&'r Arc<Route>, Vec<String>)> {
    if url.scheme() != SCHEME {
        return None;
    }
    let route = routes.get(url.host_str()?)?;
    let to: Vec<String> = url
        .path_segments()?
        .filter(|segment| !segment.is_empty())
        .map(|segment| percent_decode_str(segment).decode_utf8_lossy().into_owned())
        .collect();
    let given = url
        .query_pairs()
        .find(|(key, _)| key == "mac")
        .map(|(_, value)| value.into_owned())?;
    same(&given, &mac(route, &to)).then_some((route, to))
}

/// The text a settled run replies with: its reply declaration (a string, or an
/// object's `text`), else its last AI message's text. A failed or paused run without
/// a declaration says nothing.
pub fn reply_text(payload: &Value) -> Option<String> {
    match payload.get("reply") {
        Some(Value::String(text)) => return Some(text.clone()),
        Some(Value::Object(reply)) => {
            if let Some(Value::String(text)) = reply.get("text") {
                return Some(text.clone());
            }
        }
        Some(other) if !other.is_null() => return Some(other.to_string()),
        _ => {}
    }
    if payload["status"].as_str() != Some("success") {
        return None;
    }
    let messages = payload["values"]["messages"].as_array()?;
    messages.iter().rev().find_map(|message| {
        let role = message["type"].as_str().or(message["role"].as_str())?;
        if !matches!(role, "ai" | "assistant" | "AIMessage" | "AIMessageChunk") {
            return None;
        }
        content_text(&message["content"])
    })
}

/// A message content's text: a string, or the text parts of a list.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        Value::Array(parts) => {
            let text: Vec<&str> = parts
                .iter()
                .filter_map(|part| match part {
                    Value::String(text) => Some(text.as_str()),
                    _ => part["text"].as_str(),
                })
                .collect();
            (!text.is_empty()).then(|| text.join(""))
        }
        _ => None,
    }
}

/// The outbox's dispatcher when channels are configured: a reply destination goes to
/// its route's provider (over a client of its own, without the webhooks' address
/// guard: the provider's API base URL is the operator's configuration, not a client's
/// input), every other URL to `http`.
#[derive(Debug)]
pub struct ChannelDispatcher {
    routes: Routes,
    http: Arc<dyn Dispatcher>,
    client: reqwest::Client,
}

impl ChannelDispatcher {
    /// Sends replies of `routes`, each request bounded by `timeout`, and hands
    /// everything else to `http`.
    pub fn new(
        routes: Routes,
        http: Arc<dyn Dispatcher>,
        timeout: std::time::Duration,
    ) -> Result<Self, AttemptError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .user_agent(concat!("service-channels/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| AttemptError::new(format!("cannot build the HTTP client: {error}")))?;
        Ok(Self {
            routes,
            http,
            client,
        })
    }
}

#[async_trait]
impl Dispatcher for ChannelDispatcher {
    async fn post(&self, attempt: Attempt) -> Result<(), AttemptError> {
        let Some((route, to)) = parse(&self.routes, &attempt.url) else {
            if attempt.url.scheme() == SCHEME {
                return Err(AttemptError::refused(
                    "not a reply destination of this server",
                ));
            }
            return self.http.post(attempt).await;
        };
        let payload: Value = serde_json::from_slice(&attempt.body).unwrap_or(Value::Null);
        let text = reply_text(&payload);
        let outgoing = Outgoing {
            text: text.as_deref(),
            attempt: &attempt,
        };
        route.provider.reply(&self.client, &to, outgoing).await
    }

    fn delivers_itself(&self, url: &Url) -> bool {
        parse(&self.routes, url).is_some()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::generic::Generic;

    fn route(name: &str, key: &str) -> Route {
        Route::new(
            name,
            "echo",
            &[],
            Arc::new(Generic::new(vec![key.into()], None)),
            key,
        )
    }

    #[test]
    fn a_destination_round_trips_and_a_forged_one_does_not() {
        let routes = Routes::of(vec![route("ops", "k1")]);
        let to = vec!["C 1/x".to_owned(), "17.5".to_owned()];
        let made = destination(routes.get("ops").unwrap(), &to);
        let url = Url::parse(&made).unwrap();
        let (found, address) = parse(&routes, &url).unwrap();
        assert_eq!(found.name, "ops");
        assert_eq!(address, to);
        let forged = made.replace("17.5", "18.5");
        assert!(parse(&routes, &Url::parse(&forged).unwrap()).is_none());
        let other_key = Routes::of(vec![route("ops", "k2")]);
        assert!(parse(&other_key, &url).is_none());
        assert!(parse(&routes, &Url::parse("channel://ops/C1").unwrap()).is_none());
    }

    #[test]
    fn the_reply_is_the_declaration_else_the_last_ai_message() {
        let declared = json!({"status": "success", "reply": {"text": "declared"},
            "values": {"messages": [{"type": "ai", "content": "last"}]}});
        assert_eq!(reply_text(&declared).as_deref(), Some("declared"));
        let last = json!({"status": "success", "values": {"messages": [
            {"type": "human", "content": "q"}, {"type": "ai", "content": "first"},
            {"type": "ai", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"type": "human", "content": "later question"}]}});
        assert_eq!(reply_text(&last).as_deref(), Some("ab"));
        let failed =
            json!({"status": "error", "values": {"messages": [{"type": "ai", "content": "x"}]}});
        assert_eq!(reply_text(&failed), None);
        assert_eq!(
            reply_text(&json!({"status": "success", "values": {}})),
            None
        );
    }
}
