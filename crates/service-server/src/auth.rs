//! The binary's built-in authentication and authorization (the configuration file's
//! `auth` block, docs/auth.md): API keys and JWTs in, a principal out; optional
//! permissions per action; `owner` scoping, which gives every principal its own
//! threads, runs, crons, assistants and store.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind as JwtError};
use serde::Deserialize;
use serde_json::{Value, json};
use service_axum::auth::{Auth, Authenticator, Unauthenticated};
use service_engine::auth::{Action, AuthRequest, Authorizer, Decision, Principal, Resource};
use service_types::Metadata;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::env::ConfigError;

/// The `auth` block.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuthBlock {
    /// Identity → API key.
    #[serde(default)]
    pub api_keys: Option<BTreeMap<String, KeySpec>>,
    /// Bearer JWTs.
    #[serde(default)]
    pub jwt: Option<JwtBlock>,
    /// `none` (default) or `owner`.
    #[serde(default)]
    pub scoping: Option<Scoping>,
    /// Action (`threads:create`) → the permission a principal needs for it.
    #[serde(default)]
    pub permissions: Option<BTreeMap<String, String>>,
    /// langgraph.json's Python auth handler: refused at boot, not supported yet.
    #[serde(default)]
    pub path: Option<serde_json::Value>,
}

/// An API key: the key itself, or where to read it, with optional permissions.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum KeySpec {
    /// The key.
    Literal(String),
    /// `{"env": "NAME"}` or `{"key": "..."}`, with `permissions`.
    Detailed(KeyDetail),
}

/// The object form of an API key.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyDetail {
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

/// The `auth.jwt` block.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JwtBlock {
    /// `HS256`, `RS256`, `ES256`, ... (the one algorithm accepted).
    pub algorithm: String,
    /// HS*: the environment variable holding the shared secret.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// RS*, PS*, ES*, EdDSA: a PEM public key file (relative to the config file).
    #[serde(default)]
    pub public_key_file: Option<String>,
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

/// One audience or several.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum Audience {
    /// One.
    One(String),
    /// Any of these.
    Many(Vec<String>),
}

/// `auth.scoping`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scoping {
    /// Any authenticated principal sees everything.
    #[default]
    None,
    /// Each principal sees what it made (and the system assistants).
    Owner,
}

/// Builds the router's [`Auth`] from the block; `None` when the block is empty.
/// Every key, secret and file is read and checked here, at boot.
pub(crate) fn resolve(
    block: &AuthBlock,
    config_dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Auth>, ConfigError> {
    let keys = api_keys(block.api_keys.as_ref(), lookup)?;
    let jwt = match &block.jwt {
        Some(jwt) => Some(Jwt::resolve(jwt, config_dir, lookup)?),
        None => None,
    };
    let scoping = block.scoping.unwrap_or_default();
    let permissions = permissions(block.permissions.as_ref())?;
    if keys.is_empty() && jwt.is_none() {
        if scoping != Scoping::None || !permissions.is_empty() {
            return Err(ConfigError(
                "auth.scoping and auth.permissions need auth.api_keys or auth.jwt to know who is asking"
                    .into(),
            ));
        }
        return Ok(None);
    }
    let authorizer: Option<Arc<dyn Authorizer>> =
        (scoping == Scoping::Owner || !permissions.is_empty()).then(|| {
            Arc::new(BuiltinAuthorizer {
                owner_scoping: scoping == Scoping::Owner,
                permissions,
            }) as Arc<dyn Authorizer>
        });
    Ok(Some(Auth {
        authenticator: Some(Arc::new(BuiltinAuthenticator { keys, jwt })),
        authorizer,
    }))
}

/// A key's SHA-256 and the principal it authenticates.
struct ApiKey {
    digest: [u8; 32],
    principal: Arc<Principal>,
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

fn api_keys(
    block: Option<&BTreeMap<String, KeySpec>>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ApiKey>, ConfigError> {
    let mut keys: Vec<ApiKey> = Vec::new();
    for (identity, spec) in block.into_iter().flatten() {
        let where_ = format!("auth.api_keys.{identity}");
        if identity.is_empty() {
            return Err(ConfigError("auth.api_keys: an identity is empty".into()));
        }
        let (key, permissions) = match spec {
            KeySpec::Literal(key) => (key.clone(), Vec::new()),
            KeySpec::Detailed(KeyDetail {
                env: Some(name),
                key: None,
                permissions,
            }) => {
                let key = lookup(name).ok_or_else(|| {
                    ConfigError(format!(
                        "{where_}: the environment variable {name} is not set"
                    ))
                })?;
                (key, permissions.clone())
            }
            KeySpec::Detailed(KeyDetail {
                env: None,
                key: Some(key),
                permissions,
            }) => (key.clone(), permissions.clone()),
            KeySpec::Detailed(_) => {
                return Err(ConfigError(format!(
                    "{where_}: give the key as a string, {{\"key\": \"...\"}} or {{\"env\": \"NAME\"}}"
                )));
            }
        };
        if key.trim().len() < 16 {
            return Err(ConfigError(format!(
                "{where_}: the key is shorter than 16 characters; use a long random key"
            )));
        }
        let digest = digest(&key);
        if keys.iter().any(|other| other.digest == digest) {
            return Err(ConfigError(format!(
                "{where_}: the same key is given to another identity"
            )));
        }
        keys.push(ApiKey {
            digest,
            principal: Arc::new(Principal {
                identity: identity.clone(),
                permissions,
                ..Principal::default()
            }),
        });
    }
    Ok(keys)
}

/// A JWT verifier: one algorithm, its key, the claims it checks.
struct Jwt {
    key: DecodingKey,
    validation: Validation,
    identity_claim: String,
    permissions_claim: String,
}

impl Jwt {
    fn resolve(
        block: &JwtBlock,
        config_dir: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let algorithm: Algorithm = block.algorithm.parse().map_err(|_| {
            ConfigError(format!(
                "auth.jwt.algorithm {:?} is not one of HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA",
                block.algorithm
            ))
        })?;
        let symmetric = matches!(
            algorithm,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        );
        let key = match (symmetric, &block.secret_env, &block.public_key_file) {
            (true, Some(name), None) => {
                let secret = lookup(name)
                    .filter(|secret| !secret.is_empty())
                    .ok_or_else(|| {
                        ConfigError(format!(
                            "auth.jwt.secret_env: the environment variable {name} is not set"
                        ))
                    })?;
                if secret.len() < 32 {
                    return Err(ConfigError(format!(
                        "auth.jwt.secret_env: the secret in {name} is shorter than 32 bytes"
                    )));
                }
                DecodingKey::from_secret(secret.as_bytes())
            }
            (false, None, Some(file)) => {
                let path = config_dir.join(file);
                let pem = std::fs::read(&path).map_err(|error| {
                    ConfigError(format!(
                        "auth.jwt.public_key_file: cannot read {}: {error}",
                        path.display()
                    ))
                })?;
                let parsed = match algorithm {
                    Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(&pem),
                    Algorithm::EdDSA => DecodingKey::from_ed_pem(&pem),
                    _ => DecodingKey::from_rsa_pem(&pem),
                };
                parsed.map_err(|error| {
                    ConfigError(format!(
                        "auth.jwt.public_key_file: {} is not a {} public key in PEM: {error}",
                        path.display(),
                        block.algorithm
                    ))
                })?
            }
            (true, _, _) => {
                return Err(ConfigError(format!(
                    "auth.jwt: {} takes secret_env (and no public_key_file)",
                    block.algorithm
                )));
            }
            (false, _, _) => {
                return Err(ConfigError(format!(
                    "auth.jwt: {} takes public_key_file (and no secret_env)",
                    block.algorithm
                )));
            }
        };
        let mut validation = Validation::new(algorithm);
        validation.leeway = block.leeway_seconds.unwrap_or(30);
        validation.validate_nbf = true;
        // A configured audience or issuer is required, not only checked when present.
        match &block.audience {
            Some(Audience::One(audience)) => validation.set_audience(&[audience]),
            Some(Audience::Many(audiences)) => validation.set_audience(audiences),
            None => validation.validate_aud = false,
        }
        if block.audience.is_some() {
            validation.required_spec_claims.insert("aud".into());
        }
        if let Some(issuer) = &block.issuer {
            validation.set_issuer(&[issuer]);
            validation.required_spec_claims.insert("iss".into());
        }
        Ok(Self {
            key,
            validation,
            identity_claim: block.identity_claim.clone().unwrap_or_else(|| "sub".into()),
            permissions_claim: block
                .permissions_claim
                .clone()
                .unwrap_or_else(|| "permissions".into()),
        })
    }

    fn verify(&self, token: &str) -> Result<Principal, Unauthenticated> {
        let data = jsonwebtoken::decode::<Metadata>(token, &self.key, &self.validation).map_err(
            |error| {
                let reason = match error.kind() {
                    JwtError::ExpiredSignature => "Token expired",
                    JwtError::ImmatureSignature => "Token not valid yet",
                    JwtError::InvalidAudience => "Token audience not accepted",
                    JwtError::InvalidIssuer => "Token issuer not accepted",
                    JwtError::InvalidSignature => "Token signature is invalid",
                    JwtError::InvalidAlgorithm => "Token algorithm not accepted",
                    JwtError::MissingRequiredClaim(_) => "Token lacks a required claim",
                    _ => "Token is malformed",
                };
                invalid_token(reason)
            },
        )?;
        let claims = data.claims;
        let identity = match claims.get(&self.identity_claim) {
            Some(Value::String(identity)) if !identity.is_empty() => identity.clone(),
            _ => {
                return Err(invalid_token(&format!(
                    "Token lacks the identity claim '{}'",
                    self.identity_claim
                )));
            }
        };
        let permissions = match claims.get(&self.permissions_claim) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect(),
            Some(Value::String(list)) => list.split_whitespace().map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        Ok(Principal {
            identity,
            permissions,
            display_name: claims
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned),
            extra: claims,
        })
    }
}

fn invalid_token(reason: &str) -> Unauthenticated {
    Unauthenticated {
        message: reason.to_owned(),
        challenge: Some(format!(
            "Bearer error=\"invalid_token\", error_description=\"{reason}\""
        )),
    }
}

/// API keys first (compared in constant time, by digest), then a JWT.
struct BuiltinAuthenticator {
    keys: Vec<ApiKey>,
    jwt: Option<Jwt>,
}

#[async_trait]
impl Authenticator for BuiltinAuthenticator {
    async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, Unauthenticated> {
        let header = |name| {
            request
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
        };
        let bearer = header("authorization").and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        });
        let Some(credential) = header("x-api-key").or(bearer).map(str::trim) else {
            return Err(Unauthenticated {
                message: "Missing credentials: send an x-api-key header or Authorization: Bearer"
                    .into(),
                challenge: Some("Bearer".into()),
            });
        };
        if !self.keys.is_empty() {
            let presented = digest(credential);
            // Every key is compared, so the time taken does not tell which matched.
            let mut matched = None;
            for key in &self.keys {
                if bool::from(key.digest.ct_eq(&presented)) {
                    matched = Some(&key.principal);
                }
            }
            if let Some(principal) = matched {
                return Ok(Arc::clone(principal));
            }
        }
        match &self.jwt {
            Some(jwt) if credential.matches('.').count() == 2 => {
                jwt.verify(credential).map(Arc::new)
            }
            Some(_) => Err(invalid_token("Invalid credentials")),
            None => Err(Unauthenticated {
                message: "Invalid API key".into(),
                challenge: Some("Bearer error=\"invalid_token\"".into()),
            }),
        }
    }
}

/// Permissions per action, then owner scoping.
struct BuiltinAuthorizer {
    owner_scoping: bool,
    permissions: HashMap<(Resource, Action), String>,
}

const RESOURCES: [Resource; 4] = [
    Resource::Threads,
    Resource::Assistants,
    Resource::Crons,
    Resource::Store,
];
const ACTIONS: [Action; 6] = [
    Action::Create,
    Action::Read,
    Action::Update,
    Action::Delete,
    Action::Search,
    Action::CreateRun,
];

fn permissions(
    block: Option<&BTreeMap<String, String>>,
) -> Result<HashMap<(Resource, Action), String>, ConfigError> {
    let known: HashMap<String, (Resource, Action)> = RESOURCES
        .iter()
        .flat_map(|resource| {
            ACTIONS
                .iter()
                .filter(move |action| {
                    **action != Action::CreateRun || *resource == Resource::Threads
                })
                .map(move |action| {
                    (
                        format!("{}:{}", resource.name(), action.name()),
                        (*resource, *action),
                    )
                })
        })
        .collect();
    let mut map = HashMap::new();
    for (action, permission) in block.into_iter().flatten() {
        let Some(key) = known.get(action) else {
            let mut names: Vec<&String> = known.keys().collect();
            names.sort();
            return Err(ConfigError(format!(
                "auth.permissions: unknown action {action:?}; the actions are {}",
                names
                    .iter()
                    .map(|name| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if permission.is_empty() {
            return Err(ConfigError(format!(
                "auth.permissions.{action}: the permission is empty"
            )));
        }
        map.insert(*key, permission.clone());
    }
    Ok(map)
}

/// A store namespace label for an identity: `.` cannot be in a label, so it and the
/// escape character are percent-escaped (two identities never share a label).
fn namespace_label(identity: &str) -> String {
    identity.replace('%', "%25").replace('.', "%2E")
}

#[async_trait]
impl Authorizer for BuiltinAuthorizer {
    async fn authorize(&self, principal: &Principal, request: AuthRequest<'_>) -> Decision {
        if let Some(required) = self.permissions.get(&(request.resource, request.action))
            && !principal.has_permission(required)
        {
            return Decision::Deny(format!(
                "The permission '{required}' is required for {request}"
            ));
        }
        if !self.owner_scoping {
            return Decision::Allow;
        }
        let owner = |identity: &str| match json!({"owner": identity}) {
            Value::Object(map) => map,
            _ => Metadata::new(),
        };
        match (request.resource, request.action) {
            (Resource::Store, _) => Decision::Namespace(vec![namespace_label(&principal.identity)]),
            (Resource::Assistants, Action::Read | Action::Search) => {
                let mut system = Metadata::new();
                system.insert("created_by".into(), Value::String("system".into()));
                Decision::FilterAny(vec![owner(&principal.identity), system])
            }
            _ => Decision::Filter(owner(&principal.identity)),
        }
    }

    fn reads_values(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        (name == "KEY").then(|| "k".repeat(20))
    }

    fn block(text: &str) -> AuthBlock {
        serde_json::from_str(text).expect("an auth block")
    }

    fn refusal(text: &str) -> String {
        match resolve(&block(text), Path::new("."), &lookup) {
            Err(error) => error.0,
            Ok(_) => panic!("{text} was accepted"),
        }
    }

    #[test]
    fn bad_blocks_are_refused_at_boot_naming_the_key() {
        for (text, wanted) in [
            (r#"{"api_keys": {"a": "short"}}"#, "shorter than 16"),
            (
                r#"{"api_keys": {"a": {"env": "MISSING"}}}"#,
                "MISSING is not set",
            ),
            (
                r#"{"api_keys": {"a": {"env": "KEY"}, "b": {"env": "KEY"}}}"#,
                "another identity",
            ),
            (r#"{"scoping": "owner"}"#, "need auth.api_keys or auth.jwt"),
            (
                r#"{"api_keys": {"a": {"env": "KEY"}}, "permissions": {"threads:fly": "x"}}"#,
                "unknown action",
            ),
            (r#"{"jwt": {"algorithm": "HS999"}}"#, "not one of"),
            (
                r#"{"jwt": {"algorithm": "HS256", "secret_env": "KEY"}}"#,
                "shorter than 32 bytes",
            ),
            (
                r#"{"jwt": {"algorithm": "RS256", "secret_env": "KEY"}}"#,
                "takes public_key_file",
            ),
            (
                r#"{"jwt": {"algorithm": "ES256", "public_key_file": "no/such.pem"}}"#,
                "cannot read",
            ),
        ] {
            let message = refusal(text);
            assert!(message.contains(wanted), "{text}: {message}");
        }
        assert!(
            serde_json::from_str::<AuthBlock>(r#"{"scoping": "everyone"}"#).is_err(),
            "an unknown scoping is refused"
        );
    }

    #[test]
    fn an_empty_block_is_no_auth() {
        assert!(matches!(
            resolve(&AuthBlock::default(), Path::new("."), &lookup),
            Ok(None)
        ));
    }

    const SECRET: &str = "a-shared-secret-of-at-least-32-bytes!";

    fn hs256() -> BuiltinAuthenticator {
        let block = block(
            r#"{"jwt": {"algorithm": "HS256", "secret_env": "SECRET", "audience": "agents",
                "issuer": "https://id.example", "leeway_seconds": 0}}"#,
        );
        let jwt = block.jwt.as_ref().expect("a jwt block");
        let lookup = |name: &str| (name == "SECRET").then(|| SECRET.to_owned());
        let jwt = Jwt::resolve(jwt, Path::new("."), &lookup).expect("a verifier");
        BuiltinAuthenticator {
            keys: Vec::new(),
            jwt: Some(jwt),
        }
    }

    fn token(claims: Value, secret: &str) -> String {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .expect("a token")
    }

    fn bearer(token: &str) -> Parts {
        let request = axum::http::Request::builder()
            .header("authorization", format!("Bearer {token}"))
            .body(())
            .expect("a request");
        request.into_parts().0
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_jwt_is_checked_for_signature_expiry_audience_issuer_and_identity() {
        let authenticator = hs256();
        let claims = |changes: Value| {
            let mut claims = json!({
                "sub": "ada", "aud": "agents", "iss": "https://id.example",
                "exp": now() + 600, "permissions": "read write", "name": "Ada",
            });
            if let (Value::Object(claims), Value::Object(changes)) = (&mut claims, changes) {
                claims.extend(changes);
            }
            claims
        };
        let principal = authenticator
            .authenticate(&bearer(&token(claims(json!({})), SECRET)))
            .await
            .expect("a valid token");
        assert_eq!(principal.identity, "ada");
        assert_eq!(principal.permissions, vec!["read", "write"]);
        assert_eq!(principal.display_name.as_deref(), Some("Ada"));
        for (changes, secret, reason) in [
            (json!({"exp": now() - 60}), SECRET, "Token expired"),
            (
                json!({"aud": "others"}),
                SECRET,
                "Token audience not accepted",
            ),
            (
                json!({"iss": "https://evil"}),
                SECRET,
                "Token issuer not accepted",
            ),
            (
                json!({}),
                "another-secret-of-at-least-32-bytes!!",
                "Token signature is invalid",
            ),
            (json!({"sub": null}), SECRET, "identity claim 'sub'"),
            (json!({"aud": null}), SECRET, "Token lacks a required claim"),
            (json!({"iss": null}), SECRET, "Token lacks a required claim"),
        ] {
            let refused = authenticator
                .authenticate(&bearer(&token(claims(changes.clone()), secret)))
                .await
                .expect_err("refused");
            assert!(
                refused.message.contains(reason),
                "{changes}: {}",
                refused.message
            );
            assert!(
                refused
                    .challenge
                    .is_some_and(|challenge| challenge.contains("invalid_token"))
            );
        }
        let missing = authenticator
            .authenticate(&axum::http::Request::new(()).into_parts().0)
            .await
            .expect_err("refused");
        assert!(missing.message.starts_with("Missing credentials"));
    }

    #[test]
    fn identities_map_to_distinct_namespace_labels() {
        assert_eq!(namespace_label("a.b"), "a%2Eb");
        assert_ne!(namespace_label("a%2Eb"), namespace_label("a.b"));
        assert!(!namespace_label("x.y.z").contains('.'));
    }
}
