//! The configuration file: graphs, http, store, checkpointer, service (webhooks, channels) and
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
    pub auth: service_auth::AuthConfig,
    /// The durable queue.
    #[serde(default)]
    pub queue: Option<QueueConfig>,
    /// langgraph.json: local paths put on the Python graphs' import path (package
    /// names are for image builds and ignored).
    #[serde(default)]
    pub dependencies: Option<Vec<String>>,
    /// langgraph.json: environment of the Python graphs' workers, a map or a `.env`
    /// file path.
    #[serde(default)]
    pub env: Option<serde_json::Value>,
    /// langgraph.json: the webhook URL policy.
    #[serde(default)]
    pub webhooks: Option<LanggraphWebhooks>,
    /// langgraph.json keys that only matter to image builds: accepted, ignored.
    #[serde(default)]
    pub python_version: Option<serde_json::Value>,
    #[serde(default)]
    pub pip_config_file: Option<serde_json::Value>,
    #[serde(default)]
    pub pip_installer: Option<serde_json::Value>,
    #[serde(default)]
    pub dockerfile_lines: Option<serde_json::Value>,
    #[serde(default)]
    pub node_version: Option<serde_json::Value>,
    #[serde(default)]
    pub image_distro: Option<serde_json::Value>,
    #[serde(rename = "$schema", default)]
    pub schema: Option<serde_json::Value>,
    /// langgraph.json's generative UI components: refused, not served yet.
    #[serde(default)]
    pub ui: Option<serde_json::Value>,
}

/// langgraph.json's `webhooks` block: only its URL policy, mapped onto
/// `service.webhooks`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LanggraphWebhooks {
    /// The URL policy.
    #[serde(default)]
    pub url: Option<LanggraphWebhookUrl>,
}

/// `webhooks.url` of langgraph.json.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LanggraphWebhookUrl {
    /// Only `https://` targets.
    #[serde(default)]
    pub require_https: Option<bool>,
    /// Hosts a webhook may target (`*.example.com` allowed).
    #[serde(default)]
    pub allowed_domains: Option<Vec<String>>,
    /// Loopback targets refused: `true` only with `disable_private_ips`, whose guard
    /// refuses loopback along with the other private addresses.
    #[serde(default)]
    pub disable_loopback: Option<bool>,
    /// Private, loopback and link-local targets refused (`block_private_targets`).
    #[serde(default)]
    pub disable_private_ips: Option<bool>,
    /// Not supported yet.
    #[serde(default)]
    pub allowed_ports: Option<serde_json::Value>,
    /// Not supported yet.
    #[serde(default)]
    pub max_url_length: Option<serde_json::Value>,
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
    /// Inbound channel routes (credentials resolved from the environment in settings).
    #[serde(default)]
    pub channels: Vec<service_channels::RouteBlock>,
}

/// The `http` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpConfig {
    /// SPEC: `true` (mount at `/console`), `false`, or a mount path (not `/`).
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
    /// The semantic index.
    #[serde(default)]
    pub index: Option<StoreIndex>,
    /// SPEC's store adapter: refused, not built yet.
    #[serde(default)]
    pub adapter: Option<serde_json::Value>,
}

/// `store.index`: what embeds the items and how their vectors are searched.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreIndex {
    /// The embedder: `openai:<model>`.
    pub embed: String,
    /// Dimensions of its vectors.
    pub dims: usize,
    /// Field paths embedded by default (LangGraph's syntax); absent is `["$"]`, the
    /// whole value.
    #[serde(default)]
    pub fields: Option<Vec<String>>,
    /// An approximate (HNSW) index on PostgreSQL; off is an exact scan.
    #[serde(default)]
    pub hnsw: bool,
}

/// pgvector's limits: a `vector` column holds at most 16,000 dimensions, an HNSW index
/// at most 2,000.
const MAX_DIMS: usize = 16_000;
const MAX_HNSW_DIMS: usize = 2_000;

impl StoreIndex {
    /// The default field paths.
    pub(crate) fn fields(&self) -> Vec<String> {
        self.fields.clone().unwrap_or_else(|| vec!["$".to_owned()])
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_DIMS).contains(&self.dims) {
            return Err(ConfigError(format!(
                "store.index.dims must be between 1 and {MAX_DIMS}, got {}",
                self.dims
            )));
        }
        if self.hnsw && self.dims > MAX_HNSW_DIMS {
            return Err(ConfigError(format!(
                "store.index.hnsw indexes at most {MAX_HNSW_DIMS} dimensions (pgvector), store.index.dims is {}; turn hnsw off for an exact scan",
                self.dims
            )));
        }
        match &self.fields {
            Some(fields) if fields.is_empty() || fields.iter().any(|f| f.trim().is_empty()) => {
                Err(ConfigError(
                    "store.index.fields must list non-empty field paths (omit it to embed the whole value, \"$\")".into(),
                ))
            }
            _ => Ok(()),
        }
    }
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
    /// langgraph.json's image-build keys that are set: accepted, not used here.
    pub(crate) fn ignored_keys(&self) -> Vec<String> {
        let set: Vec<&str> = [
            ("python_version", self.python_version.is_some()),
            ("pip_config_file", self.pip_config_file.is_some()),
            ("pip_installer", self.pip_installer.is_some()),
            ("dockerfile_lines", self.dockerfile_lines.is_some()),
            ("node_version", self.node_version.is_some()),
            ("image_distro", self.image_distro.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        if set.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "{} only matter to image builds; ignored here (this server runs the graphs in the Python environment of SERVICE_PYTHON)",
            set.join(", ")
        )]
    }

    /// `service.webhooks` with langgraph.json's `webhooks.url` policy applied under
    /// it (the service block wins where both set a key).
    pub(crate) fn webhooks_policy(&self) -> Result<service_webhooks::WebhooksBlock, ConfigError> {
        let mut block = self.service.webhooks.clone();
        let Some(url) = self
            .webhooks
            .as_ref()
            .and_then(|webhooks| webhooks.url.as_ref())
        else {
            return Ok(block);
        };
        for (key, set) in [
            ("allowed_ports", url.allowed_ports.is_some()),
            ("max_url_length", url.max_url_length.is_some()),
        ] {
            if set {
                return Err(ConfigError(format!(
                    "webhooks.url.{key} is not supported yet (supported: require_https, allowed_domains, disable_private_ips); remove it"
                )));
            }
        }
        if block.require_https.is_none() {
            block.require_https = url.require_https;
        }
        if block.allowed_hosts.is_none() {
            block.allowed_hosts = url.allowed_domains.clone();
        }
        if block.block_private_targets.is_none() {
            block.block_private_targets = url.disable_private_ips;
        }
        // Relative webhook URLs, the other half of the Python server's switch, are
        // refused here regardless; loopback alone has no switch of its own.
        if url.disable_loopback == Some(true) && block.block_private_targets != Some(true) {
            return Err(ConfigError(
                "webhooks.url.disable_loopback: true needs the private-address guard, which refuses loopback with the other private addresses: set webhooks.url.disable_private_ips (or service.webhooks.block_private_targets) to true, or remove disable_loopback".into(),
            ));
        }
        Ok(block)
    }

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
        if let Some(index) = &self.store.index {
            index.validate()?;
        }
        if self.store.adapter.is_some() {
            return Err(ConfigError(
                "store.adapter is not supported yet: the store is this server's own (in memory, or PostgreSQL with DATABASE_URL); remove the key".into(),
            ));
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
        if self.ui.is_some() {
            return Err(ConfigError(
                "ui (generative UI components) is not supported yet; remove the key".into(),
            ));
        }
        self.console().map(drop)
    }

    /// `http.console`: unset, off, or the mount path (`true` is `/console`).
    pub(crate) fn console(&self) -> Result<ConsoleSetting, ConfigError> {
        match &self.http.console {
            None => Ok(ConsoleSetting::Unset),
            Some(serde_json::Value::Bool(false)) => Ok(ConsoleSetting::Off),
            Some(serde_json::Value::Bool(true)) => Ok(ConsoleSetting::At(DEFAULT_CONSOLE.into())),
            Some(serde_json::Value::String(path)) => {
                let mount = service_axum::console_mount(path)
                    .map_err(|error| ConfigError(format!("http.console: {error}")))?;
                // The console finds the API one segment above its own path, and this
                // server's API is at the root.
                if mount.matches('/').count() > 1 {
                    return Err(ConfigError(format!(
                        "http.console: {path:?} must be one segment, such as \"/console\": the console finds the API one segment above it"
                    )));
                }
                Ok(ConsoleSetting::At(mount))
            }
            Some(other) => Err(ConfigError(format!(
                "http.console must be a boolean or a path, got {other}"
            ))),
        }
    }
}

/// Where the console is mounted when on without a path of its own.
pub(crate) const DEFAULT_CONSOLE: &str = "/console";

/// What the configuration file says about the console.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ConsoleSetting {
    /// No `http.console`: the mode decides.
    Unset,
    /// `false`.
    Off,
    /// `true` or a path: served at this mount path.
    At(String),
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
    fn a_langgraph_json_is_read_as_users_write_it() {
        let config: ConfigFile = serde_json::from_str(
            r#"{"$schema": "https://langgra.ph/schema.json", "dependencies": ["."],
                "graphs": {"agent": "./agent.py:graph"}, "env": ".env",
                "python_version": "3.11", "dockerfile_lines": [], "image_distro": "wolfi",
                "webhooks": {"url": {"require_https": true, "allowed_domains": ["hooks.example.com"], "disable_loopback": false, "disable_private_ips": true}},
                "store": {"ttl": {"default_ttl": 5}}, "checkpointer": {"ttl": {"strategy": "delete"}}}"#,
        )
        .unwrap();
        config.validate().unwrap();
        let notices = config.ignored_keys();
        assert_eq!(notices.len(), 1);
        assert!(
            notices[0].starts_with(
                "python_version, dockerfile_lines, image_distro only matter to image builds"
            ),
            "{notices:?}"
        );
        let policy = config.webhooks_policy().unwrap();
        assert_eq!(policy.require_https, Some(true));
        assert_eq!(
            policy.allowed_hosts,
            Some(vec!["hooks.example.com".to_owned()])
        );
        assert_eq!(policy.block_private_targets, Some(true));
    }

    #[test]
    fn disable_loopback_is_honoured_only_with_the_private_address_guard() {
        let policy = |text: &str| {
            serde_json::from_str::<ConfigFile>(text)
                .unwrap()
                .webhooks_policy()
        };
        let alone = policy(r#"{"webhooks": {"url": {"disable_loopback": true}}}"#).unwrap_err();
        assert!(
            alone.0.contains("webhooks.url.disable_loopback")
                && alone.0.contains("disable_private_ips"),
            "{alone}"
        );
        let guarded = policy(
            r#"{"webhooks": {"url": {"disable_loopback": true, "disable_private_ips": true}}}"#,
        )
        .unwrap();
        assert_eq!(guarded.block_private_targets, Some(true));
        let from_service = policy(
            r#"{"service": {"webhooks": {"block_private_targets": true}},
                "webhooks": {"url": {"disable_loopback": true, "disable_private_ips": false}}}"#,
        )
        .unwrap();
        assert_eq!(
            from_service.block_private_targets,
            Some(true),
            "service.webhooks wins"
        );
    }

    #[test]
    fn langgraph_json_keys_this_server_cannot_honour_are_refused_naming_them() {
        // auth.path is refused by service-auth, which reads the auth block.
        let config: ConfigFile = serde_json::from_str(r#"{"ui": {"agent": "./ui.tsx"}}"#).unwrap();
        let error = config.validate().unwrap_err();
        assert!(
            error.0.contains("ui") && error.0.contains("not supported yet"),
            "{error}"
        );
        for key in ["allowed_ports", "max_url_length"] {
            let config: ConfigFile =
                serde_json::from_str(&format!(r#"{{"webhooks": {{"url": {{"{key}": [443]}}}}}}"#))
                    .unwrap();
            let error = config.webhooks_policy().unwrap_err();
            assert!(error.0.contains(&format!("webhooks.url.{key}")), "{error}");
        }
    }

    #[test]
    fn store_index_is_read_as_langgraph_json_writes_it_and_checked() {
        let config: ConfigFile = serde_json::from_str(
            r#"{"store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text", "meta.title"]}}}"#,
        )
        .unwrap();
        config.validate().unwrap();
        let index = config.store.index.unwrap();
        assert_eq!(index.fields(), ["text", "meta.title"]);
        assert!(!index.hnsw, "exact by default");
        let whole: ConfigFile =
            serde_json::from_str(r#"{"store": {"index": {"embed": "openai:m", "dims": 8}}}"#)
                .unwrap();
        assert_eq!(whole.store.index.unwrap().fields(), ["$"]);
        for (text, says) in [
            (r#"{"embed": "openai:m", "dims": 0}"#, "store.index.dims"),
            (
                r#"{"embed": "openai:m", "dims": 16001}"#,
                "store.index.dims",
            ),
            (
                r#"{"embed": "openai:m", "dims": 3072, "hnsw": true}"#,
                "store.index.hnsw",
            ),
            (
                r#"{"embed": "openai:m", "dims": 8, "fields": []}"#,
                "store.index.fields",
            ),
        ] {
            let config: ConfigFile =
                serde_json::from_str(&format!(r#"{{"store": {{"index": {text}}}}}"#)).unwrap();
            let error = config.validate().unwrap_err();
            assert!(error.0.contains(says), "{text}: {error}");
        }
        let typo = serde_json::from_str::<ConfigFile>(
            r#"{"store": {"index": {"embed": "openai:m", "dims": 8, "field": ["a"]}}}"#,
        );
        assert!(typo.unwrap_err().to_string().contains("field"));
    }

    #[test]
    fn a_store_adapter_is_refused_as_not_built_yet() {
        let config: ConfigFile =
            serde_json::from_str(r#"{"store": {"adapter": "./store.py:store"}}"#).unwrap();
        let error = config.validate().unwrap_err();
        assert!(error.0.contains("store.adapter"), "{error}");
        assert!(error.0.contains("not supported yet"), "{error}");
    }

    #[test]
    fn http_console_is_true_false_or_a_mount_path() {
        for (text, setting) in [
            ("{}", ConsoleSetting::Unset),
            (r#"{"http": {"console": false}}"#, ConsoleSetting::Off),
            (
                r#"{"http": {"console": true}}"#,
                ConsoleSetting::At("/console".into()),
            ),
            (
                r#"{"http": {"console": "/ui/"}}"#,
                ConsoleSetting::At("/ui".into()),
            ),
        ] {
            let config: ConfigFile = serde_json::from_str(text).unwrap();
            assert_eq!(config.console().unwrap(), setting, "{text}");
        }
        for text in [
            r#"{"http": {"console": "/"}}"#,
            r#"{"http": {"console": "/threads"}}"#,
            r#"{"http": {"console": "/admin/ui"}}"#,
            r#"{"http": {"console": 1}}"#,
        ] {
            let config: ConfigFile = serde_json::from_str(text).unwrap();
            let error = config.validate().unwrap_err();
            assert!(error.0.contains("http.console"), "{error}");
        }
    }
}
