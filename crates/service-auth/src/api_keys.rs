//! API keys: a table of keys, each naming a principal, compared in constant time by
//! SHA-256 digest.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use http::request::Parts;
use service_axum::auth::{Authenticator, Unauthenticated};
use service_engine::auth::Principal;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{KeyDetail, KeySpec};
use crate::{AuthConfigError, Identities, credential, missing_credentials};

/// The shortest key accepted: shorter ones are guessable.
const MIN_KEY_LEN: usize = 16;

/// A key's SHA-256 and the principal it authenticates.
struct ApiKey {
    digest: [u8; 32],
    principal: Arc<Principal>,
}

/// An [`Authenticator`] of API keys, sent as `x-api-key` or `Authorization: Bearer`.
/// A key's principal has the identity `key:<name>` (`<name>` with
/// [`Identities::Shared`]), the name as display name, and the key's permissions.
pub struct ApiKeys {
    keys: Vec<ApiKey>,
    identities: Identities,
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the digests: they identify the keys.
        f.debug_struct("ApiKeys")
            .field("keys", &self.keys.len())
            .field("identities", &self.identities)
            .finish()
    }
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl ApiKeys {
    /// No keys yet; identities written as `identities` says.
    pub fn new(identities: Identities) -> Self {
        Self {
            keys: Vec::new(),
            identities,
        }
    }

    /// Adds `key` for the principal `name`: a key shorter than 16 characters, an empty
    /// name, or a key another name has is refused.
    pub fn with_key(
        mut self,
        name: &str,
        key: &str,
        permissions: Vec<String>,
    ) -> Result<Self, AuthConfigError> {
        let at = format!("auth.api_keys.{name}");
        if name.is_empty() {
            return Err(AuthConfigError(
                "auth.api_keys: an identity is empty".into(),
            ));
        }
        if key.trim().len() < MIN_KEY_LEN {
            return Err(AuthConfigError(format!(
                "{at}: the key is shorter than {MIN_KEY_LEN} characters; use a long random key"
            )));
        }
        let digest = digest(key);
        if self.keys.iter().any(|other| other.digest == digest) {
            return Err(AuthConfigError(format!(
                "{at}: the same key is given to another identity"
            )));
        }
        self.keys.push(ApiKey {
            digest,
            principal: Arc::new(Principal {
                identity: self.identities.of(crate::API_KEY_SCHEME, name),
                permissions,
                display_name: Some(name.to_owned()),
                ..Principal::default()
            }),
        });
        Ok(self)
    }

    /// The keys of an `auth.api_keys` block; a `{"env": ...}` key is read through
    /// `lookup`, and an unset variable is an error naming it.
    pub fn from_config(
        block: &BTreeMap<String, KeySpec>,
        identities: Identities,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, AuthConfigError> {
        let mut keys = Self::new(identities);
        for (name, spec) in block {
            let at = format!("auth.api_keys.{name}");
            let (key, permissions) = match spec {
                KeySpec::Literal(key) => (key.clone(), Vec::new()),
                KeySpec::Detailed(KeyDetail {
                    env: Some(variable),
                    key: None,
                    permissions,
                }) => {
                    let key = lookup(variable).ok_or_else(|| {
                        AuthConfigError(format!(
                            "{at}: the environment variable {variable} is not set"
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
                    return Err(AuthConfigError(format!(
                        "{at}: give the key as a string, {{\"key\": \"...\"}} or {{\"env\": \"NAME\"}}"
                    )));
                }
            };
            keys = keys.with_key(name, &key, permissions)?;
        }
        Ok(keys)
    }

    /// True when no key is configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The principal of `presented`, if it is one of the keys.
    pub fn principal(&self, presented: &str) -> Option<Arc<Principal>> {
        let presented = digest(presented);
        // Every key is compared, so the time taken does not tell which matched.
        let mut matched = None;
        for key in &self.keys {
            if bool::from(key.digest.ct_eq(&presented)) {
                matched = Some(&key.principal);
            }
        }
        matched.map(Arc::clone)
    }
}

/// The refusal of a credential that is no key.
pub(crate) fn invalid_key() -> Unauthenticated {
    Unauthenticated {
        message: "Invalid API key".into(),
        challenge: Some("Bearer error=\"invalid_token\"".into()),
    }
}

#[async_trait]
impl Authenticator for ApiKeys {
    async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, Unauthenticated> {
        let presented = credential(request).ok_or_else(missing_credentials)?;
        self.principal(presented).ok_or_else(invalid_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "alice-key-0123456789";

    #[test]
    fn a_key_names_its_principal_by_scheme_unless_identities_are_shared() {
        let keys = ApiKeys::new(Identities::Qualified)
            .with_key("alice", ALICE, vec!["read".into()])
            .expect("a key");
        let principal = keys.principal(ALICE).expect("alice");
        assert_eq!(principal.identity, "key:alice");
        assert_eq!(principal.display_name.as_deref(), Some("alice"));
        assert_eq!(principal.permissions, vec!["read"]);
        assert!(keys.principal("alice-key-0123456780").is_none());

        let shared = ApiKeys::new(Identities::Shared)
            .with_key("alice", ALICE, Vec::new())
            .expect("a key");
        assert_eq!(shared.principal(ALICE).expect("alice").identity, "alice");
    }

    #[test]
    fn short_and_repeated_keys_are_refused_naming_the_identity() {
        let short = ApiKeys::new(Identities::Qualified).with_key("a", "short", Vec::new());
        assert!(matches!(short, Err(AuthConfigError(m)) if m.contains("auth.api_keys.a")));
        let twice = ApiKeys::new(Identities::Qualified)
            .with_key("a", ALICE, Vec::new())
            .and_then(|keys| keys.with_key("b", ALICE, Vec::new()));
        assert!(matches!(twice, Err(AuthConfigError(m)) if m.contains("another identity")));
    }
}
