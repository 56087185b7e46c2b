//! The `auth` block as data (docs/auth.md): what a configuration file says, before
//! [`resolve`](crate::resolve) reads the keys, secrets and files it names and checks
//! them. Unknown keys are refused, so a typo fails at boot.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The `auth` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Identity → API key.
    #[serde(default)]
    pub api_keys: Option<BTreeMap<String, KeySpec>>,
    /// Bearer JWTs.
    #[serde(default)]
    pub jwt: Option<JwtConfig>,
    /// `none` (default) or `owner`.
    #[serde(default)]
    pub scoping: Option<Scoping>,
    /// Action (`threads:create`) → the permission a principal needs for it.
    #[serde(default)]
    pub permissions: Option<BTreeMap<String, String>>,
    /// When true, an API key's identity and a token's subject of the same text are one
    /// principal (`alice`); by default they are `key:alice` and `jwt:alice`.
    #[serde(default)]
    pub shared_identities: Option<bool>,
    /// langgraph.json's Python auth handler: kept only to be refused by `resolve`, so a
    /// configuration written for it never runs without its handler.
    #[serde(default)]
    pub path: Option<serde_json::Value>,
    /// langgraph.json settings of that Python handler (Studio's bypass, the OpenAPI
    /// security description, its result cache): accepted, with no handler to apply to.
    #[serde(default)]
    pub disable_studio_auth: Option<serde_json::Value>,
    #[serde(default)]
    pub openapi: Option<serde_json::Value>,
    #[serde(default)]
    pub cache: Option<serde_json::Value>,
}

/// An API key: the key itself, or where to read it, with optional permissions.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum KeySpec {
    /// The key.
    Literal(String),
    /// `{"env": "NAME"}` or `{"key": "..."}`, with `permissions`.
    Detailed(KeyDetail),
}

/// The object form of an API key.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyDetail {
    /// The environment variable holding the key.
    #[serde(default)]
    pub env: Option<String>,
    /// The key itself.
    #[serde(default)]
    pub key: Option<String>,
    /// Permissions of the key's principal.
    #[serde(default)]
    pub permissions: Vec<String>,
}

/// The `auth.jwt` block: where the verification keys come from (one key inline, a
/// list of `keys`, a `jwks_url`, or several of these) and the claims checked.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// One static key inline: its algorithm (`HS256`, `RS256`, `ES256`, ...).
    #[serde(default)]
    pub algorithm: Option<String>,
    /// One static key inline: HS*'s shared secret, from this environment variable.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// One static key inline: RS*, PS*, ES*, EdDSA's PEM public key file (relative to
    /// the configuration file).
    #[serde(default)]
    pub public_key_file: Option<String>,
    /// One static key inline: the `kid` it answers to (any, when absent).
    #[serde(default)]
    pub kid: Option<String>,
    /// Several static keys, so an issuer can switch keys at any moment.
    #[serde(default)]
    pub keys: Option<Vec<StaticKeyConfig>>,
    /// A JSON Web Key Set, fetched at boot, cached, and fetched again when stale or
    /// when a token names a `kid` it lacks.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// How long a fetched key set is used before it is fetched again (default 600).
    #[serde(default)]
    pub jwks_cache_seconds: Option<u64>,
    /// The least time between two fetches, whatever tokens arrive (default 30).
    #[serde(default)]
    pub jwks_cooldown_seconds: Option<u64>,
    /// Required `iss`.
    #[serde(default)]
    pub issuer: Option<String>,
    /// Required `aud` (one of them).
    #[serde(default)]
    pub audience: Option<Audience>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds (default 30).
    #[serde(default)]
    pub leeway_seconds: Option<u64>,
    /// The claim naming the principal (default `sub`).
    #[serde(default)]
    pub identity_claim: Option<String>,
    /// The claim listing permissions (default `permissions`): a list, or a
    /// space-separated string as `scope` is.
    #[serde(default)]
    pub permissions_claim: Option<String>,
}

/// One entry of `auth.jwt.keys`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticKeyConfig {
    /// The one algorithm this key verifies.
    pub algorithm: String,
    /// HS*: the environment variable holding the shared secret.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// The PEM public key file (relative to the configuration file).
    #[serde(default)]
    pub public_key_file: Option<String>,
    /// The `kid` it answers to (any, when absent).
    #[serde(default)]
    pub kid: Option<String>,
}

/// One audience or several.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// One.
    One(String),
    /// Any of these.
    Many(Vec<String>),
}

/// `auth.scoping`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scoping {
    /// Any authenticated principal sees everything.
    #[default]
    None,
    /// Each principal sees what it made (and the system assistants).
    Owner,
}
