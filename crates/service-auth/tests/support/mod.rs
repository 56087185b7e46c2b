//! Signing keys, tokens, requests, and a JWK Set served over real HTTP.

#![allow(dead_code, unreachable_pub)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};

use axum::extract::State;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair,
    KeyPair,
};
use serde_json::{Value, json};

/// The test key files.
pub fn keys_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/keys")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(keys_dir().join(name)).expect("a test key file")
}

/// A private key, its algorithm, its `kid`, and its public half as a JWK.
#[derive(Clone)]
pub struct Signer {
    pub kid: Option<String>,
    pub algorithm: Algorithm,
    key: EncodingKey,
    pub jwk: Value,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Signer {
    fn ec(kid: &str, p384: bool) -> Self {
        let (signing, algorithm, crv) = if p384 {
            (&ECDSA_P384_SHA384_FIXED_SIGNING, Algorithm::ES384, "P-384")
        } else {
            (&ECDSA_P256_SHA256_FIXED_SIGNING, Algorithm::ES256, "P-256")
        };
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).expect("a key");
        let pair = EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref(), &rng).expect("a key");
        // An uncompressed point: 0x04, x, y.
        let point = pair.public_key().as_ref();
        let half = (point.len() - 1) / 2;
        Self {
            kid: Some(kid.into()),
            algorithm,
            key: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk: json!({"kty": "EC", "crv": crv, "kid": kid, "use": "sig",
                "x": b64(&point[1..=half]), "y": b64(&point[half + 1..])}),
        }
    }

    /// A fresh P-256 key.
    pub fn es256(kid: &str) -> Self {
        Self::ec(kid, false)
    }

    /// A fresh P-384 key.
    pub fn es384(kid: &str) -> Self {
        Self::ec(kid, true)
    }

    /// A fresh Ed25519 key.
    pub fn ed25519(kid: &str) -> Self {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("a key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("a key");
        Self {
            kid: Some(kid.into()),
            algorithm: Algorithm::EdDSA,
            key: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
                "x": b64(pair.public_key().as_ref())}),
        }
    }

    /// The RSA test key (RS256), with `alg` in its JWK.
    pub fn rs256(kid: &str) -> Self {
        let mut jwk: Value =
            serde_json::from_slice(&fixture("rsa-public.jwk.json")).expect("a JWK");
        jwk["kid"] = json!(kid);
        jwk["alg"] = json!("RS256");
        Self {
            kid: Some(kid.into()),
            algorithm: Algorithm::RS256,
            key: EncodingKey::from_rsa_pem(&fixture("rsa-private.pem")).expect("a key"),
            jwk,
        }
    }

    /// A key of the PEM file `tests/keys/<name>-private.pem` (ES256).
    pub fn es256_file(name: &str, kid: Option<&str>) -> Self {
        Self {
            kid: kid.map(str::to_owned),
            algorithm: Algorithm::ES256,
            key: EncodingKey::from_ec_pem(&fixture(&format!("{name}-private.pem"))).expect("a key"),
            jwk: Value::Null,
        }
    }

    /// The same key sending another `kid` (or none).
    pub fn naming(&self, kid: Option<&str>) -> Self {
        Self {
            kid: kid.map(str::to_owned),
            ..self.clone()
        }
    }

    /// A token of `claims` over [`claims`]'s defaults, signed by this key.
    pub fn token(&self, changes: Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, &claims(changes), &self.key).expect("a token")
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

/// Valid claims (`sub` ada, audience `agents`, issuer `https://id.example`, 10
/// minutes to live) with `changes` over them; a change to null removes the claim.
pub fn claims(changes: Value) -> Value {
    let mut claims = json!({
        "sub": "ada", "aud": "agents", "iss": "https://id.example",
        "exp": now() + 600, "permissions": "read write", "name": "Ada",
    });
    if let (Value::Object(claims), Value::Object(changes)) = (&mut claims, changes) {
        for (name, value) in changes {
            if value.is_null() {
                claims.remove(&name);
            } else {
                claims.insert(name, value);
            }
        }
    }
    claims
}

/// A request carrying `header: value`.
pub fn request_with(header: &str, value: &str) -> Parts {
    axum::http::Request::builder()
        .header(header, value)
        .body(())
        .expect("a request")
        .into_parts()
        .0
}

/// A request carrying `Authorization: Bearer <token>`.
pub fn bearer(token: &str) -> Parts {
    request_with("authorization", &format!("Bearer {token}"))
}

#[derive(Default)]
struct Served {
    set: Mutex<Value>,
    hits: AtomicUsize,
    /// 0: answer the set; else answer this status.
    status: AtomicU16,
}

/// A JWK Set served on 127.0.0.1, counting its fetches; stopped when dropped.
pub struct JwksServer {
    pub url: String,
    served: Arc<Served>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(served): State<Arc<Served>>) -> Response {
    served.hits.fetch_add(1, Ordering::SeqCst);
    match served.status.load(Ordering::SeqCst) {
        0 => axum::Json(served.set.lock().clone()).into_response(),
        status => StatusCode::from_u16(status)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
    }
}

impl JwksServer {
    /// Serves the public keys of `signers`.
    pub async fn start(signers: &[&Signer]) -> Self {
        let served = Arc::new(Served::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().expect("an address")
        );
        let app = axum::Router::new()
            .route("/.well-known/jwks.json", axum::routing::get(answer))
            .with_state(Arc::clone(&served));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let server = Self { url, served, task };
        server.publish(signers);
        server
    }

    /// Serves the public keys of `signers` from now on.
    pub fn publish(&self, signers: &[&Signer]) {
        let keys: Vec<Value> = signers.iter().map(|signer| signer.jwk.clone()).collect();
        *self.served.set.lock() = json!({ "keys": keys });
    }

    /// Serves this document from now on.
    pub fn publish_raw(&self, document: Value) {
        *self.served.set.lock() = document;
    }

    /// Answers `status` instead of the set (0: the set again).
    pub fn fail_with(&self, status: u16) {
        self.served.status.store(status, Ordering::SeqCst);
    }

    /// How many times the set was fetched.
    pub fn hits(&self) -> usize {
        self.served.hits.load(Ordering::SeqCst)
    }
}
