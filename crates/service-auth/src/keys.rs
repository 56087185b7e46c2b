//! Verification keys: a static key of the configuration (a secret or a PEM file) or
//! a JSON Web Key, with the `kid` it answers to and the algorithms it verifies.

use std::fmt;
use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use serde_json::Value;

use crate::AuthConfigError;

/// One key a token may be signed with.
#[derive(Clone)]
pub(crate) struct VerifyingKey {
    /// The `kid` it answers to; a key without one is tried for any token.
    pub(crate) kid: Option<String>,
    /// The algorithms it verifies: one for a static key, or a JWK's `alg`, else every
    /// algorithm of its key type (so an RSA key never checks an HMAC).
    pub(crate) algorithms: Vec<Algorithm>,
    pub(crate) key: DecodingKey,
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

impl VerifyingKey {
    /// True when a token of `algorithm` naming `kid` (if it names one) may be checked
    /// with this key.
    pub(crate) fn accepts(&self, algorithm: Algorithm, kid: Option<&str>) -> bool {
        self.algorithms.contains(&algorithm)
            && match (kid, self.kid.as_deref()) {
                (Some(wanted), Some(own)) => wanted == own,
                _ => true,
            }
    }
}

const HMAC: [Algorithm; 3] = [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];
const RSA: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// Every algorithm a token may be verified with.
pub(crate) const ALGORITHMS: [Algorithm; 12] = [
    Algorithm::HS256,
    Algorithm::HS384,
    Algorithm::HS512,
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// A static key: `algorithm` with the secret in the environment variable
/// `secret_env` (HS*) or the PEM file `public_key_file` (relative to `config_dir`).
/// `at` names the configuration key in errors (`auth.jwt`, `auth.jwt.keys[1]`).
pub(crate) fn static_key(
    at: &str,
    algorithm: &str,
    secret_env: Option<&str>,
    public_key_file: Option<&str>,
    kid: Option<&str>,
    config_dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<VerifyingKey, AuthConfigError> {
    let parsed: Algorithm = algorithm.parse().map_err(|_| {
        AuthConfigError(format!(
            "{at}.algorithm {algorithm:?} is not one of HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA"
        ))
    })?;
    let symmetric = HMAC.contains(&parsed);
    let key = match (symmetric, secret_env, public_key_file) {
        (true, Some(name), None) => {
            let secret = lookup(name)
                .filter(|secret| !secret.is_empty())
                .ok_or_else(|| {
                    AuthConfigError(format!(
                        "{at}.secret_env: the environment variable {name} is not set"
                    ))
                })?;
            if secret.len() < 32 {
                return Err(AuthConfigError(format!(
                    "{at}.secret_env: the secret in {name} is shorter than 32 bytes"
                )));
            }
            DecodingKey::from_secret(secret.as_bytes())
        }
        (false, None, Some(file)) => {
            let path = config_dir.join(file);
            let pem = std::fs::read(&path).map_err(|error| {
                AuthConfigError(format!(
                    "{at}.public_key_file: cannot read {}: {error}",
                    path.display()
                ))
            })?;
            let key = match parsed {
                Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(&pem),
                Algorithm::EdDSA => DecodingKey::from_ed_pem(&pem),
                _ => DecodingKey::from_rsa_pem(&pem),
            };
            key.map_err(|error| {
                AuthConfigError(format!(
                    "{at}.public_key_file: {} is not a {algorithm} public key in PEM: {error}",
                    path.display()
                ))
            })?
        }
        (true, _, _) => {
            return Err(AuthConfigError(format!(
                "{at}: {algorithm} takes secret_env (and no public_key_file)"
            )));
        }
        (false, _, _) => {
            return Err(AuthConfigError(format!(
                "{at}: {algorithm} takes public_key_file (and no secret_env)"
            )));
        }
    };
    if kid.is_some_and(str::is_empty) {
        return Err(AuthConfigError(format!("{at}.kid is empty")));
    }
    Ok(VerifyingKey {
        kid: kid.map(str::to_owned),
        algorithms: vec![parsed],
        key,
    })
}

/// The members of a JWK this server reads (RFC 7517, 7518, 8037); others are ignored.
#[derive(Deserialize)]
struct Jwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default, rename = "use")]
    usage: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

/// A verification key from one JWK, or why it cannot be one: RSA, EC on P-256 or
/// P-384, and OKP Ed25519 signing keys are; a `use` other than `sig`, or an `alg` that
/// is not a signature algorithm of the key's type, is skipped.
fn from_jwk(value: Value) -> Result<VerifyingKey, String> {
    let jwk: Jwk = serde_json::from_value(value).map_err(|error| error.to_string())?;
    if let Some(usage) = jwk.usage.as_deref().filter(|usage| *usage != "sig") {
        return Err(format!("its use is {usage:?}, not \"sig\""));
    }
    let member = |name: &str, value: &Option<String>| {
        value
            .clone()
            .ok_or_else(|| format!("a {} key without {name}", jwk.kty))
    };
    let (family, key): (Vec<Algorithm>, _) = match (jwk.kty.as_str(), jwk.crv.as_deref()) {
        ("RSA", _) => (
            RSA.to_vec(),
            DecodingKey::from_rsa_components(&member("n", &jwk.n)?, &member("e", &jwk.e)?),
        ),
        ("EC", Some("P-256")) => (
            vec![Algorithm::ES256],
            DecodingKey::from_ec_components(&member("x", &jwk.x)?, &member("y", &jwk.y)?),
        ),
        ("EC", Some("P-384")) => (
            vec![Algorithm::ES384],
            DecodingKey::from_ec_components(&member("x", &jwk.x)?, &member("y", &jwk.y)?),
        ),
        ("OKP", Some("Ed25519")) => (
            vec![Algorithm::EdDSA],
            DecodingKey::from_ed_components(&member("x", &jwk.x)?),
        ),
        (kty @ ("EC" | "OKP"), crv) => {
            return Err(format!("{kty} curve {crv:?} is not supported"));
        }
        (kty, _) => return Err(format!("key type {kty:?} is not supported")),
    };
    let key = key.map_err(|error| format!("its key material is malformed: {error}"))?;
    let algorithms = match jwk.alg.as_deref() {
        None => family,
        Some(alg) => match alg.parse::<Algorithm>() {
            Ok(algorithm) if family.contains(&algorithm) => vec![algorithm],
            _ => {
                return Err(format!(
                    "its alg {alg:?} is not a signature algorithm of its key type"
                ));
            }
        },
    };
    Ok(VerifyingKey {
        kid: jwk.kid,
        algorithms,
        key,
    })
}

/// The keys of a JWK Set document, and each key skipped with why (`kid: reason`).
/// A document that is not a JWK Set is an error.
pub(crate) fn parse_set(body: &[u8]) -> Result<(Vec<VerifyingKey>, Vec<String>), String> {
    #[derive(Deserialize)]
    struct JwkSet {
        keys: Vec<Value>,
    }
    let set: JwkSet =
        serde_json::from_slice(body).map_err(|error| format!("not a JWK Set: {error}"))?;
    let mut keys = Vec::new();
    let mut skipped = Vec::new();
    for (index, value) in set.keys.into_iter().enumerate() {
        let name = match value.get("kid").and_then(Value::as_str) {
            Some(kid) => format!("kid {kid:?}"),
            None => format!("key {index}"),
        };
        match from_jwk(value) {
            Ok(key) => keys.push(key),
            Err(reason) => skipped.push(format!("{name}: {reason}")),
        }
    }
    Ok((keys, skipped))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(keys: Value) -> (Vec<VerifyingKey>, Vec<String>) {
        parse_set(json!({ "keys": keys }).to_string().as_bytes()).expect("a set")
    }

    // Public keys in JWK form: only their shape matters here, signatures are checked
    // in jwt.rs's tests.
    const N: &str = "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw";
    const X: &str = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
    const Y: &str = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
    const ED: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

    #[test]
    fn rsa_ec_and_ed25519_signing_keys_are_read_with_the_algorithms_of_their_type() {
        let (keys, skipped) = set(json!([
            {"kty": "RSA", "kid": "r", "n": N, "e": "AQAB", "x5c": ["ignored"]},
            {"kty": "EC", "kid": "e", "crv": "P-256", "x": X, "y": Y, "use": "sig"},
            {"kty": "OKP", "kid": "o", "crv": "Ed25519", "x": ED},
        ]));
        assert!(skipped.is_empty(), "{skipped:?}");
        let kids: Vec<_> = keys.iter().map(|key| key.kid.as_deref()).collect();
        assert_eq!(kids, [Some("r"), Some("e"), Some("o")]);
        assert_eq!(keys[0].algorithms, RSA);
        assert_eq!(keys[1].algorithms, [Algorithm::ES256]);
        assert_eq!(keys[2].algorithms, [Algorithm::EdDSA]);
        assert!(
            !keys[0].accepts(Algorithm::HS256, Some("r")),
            "never an HMAC"
        );
    }

    #[test]
    fn a_jwks_alg_narrows_its_key_and_use_enc_is_skipped() {
        let (keys, skipped) = set(json!([
            {"kty": "RSA", "kid": "pinned", "alg": "PS256", "n": N, "e": "AQAB"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": N, "e": "AQAB"},
            {"kty": "RSA", "kid": "oaep", "alg": "RSA-OAEP", "n": N, "e": "AQAB"},
            {"kty": "EC", "kid": "mismatch", "alg": "ES384", "crv": "P-256", "x": X, "y": Y},
        ]));
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].algorithms, [Algorithm::PS256]);
        assert!(!keys[0].accepts(Algorithm::RS256, Some("pinned")));
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(skipped[0].starts_with("kid \"enc\": its use is \"enc\""));
    }

    #[test]
    fn unsupported_key_types_and_curves_are_skipped_not_fatal() {
        let (keys, skipped) = set(json!([
            {"kty": "oct", "k": "c2VjcmV0"},
            {"kty": "EC", "kid": "p521", "crv": "P-521", "x": X, "y": Y},
            {"kty": "OKP", "crv": "X25519", "x": ED},
            {"kty": "RSA", "kid": "no-n", "e": "AQAB"},
            {"no": "kty"},
            {"kty": "EC", "kid": "ok", "crv": "P-256", "x": X, "y": Y},
        ]));
        assert_eq!(keys.len(), 1);
        assert_eq!(skipped.len(), 5, "{skipped:?}");
        assert!(skipped[0].starts_with("key 0: key type \"oct\""));
        assert!(skipped[3].contains("without n"));
        assert!(parse_set(b"{\"no\": \"keys\"}").is_err());
        assert!(parse_set(b"<html>").is_err());
    }

    #[test]
    fn a_key_with_a_kid_answers_only_to_it_and_one_without_to_any() {
        let (keys, _) = set(json!([
            {"kty": "EC", "kid": "a", "crv": "P-256", "x": X, "y": Y},
            {"kty": "EC", "crv": "P-256", "x": X, "y": Y},
        ]));
        assert!(keys[0].accepts(Algorithm::ES256, Some("a")));
        assert!(keys[0].accepts(Algorithm::ES256, None));
        assert!(!keys[0].accepts(Algorithm::ES256, Some("b")));
        assert!(keys[1].accepts(Algorithm::ES256, Some("b")));
        assert!(!keys[1].accepts(Algorithm::ES384, None));
    }
}
