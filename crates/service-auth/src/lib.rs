//! Built-in authentication and authorization for the agent-run service, for the
//! bundled server and embedders alike (docs/auth.md):
//!
//! - [`ApiKeys`] and [`Jwt`] (static keys and a remote JWK Set) are
//!   [`Authenticator`]s; [`Credentials`] tries a key first, then a token.
//! - [`Policy`] is an [`Authorizer`]: a permission per action, and owner scoping.
//! - [`AuthConfig`] is the configuration file's `auth` block; [`resolve`] checks it
//!   and builds all of the above.
//!
//! Identities of different schemes never collide: an API key named `alice` is the
//! principal `key:alice`, a token whose subject is `alice` is `jwt:alice`, and owner
//! scoping keeps them apart, unless [`Identities::Shared`] says they are one person.

mod api_keys;
mod config;
mod jwks;
mod jwt;
mod keys;
mod policy;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use http::request::Parts;
use service_axum::auth::{Auth, Authenticator, Unauthenticated};
use service_engine::auth::{Authorizer, Principal};

pub use api_keys::ApiKeys;
pub use config::{Audience, AuthConfig, JwtConfig, KeyDetail, KeySpec, Scoping, StaticKeyConfig};
pub use jwt::Jwt;
pub use policy::{OWNER_KEY, Policy};

/// A configuration error, naming the key (`auth.jwt.jwks_url: ...`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthConfigError(pub String);

/// The scheme prefix of an API key's principal (`key:alice`).
pub const API_KEY_SCHEME: &str = "key";
/// The scheme prefix of a token's principal (`jwt:alice`).
pub const JWT_SCHEME: &str = "jwt";

/// How a scheme's own name for a principal becomes [`Principal::identity`], which is
/// what owner scoping and the `Idempotency-Key` layer key on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Identities {
    /// `<scheme>:<name>`: an API key `alice` and a token subject `alice` are two
    /// principals.
    #[default]
    Qualified,
    /// `<name>`: the same text is the same principal, whichever scheme vouched for it
    /// (`auth.shared_identities: true`).
    Shared,
}

impl Identities {
    /// The identity of `name` authenticated by `scheme`.
    pub fn of(self, scheme: &str, name: &str) -> String {
        match self {
            Self::Qualified => format!("{scheme}:{name}"),
            Self::Shared => name.to_owned(),
        }
    }
}

/// The credential a request carries: `x-api-key`, else `Authorization: Bearer`.
fn credential(request: &Parts) -> Option<&str> {
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
    header("x-api-key").or(bearer).map(str::trim)
}

fn missing_credentials() -> Unauthenticated {
    Unauthenticated {
        message: "Missing credentials: send an x-api-key header or Authorization: Bearer".into(),
        challenge: Some("Bearer".into()),
    }
}

/// API keys first (compared in constant time), then a JWT: the bundled server's
/// authenticator.
#[derive(Debug)]
pub struct Credentials {
    api_keys: Option<ApiKeys>,
    jwt: Option<Arc<Jwt>>,
}

impl Credentials {
    /// Keys, tokens, or both.
    pub fn new(api_keys: Option<ApiKeys>, jwt: Option<Arc<Jwt>>) -> Self {
        Self { api_keys, jwt }
    }
}

#[async_trait]
impl Authenticator for Credentials {
    async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, Unauthenticated> {
        let presented = credential(request).ok_or_else(missing_credentials)?;
        if let Some(principal) = self
            .api_keys
            .as_ref()
            .and_then(|keys| keys.principal(presented))
        {
            return Ok(principal);
        }
        match &self.jwt {
            Some(jwt) if jwt::looks_like_jwt(presented) => {
                jwt.verify(presented).await.map(Arc::new)
            }
            Some(_) => Err(jwt::invalid_token("Invalid credentials")),
            None => Err(api_keys::invalid_key()),
        }
    }
}

/// What an `auth` block builds: the router's [`Auth`], and the JWT verifier, whose
/// key set is fetched before serving ([`Resolved::load_keys`]).
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The authenticator and (when something is scoped or required) the authorizer.
    pub auth: Auth,
    jwt: Option<Arc<Jwt>>,
}

impl Resolved {
    /// Fetches the JWK Set, if one is configured: a failure names the URL.
    pub async fn load_keys(&self) -> Result<(), AuthConfigError> {
        match &self.jwt {
            Some(jwt) => jwt.load_keys().await,
            None => Ok(()),
        }
    }
}

/// Builds authentication and authorization from an `auth` block; `None` when the
/// block configures neither keys nor tokens. Every key, secret and file is read and
/// checked here (environment variables through `lookup`, files relative to
/// `config_dir`); the JWK Set is fetched by [`Resolved::load_keys`].
pub fn resolve(
    block: &AuthConfig,
    config_dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Resolved>, AuthConfigError> {
    if block.path.is_some() {
        return Err(AuthConfigError(
            "auth.path (a Python auth handler) is not supported yet; use the auth block's api_keys or jwt (docs/auth.md)".into(),
        ));
    }
    let identities = match block.shared_identities {
        Some(true) => Identities::Shared,
        Some(false) | None => Identities::Qualified,
    };
    let api_keys = match &block.api_keys {
        Some(keys) => {
            Some(ApiKeys::from_config(keys, identities, lookup)?).filter(|keys| !keys.is_empty())
        }
        None => None,
    };
    let jwt = match &block.jwt {
        Some(jwt) => Some(Arc::new(Jwt::from_config(
            jwt, identities, config_dir, lookup,
        )?)),
        None => None,
    };
    let policy = Policy::from_config(
        block.scoping.unwrap_or_default(),
        block.permissions.as_ref().unwrap_or(&Default::default()),
    )?;
    if api_keys.is_none() && jwt.is_none() {
        if !policy.is_open() || block.shared_identities.is_some() {
            return Err(AuthConfigError(
                "auth.scoping, auth.permissions and auth.shared_identities need auth.api_keys or auth.jwt to know who is asking"
                    .into(),
            ));
        }
        return Ok(None);
    }
    // Without scoping or permissions no authorizer runs: a request costs one check.
    let authorizer = (!policy.is_open()).then(|| Arc::new(policy) as Arc<dyn Authorizer>);
    Ok(Some(Resolved {
        auth: Auth {
            authenticator: Some(Arc::new(Credentials::new(api_keys, jwt.clone()))),
            authorizer,
        },
        jwt,
    }))
}
