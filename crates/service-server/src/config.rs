//! The configuration file: graphs, http, store, checkpointer, service (webhooks) and
//! auth blocks. Unknown keys
//! are refused so a typo fails at boot, and so are settings of features not built yet.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::env::ConfigError;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    /// Graph id to serve → the served program's graph it runs (e.g.
    /// `{"chat": "echo"}`); absent serves every graph under its own id.
    #[serde(default)]
    pub graphs: Option<BTreeMap<String, String>>,
    /// HTTP settings.
    #[serde(default)]
    pub http: HttpConfig,
    /// Long-term store settings.
    #[serde(default)]
    pub store: StoreConfig,
    /// Checkpointer settings.
    #[serde(default)]
    pub checkpointer: CheckpointerConfig,
    /// The service's own blocks (`service.webhooks`).
    #[serde(default)]
    pub service: ServiceConfig,
    /// Authentication and authorization (validated with the environment in settings).
    #[serde(default)]
    pub auth: crate::auth::AuthBlock,
    /// The durable queue.
    #[serde(default)]
    pub queue: Option<QueueConfig>,
}

/// The `queue` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueConfig {
    /// `redis://host:port/db`; `--queue` and, in `start`, REDIS_URL win over it.
    #[serde(default)]
    pub url: Option<String>,
    /// The prefix of every key, so deployments can share a Redis (default `service`).
    #[serde(default)]
    pub prefix: Option<String>,
}

/// The `service` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServiceConfig {
    /// Run-completion webhooks (validated with the environment in settings).
    #[serde(default)]
    pub webhooks: service_webhooks::WebhooksBlock,
}

/// The `http` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpConfig {
    /// SPEC: `true` (mount at `/console`), `false`, or a mount path. Only `false` is
    /// accepted: there is no console yet.
    #[serde(default)]
    pub console: Option<serde_json::Value>,
    /// SPEC: turn off the run routes (and the deliveries routes).
    #[serde(default)]
    pub disable_runs: Option<bool>,
}

/// The `store` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreConfig {
    /// Item expiry.
    #[serde(default)]
    pub ttl: Option<StoreTtl>,
}

/// `store.ttl`, in minutes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreTtl {
    /// Applied to puts without their own ttl.
    #[serde(default)]
    pub default_ttl: Option<f64>,
    /// A read extends a live item's expiry (default true).
    #[serde(default = "yes")]
    pub refresh_on_read: bool,
    /// Sweeper period (default 60).
    #[serde(default)]
    pub sweep_interval_minutes: Option<f64>,
}

/// The `checkpointer` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointerConfig {
    /// Thread expiry.
    #[serde(default)]
    pub ttl: Option<CheckpointerTtl>,
}

/// `checkpointer.ttl`, in minutes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointerTtl {
    /// Lifetime of threads created without their own ttl.
    #[serde(default)]
    pub default_ttl: Option<f64>,
    /// Only `delete` is implemented.
    #[serde(default)]
    pub strategy: Option<String>,
    /// Sweeper period (default 60).
    #[serde(default)]
    pub sweep_interval_minutes: Option<f64>,
}

fn yes() -> bool {
    true
}

impl ConfigFile {
    /// Reads and validates a configuration file.
    pub(crate) fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            ConfigError(format!(
                "cannot read config file {}: {error}",
                path.display()
            ))
        })?;
        let config: Self = serde_json::from_str(&text).map_err(|error| {
            ConfigError(format!("invalid config file {}: {error}", path.display()))
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let positive = |name: &str, value: Option<f64>| match value {
            Some(value) if !(value.is_finite() && value > 0.0) => Err(ConfigError(format!(
                "{name} must be a positive number of minutes"
            ))),
            _ => Ok(()),
        };
        if let Some(ttl) = &self.store.ttl {
            positive("store.ttl.default_ttl", ttl.default_ttl)?;
            positive(
                "store.ttl.sweep_interval_minutes",
                ttl.sweep_interval_minutes,
            )?;
        }
        if let Some(ttl) = &self.checkpointer.ttl {
            positive("checkpointer.ttl.default_ttl", ttl.default_ttl)?;
            positive(
                "checkpointer.ttl.sweep_interval_minutes",
                ttl.sweep_interval_minutes,
            )?;
            if let Some(strategy) = ttl
                .strategy
                .as_deref()
                .filter(|strategy| *strategy != "delete")
            {
                return Err(ConfigError(format!(
                    "checkpointer.ttl.strategy {strategy:?} is not supported; only \"delete\" is"
                )));
            }
        }
        match &self.http.console {
            Some(serde_json::Value::Bool(false)) | None => Ok(()),
            Some(serde_json::Value::Bool(true) | serde_json::Value::String(_)) => Err(ConfigError(
                "http.console is not supported yet: this server has no web console; remove the key"
                    .into(),
            )),
            Some(other) => Err(ConfigError(format!(
                "http.console must be a boolean or a path, got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_refused() {
        let error = serde_json::from_str::<ConfigFile>(r#"{"grpahs": {}}"#).unwrap_err();
        assert!(error.to_string().contains("grpahs"));
    }

    #[test]
    fn blocks_are_read_and_checked() {
        let config: ConfigFile = serde_json::from_str(
            r#"{"graphs": {"chat": "echo"}, "store": {"ttl": {"default_ttl": 5}}, "checkpointer": {"ttl": {"strategy": "delete"}},
                "service": {"webhooks": {"retries": {"max_attempts": 4}, "require_https": true}}}"#,
        )
        .unwrap();
        config.validate().unwrap();
        assert!(config.store.ttl.unwrap().refresh_on_read);
        assert_eq!(config.service.webhooks.retries.max_attempts, Some(4));
        let typo =
            serde_json::from_str::<ConfigFile>(r#"{"service": {"webhooks": {"secrets": "x"}}}"#);
        assert!(typo.unwrap_err().to_string().contains("secrets"));
    }

    #[test]
    fn settings_of_features_not_built_yet_are_refused_naming_the_key() {
        for (text, key) in [
            (r#"{"http": {"console": true}}"#, "http.console"),
            (r#"{"http": {"console": "/console"}}"#, "http.console"),
        ] {
            let config: ConfigFile = serde_json::from_str(text).unwrap();
            let error = config.validate().unwrap_err();
            assert!(error.0.contains(key), "{error}");
            assert!(error.0.contains("not supported yet"), "{error}");
        }
        let off: ConfigFile =
            serde_json::from_str(r#"{"http": {"console": false, "disable_runs": false}}"#).unwrap();
        off.validate().unwrap();
    }
}
