//! The `service.channels` block: a list of routes, read once at boot into [`Routes`].
//! Credentials are never in the file: a route names the environment variables that
//! hold them (`secret_env`, `token_env`), and a variable that is not set stops the
//! boot naming it (never its value).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::generic::Generic;
use crate::github::GitHub;
use crate::provider::ChannelProvider;
use crate::slack::Slack;
use crate::telegram::Telegram;

/// The most assistants one route may route to.
pub const MAX_ALLOWED_ASSISTANTS: usize = 20;

/// One route as written in `service.channels`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteBlock {
    /// The path segment: `POST /channels/{name}`.
    pub name: String,
    /// `slack`, `telegram`, `github` or `generic`.
    pub provider: String,
    /// The assistant (id or graph id) a message runs by default.
    pub assistant: String,
    /// Other assistants a message may select (`/name` or `!name` as its first word;
    /// a generic body's `assistant`).
    #[serde(default)]
    pub allowed_assistants: Vec<String>,
    /// The variable holding the inbound secret: Slack's signing secret, Telegram's
    /// webhook secret token, GitHub's webhook secret, a generic route's secrets
    /// (comma-separated, newest first).
    pub secret_env: String,
    /// The variable holding the outbound credential (Slack bot token, Telegram bot
    /// token, GitHub token); without it the route sends no replies.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The provider's API base URL (tests point it at a local fake).
    #[serde(default)]
    pub api_base_url: Option<String>,
    /// Generic routes: where replies are POSTed.
    #[serde(default)]
    pub reply_url: Option<String>,
}

/// A configuration the server cannot use; the message names the route and key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("service.channels: {0}")]
pub struct ChannelsError(pub String);

/// One configured route.
pub struct Route {
    /// Its name (the path segment).
    pub name: String,
    /// The default assistant.
    pub assistant: String,
    /// The assistants it may route to, the default first.
    pub allowed: Vec<String>,
    /// Its provider, holding its credentials.
    pub provider: Arc<dyn ChannelProvider>,
    /// What reply destinations are authenticated with (the inbound secret), so a
    /// client cannot name a channel as a run's webhook.
    pub(crate) destination_key: String,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("assistant", &self.assistant)
            .field("allowed", &self.allowed)
            .finish_non_exhaustive()
    }
}

/// Every configured route, by name.
#[derive(Clone, Debug, Default)]
pub struct Routes(Arc<BTreeMap<String, Arc<Route>>>);

impl Routes {
    /// The routes `blocks` describe, credentials read through `lookup`.
    pub fn resolve(
        blocks: &[RouteBlock],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ChannelsError> {
        let mut routes = BTreeMap::new();
        for (index, block) in blocks.iter().enumerate() {
            let route = resolve_route(block, lookup)
                .map_err(|error| ChannelsError(format!("[{index}] ({}): {error}", block.name)))?;
            if routes.contains_key(&route.name) {
                return Err(ChannelsError(format!(
                    "[{index}]: the route name '{}' is used twice",
                    route.name
                )));
            }
            routes.insert(route.name.clone(), Arc::new(route));
        }
        Ok(Self(Arc::new(routes)))
    }

    /// Routes built in code (embedders, tests).
    pub fn of(routes: Vec<Route>) -> Self {
        Self(Arc::new(
            routes
                .into_iter()
                .map(|route| (route.name.clone(), Arc::new(route)))
                .collect(),
        ))
    }

    /// The route named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Route>> {
        self.0.get(name)
    }

    /// Every route, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Route>> {
        self.0.values()
    }

    /// True without any route (then `GET /channels` does not exist).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Route {
    /// A route of `provider`, built in code; `destination_key` authenticates its reply
    /// destinations (use the inbound secret).
    pub fn new(
        name: impl Into<String>,
        assistant: impl Into<String>,
        allowed_assistants: &[String],
        provider: Arc<dyn ChannelProvider>,
        destination_key: impl Into<String>,
    ) -> Self {
        let assistant = assistant.into();
        let mut allowed = vec![assistant.clone()];
        for other in allowed_assistants {
            if !allowed.contains(other) {
                allowed.push(other.clone());
            }
        }
        Self {
            name: name.into(),
            assistant,
            allowed,
            provider,
            destination_key: destination_key.into(),
        }
    }
}

fn resolve_route(
    block: &RouteBlock,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Route, String> {
    check_name(&block.name)?;
    if block.assistant.trim().is_empty() {
        return Err("assistant must name an assistant".into());
    }
    if block.allowed_assistants.len() > MAX_ALLOWED_ASSISTANTS {
        return Err(format!(
            "allowed_assistants lists {} assistants; at most {MAX_ALLOWED_ASSISTANTS}",
            block.allowed_assistants.len()
        ));
    }
    let variable = |name: &str, key: &str| -> Result<String, String> {
        match lookup(name) {
            Some(value) if !value.trim().is_empty() => Ok(value.trim().to_owned()),
            _ => Err(format!("{key} names {name}, which is not set")),
        }
    };
    let secret = variable(&block.secret_env, "secret_env")?;
    let token = match &block.token_env {
        Some(name) => Some(variable(name, "token_env")?),
        None => None,
    };
    if let Some(base) = &block.api_base_url {
        check_http_url(base, "api_base_url")?;
    }
    let generic = block.provider == "generic";
    if block.reply_url.is_some() && !generic {
        return Err("reply_url is for generic routes; remove it".into());
    }
    if generic && (block.token_env.is_some() || block.api_base_url.is_some()) {
        return Err(
            "a generic route replies to reply_url: remove token_env and api_base_url".into(),
        );
    }
    let api_base = block.api_base_url.clone();
    let provider: Arc<dyn ChannelProvider> = match block.provider.as_str() {
        "slack" => Arc::new(Slack::new(secret.clone(), token, api_base)),
        "telegram" => {
            // Telegram's own rule for secret_token.
            let valid = secret.len() <= 256
                && secret
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
            if !valid {
                return Err(format!(
                    "the secret in {} may hold only A-Z, a-z, 0-9, _ and - (at most 256), as Telegram's secret_token",
                    block.secret_env
                ));
            }
            Arc::new(Telegram::new(secret.clone(), token, api_base))
        }
        "github" => Arc::new(GitHub::new(secret.clone(), token, api_base)),
        "generic" => {
            if let Some(url) = &block.reply_url {
                check_http_url(url, "reply_url")?;
            }
            let secrets: Vec<String> = secret
                .split(',')
                .map(str::trim)
                .filter(|part| !part.is_empty())
                .map(str::to_owned)
                .collect();
            Arc::new(Generic::new(secrets, block.reply_url.clone()))
        }
        other => {
            return Err(format!(
                "provider '{other}' is not one of slack, telegram, github, generic"
            ));
        }
    };
    Ok(Route::new(
        block.name.clone(),
        block.assistant.clone(),
        &block.allowed_assistants,
        provider,
        secret,
    ))
}

/// A route name is one path segment and a URL host (reply destinations use it):
/// lowercase letters, digits and `-`, at most 63, starting with a letter or digit.
fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        && !name.starts_with('-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "name '{name}' must be 1 to 63 lowercase letters, digits or '-', not starting with '-'"
        ))
    }
}

fn check_http_url(url: &str, key: &str) -> Result<(), String> {
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => Ok(()),
        _ => Err(format!("{key} must be an absolute http(s) URL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(json: &str, env: &[(&str, &str)]) -> Result<Routes, ChannelsError> {
        let blocks: Vec<RouteBlock> = serde_json::from_str(json).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Routes::resolve(&blocks, &|name| {
            env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_issues_generic_example_resolves() {
        let routes = resolve(
            r#"[{"name": "ops", "provider": "generic", "assistant": "echo", "secret_env": "OPS_SECRET"}]"#,
            &[("OPS_SECRET", "s3cret")],
        )
        .unwrap();
        let ops = routes.get("ops").unwrap();
        assert_eq!(ops.provider.kind(), "generic");
        assert_eq!(ops.allowed, vec!["echo".to_owned()]);
        assert!(!ops.provider.replies());
    }

    #[test]
    fn a_missing_variable_is_named_and_its_value_never_shown() {
        let error = resolve(
            r#"[{"name": "s", "provider": "slack", "assistant": "echo", "secret_env": "SLACK_SECRET", "token_env": "SLACK_TOKEN"}]"#,
            &[("SLACK_SECRET", "very-secret-value")],
        )
        .unwrap_err();
        assert!(error.0.contains("SLACK_TOKEN"), "{error}");
        assert!(!error.0.contains("very-secret-value"), "{error}");
        let debug = format!(
            "{:?}",
            resolve(
                r#"[{"name": "s", "provider": "slack", "assistant": "echo", "secret_env": "SLACK_SECRET"}]"#,
                &[("SLACK_SECRET", "very-secret-value")],
            )
            .unwrap()
        );
        assert!(!debug.contains("very-secret-value"), "{debug}");
    }

    #[test]
    fn bad_routes_are_refused_naming_what_is_wrong() {
        let env = [("S", "secret")];
        for (json, needle) in [
            (
                r#"[{"name": "Bad Name", "provider": "slack", "assistant": "a", "secret_env": "S"}]"#,
                "name",
            ),
            (
                r#"[{"name": "x", "provider": "irc", "assistant": "a", "secret_env": "S"}]"#,
                "irc",
            ),
            (
                r#"[{"name": "x", "provider": "slack", "assistant": "a", "secret_env": "S", "reply_url": "http://h"}]"#,
                "reply_url",
            ),
            (
                r#"[{"name": "x", "provider": "slack", "assistant": "a", "secret_env": "S", "api_base_url": "ftp://h"}]"#,
                "api_base_url",
            ),
            (
                r#"[{"name": "x", "provider": "generic", "assistant": "a", "secret_env": "S"}, {"name": "x", "provider": "generic", "assistant": "a", "secret_env": "S"}]"#,
                "twice",
            ),
            (
                r#"[{"name": "x", "provider": "telegram", "assistant": "a", "secret_env": "S2"}]"#,
                "S2",
            ),
        ] {
            let error = resolve(json, &env).unwrap_err();
            assert!(error.0.contains(needle), "{json}: {error}");
        }
        let many: Vec<String> = (0..21).map(|i| format!("a{i}")).collect();
        let json = serde_json::json!([{"name": "x", "provider": "generic", "assistant": "a",
            "secret_env": "S", "allowed_assistants": many}])
        .to_string();
        assert!(resolve(&json, &env).unwrap_err().0.contains("at most"));
        assert!(
            serde_json::from_str::<Vec<RouteBlock>>(
                r#"[{"name": "x", "provider": "slack", "assistant": "a", "secret_env": "S", "secret": "inline"}]"#
            )
            .is_err(),
            "credentials are never taken from the file"
        );
    }
}
