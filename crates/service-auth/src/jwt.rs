//! Bearer JWTs: checked against static keys and a remote JWK Set, picked by the
//! token's `alg` and `kid`; `exp` is required, `iss` and `aud` when configured.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::request::Parts;
use jsonwebtoken::{Algorithm, Validation, errors::ErrorKind as JwtError};
use serde_json::Value;
use service_axum::auth::{Authenticator, Unauthenticated};
use service_engine::auth::Principal;
use service_store::{Clock, SystemClock};
use service_types::Metadata;

use crate::config::{Audience, JwtConfig};
use crate::jwks::{RemoteKeys, jwks_url};
use crate::keys::{ALGORITHMS, VerifyingKey, static_key};
use crate::{AuthConfigError, Identities, credential, missing_credentials};

const DEFAULT_JWKS_CACHE: Duration = Duration::from_secs(600);
const DEFAULT_JWKS_COOLDOWN: Duration = Duration::from_secs(30);

/// A JWT verifier, and an [`Authenticator`] of bearer tokens. The principal's
/// identity is `jwt:<identity claim>` (the bare claim with [`Identities::Shared`]),
/// its permissions the permissions claim, its display name `name`, and every claim is
/// in `extra`.
pub struct Jwt {
    keys: Vec<VerifyingKey>,
    remote: Option<RemoteKeys>,
    /// One per algorithm, as `jsonwebtoken` checks a token against one.
    validations: HashMap<Algorithm, Validation>,
    identity_claim: String,
    permissions_claim: String,
    identities: Identities,
}

impl fmt::Debug for Jwt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jwt")
            .field("keys", &self.keys)
            .field("remote", &self.remote)
            .field("identity_claim", &self.identity_claim)
            .field("identities", &self.identities)
            .finish_non_exhaustive()
    }
}

impl Jwt {
    /// A verifier of an `auth.jwt` block: its secrets are read through `lookup`, its
    /// key files relative to `config_dir`. The JWK Set is not fetched yet
    /// ([`load_keys`](Self::load_keys)).
    pub fn from_config(
        block: &JwtConfig,
        identities: Identities,
        config_dir: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, AuthConfigError> {
        let mut keys = Vec::new();
        match (&block.algorithm, &block.secret_env, &block.public_key_file) {
            (Some(algorithm), secret_env, public_key_file) => keys.push(static_key(
                "auth.jwt",
                algorithm,
                secret_env.as_deref(),
                public_key_file.as_deref(),
                block.kid.as_deref(),
                config_dir,
                lookup,
            )?),
            (None, None, None) if block.kid.is_none() => {}
            (None, _, _) => {
                return Err(AuthConfigError(
                    "auth.jwt: secret_env, public_key_file and kid describe one key and need its algorithm".into(),
                ));
            }
        }
        for (index, key) in block.keys.iter().flatten().enumerate() {
            let at = format!("auth.jwt.keys[{index}]");
            let key = static_key(
                &at,
                &key.algorithm,
                key.secret_env.as_deref(),
                key.public_key_file.as_deref(),
                key.kid.as_deref(),
                config_dir,
                lookup,
            )?;
            if let Some(kid) = &key.kid
                && keys.iter().any(|other| other.kid.as_ref() == Some(kid))
            {
                return Err(AuthConfigError(format!(
                    "{at}.kid {kid:?} is given to another key"
                )));
            }
            keys.push(key);
        }
        let remote = match &block.jwks_url {
            Some(url) => {
                let seconds = |value: Option<u64>, default: Duration, key: &str| match value {
                    Some(0) => Err(AuthConfigError(format!(
                        "auth.jwt.{key} must be at least 1"
                    ))),
                    Some(seconds) => Ok(Duration::from_secs(seconds)),
                    None => Ok(default),
                };
                Some(RemoteKeys::new(
                    jwks_url(url)?,
                    seconds(
                        block.jwks_cache_seconds,
                        DEFAULT_JWKS_CACHE,
                        "jwks_cache_seconds",
                    )?,
                    seconds(
                        block.jwks_cooldown_seconds,
                        DEFAULT_JWKS_COOLDOWN,
                        "jwks_cooldown_seconds",
                    )?,
                    Arc::new(SystemClock),
                )?)
            }
            None if block.jwks_cache_seconds.is_some() || block.jwks_cooldown_seconds.is_some() => {
                return Err(AuthConfigError(
                    "auth.jwt.jwks_cache_seconds and jwks_cooldown_seconds need auth.jwt.jwks_url"
                        .into(),
                ));
            }
            None => None,
        };
        if keys.is_empty() && remote.is_none() {
            return Err(AuthConfigError(
                "auth.jwt: no key; give algorithm with secret_env or public_key_file, keys, or jwks_url".into(),
            ));
        }
        let mut base = Validation::default();
        base.leeway = block.leeway_seconds.unwrap_or(30);
        base.validate_nbf = true;
        // A configured audience or issuer is required, not only checked when present.
        match &block.audience {
            Some(Audience::One(audience)) => base.set_audience(&[audience]),
            Some(Audience::Many(audiences)) => base.set_audience(audiences),
            None => base.validate_aud = false,
        }
        if block.audience.is_some() {
            base.required_spec_claims.insert("aud".into());
        }
        if let Some(issuer) = &block.issuer {
            base.set_issuer(&[issuer]);
            base.required_spec_claims.insert("iss".into());
        }
        let validations = ALGORITHMS
            .iter()
            .map(|algorithm| {
                let mut validation = base.clone();
                validation.algorithms = vec![*algorithm];
                (*algorithm, validation)
            })
            .collect();
        Ok(Self {
            keys,
            remote,
            validations,
            identity_claim: block.identity_claim.clone().unwrap_or_else(|| "sub".into()),
            permissions_claim: block
                .permissions_claim
                .clone()
                .unwrap_or_else(|| "permissions".into()),
            identities,
        })
    }

    /// The clock the JWK Set's cache age and cooldown are measured by (tests move
    /// time by hand); the wall clock by default.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        if let Some(remote) = &mut self.remote {
            remote.set_clock(clock);
        }
        self
    }

    /// Fetches the JWK Set, if there is one: at boot, so a wrong URL or an
    /// unreachable provider stops it with a message naming the URL.
    pub async fn load_keys(&self) -> Result<(), AuthConfigError> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        match remote.load().await {
            Ok(0) => Err(AuthConfigError(format!(
                "auth.jwt.jwks_url: the JWK Set at {} has no key this server can use (RSA, EC P-256 or P-384, OKP Ed25519 signing keys)",
                remote.url()
            ))),
            Ok(_) => Ok(()),
            Err(error) => Err(AuthConfigError(format!(
                "auth.jwt.jwks_url: cannot fetch the JWK Set at {}: {error}",
                remote.url()
            ))),
        }
    }

    /// The principal `token` authenticates, or why not.
    pub async fn verify(&self, token: &str) -> Result<Principal, Unauthenticated> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| invalid_token("Token is malformed"))?;
        let (algorithm, kid) = (header.alg, header.kid.as_deref());
        let accepts = |key: &VerifyingKey| key.accepts(algorithm, kid);
        let mut remote = match &self.remote {
            Some(remote) => remote.current().await,
            None => Arc::from(Vec::new()),
        };
        if let Some(source) = &self.remote
            && !self.keys.iter().chain(remote.iter()).any(accepts)
        {
            // A key rotated in since the last fetch, or a made-up kid: the cooldown
            // tells them apart for the provider's sake.
            remote = source.refreshed(|keys| keys.iter().any(accepts)).await;
        }
        let mut candidates = self
            .keys
            .iter()
            .chain(remote.iter())
            .filter(|key| accepts(key));
        let Some(first) = candidates.next() else {
            let known = self
                .keys
                .iter()
                .chain(remote.iter())
                .any(|key| key.algorithms.contains(&algorithm));
            return Err(invalid_token(if known {
                "Token key is not known"
            } else {
                "Token algorithm not accepted"
            }));
        };
        let validation = self
            .validations
            .get(&algorithm)
            .ok_or_else(|| invalid_token("Token algorithm not accepted"))?;
        for key in std::iter::once(first).chain(candidates) {
            match jsonwebtoken::decode::<Metadata>(token, &key.key, validation) {
                Ok(data) => return self.principal(data.claims),
                // Another key may have signed it.
                Err(error)
                    if matches!(
                        error.kind(),
                        JwtError::InvalidSignature
                            | JwtError::InvalidEcdsaKey
                            | JwtError::InvalidRsaKey(_)
                            | JwtError::InvalidKeyFormat
                    ) => {}
                Err(error) => return Err(invalid_token(refusal(error.kind()))),
            }
        }
        Err(invalid_token("Token signature is invalid"))
    }

    fn principal(&self, claims: Metadata) -> Result<Principal, Unauthenticated> {
        let identity = match claims.get(&self.identity_claim) {
            Some(Value::String(identity)) if !identity.is_empty() => {
                self.identities.of(crate::JWT_SCHEME, identity)
            }
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

/// The client-facing reason a token whose signature checked out is refused.
fn refusal(kind: &JwtError) -> &'static str {
    match kind {
        JwtError::ExpiredSignature => "Token expired",
        JwtError::ImmatureSignature => "Token not valid yet",
        JwtError::InvalidAudience => "Token audience not accepted",
        JwtError::InvalidIssuer => "Token issuer not accepted",
        JwtError::InvalidAlgorithm => "Token algorithm not accepted",
        JwtError::MissingRequiredClaim(_) => "Token lacks a required claim",
        _ => "Token is malformed",
    }
}

/// A 401 for a token, with the Bearer challenge naming the reason.
pub(crate) fn invalid_token(reason: &str) -> Unauthenticated {
    Unauthenticated {
        message: reason.to_owned(),
        challenge: Some(format!(
            "Bearer error=\"invalid_token\", error_description=\"{reason}\""
        )),
    }
}

/// True when `credential` has a JWT's shape (three dot-separated parts).
pub(crate) fn looks_like_jwt(credential: &str) -> bool {
    credential.matches('.').count() == 2
}

#[async_trait]
impl Authenticator for Jwt {
    async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, Unauthenticated> {
        let token = credential(request).ok_or_else(missing_credentials)?;
        if !looks_like_jwt(token) {
            return Err(invalid_token("Invalid credentials"));
        }
        self.verify(token).await.map(Arc::new)
    }
}
