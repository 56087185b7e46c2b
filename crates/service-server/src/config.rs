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
    pub graphs: Option<BTreeMap<String, GraphEntry>>,
    /// HTTP settings.
    #[serde(default)]
    pub http: HttpConfig,
    /// Long-term store settings.
    #[serde(default)]
    pub store: StoreConfig,
    /// Checkpointer settings: SPEC's saver name (`"default"`) or langgraph.json's block.
    #[serde(default, deserialize_with = "checkpointer_setting")]
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
    /// langgraph.json: the Node major version the JS graphs need, checked against
    /// SERVICE_NODE's at boot.
    #[serde(default)]
    pub node_version: Option<serde_json::Value>,
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
    pub image_distro: Option<serde_json::Value>,
    #[serde(default)]
    pub api_version: Option<serde_json::Value>,
    #[serde(default)]
    pub base_image: Option<serde_json::Value>,
    #[serde(default)]
    pub source: Option<serde_json::Value>,
    #[serde(default)]
    pub keep_pkg_tools: Option<serde_json::Value>,
    #[serde(rename = "_INTERNAL_docker_tag", default)]
    pub internal_docker_tag: Option<serde_json::Value>,
    #[serde(default)]
    pub project_root: Option<serde_json::Value>,
    #[serde(default)]
    pub package: Option<serde_json::Value>,
    #[serde(rename = "$schema", default)]
    pub schema: Option<serde_json::Value>,
    /// langgraph.json's generative UI components (graph id → file) and their settings
    /// (`shared`): bundled at boot and served under `/ui` (ui.rs).
    #[serde(default)]
    pub ui: Option<serde_json::Value>,
    #[serde(default)]
    pub ui_config: Option<serde_json::Value>,
    /// `langgraph dev`'s switch off of saving its in-memory state to disk.
    #[serde(default)]
    pub disable_persistence: Option<bool>,
    /// A Python function choosing a thread's run priority: not applied here.
    #[serde(default)]
    pub priority: Option<serde_json::Value>,
    /// Encryption at rest with the user's Python key handler: refused, as running
    /// without it would store in the clear what the user meant encrypted.
    #[serde(default)]
    pub encryption: Option<serde_json::Value>,
}

/// A `graphs` entry: the target, or langgraph.json's `{path, description}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum GraphEntry {
    /// `./file.py:attr`, `module:attr`, `rust:<id>` or a program graph's id.
    Target(String),
    /// langgraph.json's object form.
    Described {
        /// The target.
        path: String,
        /// Not shown here (the graph's system assistant keeps its own).
        #[serde(default)]
        description: Option<String>,
    },
}

impl GraphEntry {
    fn target(&self) -> &str {
        match self {
            Self::Target(target) | Self::Described { path: target, .. } => target,
        }
    }
}

/// langgraph.json's `webhooks` block: only its URL policy, mapped onto
/// `service.webhooks`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LanggraphWebhooks {
    /// The URL policy.
    #[serde(default)]
    pub url: Option<LanggraphWebhookUrl>,
    /// Headers added to every webhook and the prefix of the variables they may name:
    /// accepted with a notice, not sent.
    #[serde(default)]
    pub headers: Option<serde_json::Value>,
    #[serde(default)]
    pub env_prefix: Option<serde_json::Value>,
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
    /// langgraph.json's switches off of other route groups: refused (not built yet),
    /// as ignoring one would serve routes the user turned off.
    #[serde(default)]
    pub disable_assistants: Option<bool>,
    #[serde(default)]
    pub disable_threads: Option<bool>,
    #[serde(default)]
    pub disable_store: Option<bool>,
    #[serde(default)]
    pub disable_mcp: Option<bool>,
    #[serde(default)]
    pub disable_meta: Option<bool>,
    #[serde(default)]
    pub disable_ui: Option<bool>,
    #[serde(default)]
    pub disable_webhooks: Option<bool>,
    /// CORS (langgraph.json's `http.cors`); absent answers every origin.
    #[serde(default)]
    pub cors: Option<CorsBlock>,
    /// langgraph.json keys accepted with a notice: custom routes (`app`, their auth
    /// and middleware order, `mount_prefix`), headers to log.
    #[serde(default)]
    pub app: Option<serde_json::Value>,
    #[serde(default)]
    pub enable_custom_route_auth: Option<serde_json::Value>,
    #[serde(default)]
    pub middleware_order: Option<serde_json::Value>,
    #[serde(default)]
    pub mount_prefix: Option<serde_json::Value>,
    /// Request headers copied into new runs' `config.configurable`.
    #[serde(default)]
    pub configurable_headers: Option<HeaderPatterns>,
    #[serde(default)]
    pub logging_headers: Option<serde_json::Value>,
}

/// `http.configurable_headers`: `*` patterns of header names (`include` and
/// `exclude` are accepted too, as the reference server accepts them).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeaderPatterns {
    #[serde(default)]
    pub includes: Option<Vec<String>>,
    #[serde(default)]
    pub excludes: Option<Vec<String>>,
    #[serde(default)]
    pub include: Option<Vec<String>>,
    #[serde(default)]
    pub exclude: Option<Vec<String>>,
}

impl HeaderPatterns {
    /// What the router copies.
    pub(crate) fn copied(&self) -> service_axum::ConfigurableHeaders {
        let pick = |plural: &Option<Vec<String>>, singular: &Option<Vec<String>>| {
            plural
                .clone()
                .filter(|patterns| !patterns.is_empty())
                .or_else(|| singular.clone())
                .unwrap_or_default()
        };
        service_axum::ConfigurableHeaders {
            includes: pick(&self.includes, &self.include),
            excludes: pick(&self.excludes, &self.exclude),
        }
    }
}

/// `http.cors`, as langgraph.json writes it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CorsBlock {
    #[serde(default)]
    pub allow_origins: Option<Vec<String>>,
    #[serde(default)]
    pub allow_methods: Option<Vec<String>>,
    #[serde(default)]
    pub allow_headers: Option<Vec<String>>,
    #[serde(default)]
    pub allow_credentials: Option<bool>,
    #[serde(default)]
    pub allow_origin_regex: Option<String>,
    #[serde(default)]
    pub expose_headers: Option<Vec<String>>,
    #[serde(default)]
    pub max_age: Option<u64>,
}

impl CorsBlock {
    /// The policy, as the reference server reads the block: without `allow_origins`
    /// any origin is allowed unless `allow_origin_regex` says which; the other keys
    /// default as its CORS middleware's do (GET only, no extra headers, no
    /// credentials, nothing exposed, 600 s).
    pub(crate) fn policy(&self) -> Result<service_axum::CorsPolicy, ConfigError> {
        let defaults = service_axum::CorsPolicy::default();
        let origins = match (&self.allow_origins, &self.allow_origin_regex) {
            (Some(origins), _) => origins.clone(),
            (None, Some(_)) => Vec::new(),
            (None, None) => vec!["*".to_owned()],
        };
        let allow_origin_regex = match &self.allow_origin_regex {
            Some(pattern) => Some(service_axum::OriginPattern::new(pattern).map_err(|error| {
                ConfigError(format!(
                    "http.cors.allow_origin_regex {pattern:?} is not a valid regular expression: {error}"
                ))
            })?),
            None => None,
        };
        Ok(service_axum::CorsPolicy {
            allow_origins: origins,
            allow_methods: self.allow_methods.clone().unwrap_or(defaults.allow_methods),
            allow_headers: self.allow_headers.clone().unwrap_or_default(),
            allow_credentials: self.allow_credentials.unwrap_or(false),
            expose_headers: self.expose_headers.clone().unwrap_or_default(),
            max_age: self.max_age.unwrap_or(defaults.max_age),
            allow_origin_regex,
        })
    }
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
    /// SPEC's store adapter: `./store.py:store` (or `./store.ts:store`), a LangGraph
    /// (LangGraph.js) `BaseStore` the Python (Node) workers load, keeps the items.
    #[serde(default)]
    pub adapter: Option<String>,
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
    /// The Python graphs' serializer settings (allowed modules, pickle fallback),
    /// handed to the bridge's workers.
    #[serde(default)]
    pub serde: Option<serde_json::Map<String, serde_json::Value>>,
    /// A custom Python checkpointer: refused (SPEC reserves `custom`), as the
    /// checkpoints would go elsewhere than the user's saver.
    #[serde(default)]
    pub path: Option<serde_json::Value>,
    /// `"checkpointer": "default"`: the PostgreSQL saver, in `dev` too.
    #[serde(skip)]
    pub database_saver: bool,
}

/// SPEC's checkpointer setting is a name (`default`; `custom` is reserved), while
/// langgraph.json's is a block: both are read into one [`CheckpointerConfig`].
fn checkpointer_setting<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<CheckpointerConfig, D::Error> {
    struct Setting;
    impl<'de> serde::de::Visitor<'de> for Setting {
        type Value = CheckpointerConfig;

        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("\"default\" or a checkpointer block (ttl, serde)")
        }

        fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
            match name {
                "default" => Ok(CheckpointerConfig {
                    database_saver: true,
                    ..CheckpointerConfig::default()
                }),
                "custom" => Err(E::custom(
                    "checkpointer \"custom\" is reserved and not supported yet; use \"default\" (the PostgreSQL saver) or leave the setting out (in memory in dev)",
                )),
                other => Err(E::custom(format!(
                    "checkpointer {other:?} is not a checkpointer; use \"default\" (the PostgreSQL saver) or leave the setting out (in memory in dev)"
                ))),
            }
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            CheckpointerConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    deserializer.deserialize_any(Setting)
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
    /// Most threads one sweep deletes: accepted, not applied (a sweep deletes every
    /// expired thread).
    #[serde(default)]
    pub sweep_limit: Option<serde_json::Value>,
}

fn yes() -> bool {
    true
}

impl ConfigFile {
    /// The served id → target of the `graphs` block.
    pub(crate) fn graph_targets(&self) -> Option<BTreeMap<String, String>> {
        self.graphs.as_ref().map(|graphs| {
            graphs
                .iter()
                .map(|(id, entry)| (id.clone(), entry.target().to_owned()))
                .collect()
        })
    }

    /// One startup notice per langgraph.json key that is set and accepted without
    /// being (fully) applied here, saying what it does here.
    pub(crate) fn notices(&self) -> Vec<String> {
        let mut notices = Vec::new();
        let image: Vec<&str> = [
            ("python_version", self.python_version.is_some()),
            ("pip_config_file", self.pip_config_file.is_some()),
            ("pip_installer", self.pip_installer.is_some()),
            ("dockerfile_lines", self.dockerfile_lines.is_some()),
            ("image_distro", self.image_distro.is_some()),
            ("api_version", self.api_version.is_some()),
            ("base_image", self.base_image.is_some()),
            ("source", self.source.is_some()),
            ("keep_pkg_tools", self.keep_pkg_tools.is_some()),
            ("_INTERNAL_docker_tag", self.internal_docker_tag.is_some()),
            ("project_root", self.project_root.is_some()),
            ("package", self.package.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        if !image.is_empty() {
            notices.push(format!(
                "{} only matter to image builds; ignored here (this server runs the graphs in the Python environment of SERVICE_PYTHON)",
                image.join(", ")
            ));
        }
        let http = &self.http;
        let said = [
            (
                self.disable_persistence.is_some(),
                "disable_persistence: dev keeps nothing on disk here anyway (everything is in memory and gone at exit); start keeps everything in its database",
            ),
            (
                self.priority.is_some(),
                "priority: not applied here; a thread's runs are taken in the order they were created",
            ),
            (
                self.graphs.as_ref().is_some_and(|graphs| {
                    graphs.values().any(|entry| {
                        matches!(
                            entry,
                            GraphEntry::Described {
                                description: Some(_),
                                ..
                            }
                        )
                    })
                }),
                "graphs.*.description: not shown here; a graph's assistant keeps its own description",
            ),
            (
                self.checkpointer
                    .ttl
                    .as_ref()
                    .is_some_and(|ttl| ttl.sweep_limit.is_some()),
                "checkpointer.ttl.sweep_limit: not applied here; each sweep deletes every expired thread",
            ),
            (
                http.app.is_some()
                    || http.enable_custom_route_auth.is_some()
                    || http.middleware_order.is_some(),
                "http.app, http.enable_custom_route_auth, http.middleware_order: custom routes are not mounted here",
            ),
            (
                http.mount_prefix.is_some(),
                "http.mount_prefix: not applied here; the API is served at the root (put a proxy in front to serve it under a prefix)",
            ),
            (
                http.logging_headers.is_some(),
                "http.logging_headers: not applied here; request headers are not logged",
            ),
            (
                self.webhooks
                    .as_ref()
                    .is_some_and(|w| w.headers.is_some() || w.env_prefix.is_some()),
                "webhooks.headers, webhooks.env_prefix: not applied here; webhooks carry their signature headers only (docs/webhooks.md)",
            ),
            (
                self.auth.disable_studio_auth.is_some()
                    || self.auth.openapi.is_some()
                    || self.auth.cache.is_some(),
                "auth.disable_studio_auth, auth.openapi, auth.cache: belong to a Python auth handler, which this server does not run; its own schemes apply (docs/auth.md)",
            ),
        ];
        notices.extend(
            said.into_iter()
                .filter(|(set, _)| *set)
                .map(|(_, notice)| notice.to_owned()),
        );
        notices
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
        if let Some(adapter) = &self.store.adapter {
            crate::adapter::validate(adapter, &self.store)?;
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
        if self.encryption.is_some() {
            return Err(ConfigError(
                "encryption is not supported: this server does not run the Python encryption handler, and would store in the clear what it should encrypt; remove the key".into(),
            ));
        }
        if self.checkpointer.path.is_some() {
            return Err(ConfigError(
                "checkpointer.path (a custom checkpointer) is not supported: the checkpoints would go to this server's own saver instead of yours; remove the key".into(),
            ));
        }
        if let Some(key) = self
            .checkpointer
            .serde
            .iter()
            .flat_map(|serde| serde.keys())
            .find(|key| {
                ![
                    "allowed_json_modules",
                    "allowed_msgpack_modules",
                    "pickle_fallback",
                ]
                .contains(&key.as_str())
            })
        {
            return Err(ConfigError(format!(
                "checkpointer.serde.{key} is not a serializer setting (allowed_json_modules, allowed_msgpack_modules, pickle_fallback)"
            )));
        }
        let http = &self.http;
        for (key, set) in [
            ("disable_assistants", http.disable_assistants == Some(true)),
            ("disable_threads", http.disable_threads == Some(true)),
            ("disable_store", http.disable_store == Some(true)),
            ("disable_mcp", http.disable_mcp == Some(true)),
            ("disable_meta", http.disable_meta == Some(true)),
            ("disable_ui", http.disable_ui == Some(true)),
            ("disable_webhooks", http.disable_webhooks == Some(true)),
        ] {
            if set {
                return Err(ConfigError(format!(
                    "http.{key} is not supported yet (only http.disable_runs is): those routes would still be served; remove the key"
                )));
            }
        }
        if let Some(cors) = &http.cors {
            cors.policy()?;
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
mod tests;
