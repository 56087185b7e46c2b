//! The `auth` block: refused at boot naming the key when wrong; static keys (one or
//! several, picked by `kid`); HMAC tokens' claims; and identities that do not collide
//! across schemes unless they are configured to be shared.

mod support;

use serde_json::{Value, json};
use service_auth::{AuthConfig, Resolved, resolve};
use service_axum::auth::Authenticator;
use support::{Signer, bearer, keys_dir, request_with};

const SECRET: &str = "a-shared-secret-of-at-least-32-bytes!";
const KEY: &str = "alice-key-0123456789";

fn lookup(name: &str) -> Option<String> {
    match name {
        "KEY" => Some(KEY.to_owned()),
        "SECRET" => Some(SECRET.to_owned()),
        _ => None,
    }
}

fn block(config: Value) -> AuthConfig {
    serde_json::from_value(config).expect("an auth block")
}

fn resolved(config: Value) -> Resolved {
    match resolve(&block(config.clone()), &keys_dir(), &lookup) {
        Ok(Some(resolved)) => resolved,
        Ok(None) => panic!("{config}: no auth"),
        Err(error) => panic!("{config}: {error}"),
    }
}

fn authenticator(config: Value) -> std::sync::Arc<dyn Authenticator> {
    resolved(config)
        .auth
        .authenticator
        .expect("an authenticator")
}

#[test]
fn bad_blocks_are_refused_at_boot_naming_the_key() {
    for (config, wanted) in [
        (
            json!({"api_keys": {"a": "short"}}),
            "auth.api_keys.a: the key is shorter than 16",
        ),
        (
            json!({"api_keys": {"a": {"env": "MISSING"}}}),
            "MISSING is not set",
        ),
        (
            json!({"api_keys": {"a": {"env": "KEY"}, "b": {"env": "KEY"}}}),
            "another identity",
        ),
        (
            json!({"scoping": "owner"}),
            "need auth.api_keys or auth.jwt",
        ),
        (
            json!({"shared_identities": true}),
            "need auth.api_keys or auth.jwt",
        ),
        (
            json!({"api_keys": {"a": {"env": "KEY"}}, "permissions": {"threads:fly": "x"}}),
            "auth.permissions: unknown action",
        ),
        (json!({"path": "./auth.py:auth"}), "auth.path"),
        (json!({"jwt": {}}), "auth.jwt: no key"),
        (
            json!({"jwt": {"algorithm": "HS999"}}),
            "auth.jwt.algorithm \"HS999\" is not one of",
        ),
        (
            json!({"jwt": {"secret_env": "SECRET"}}),
            "need its algorithm",
        ),
        (
            json!({"jwt": {"algorithm": "HS256", "secret_env": "KEY"}}),
            "auth.jwt.secret_env: the secret in KEY is shorter than 32 bytes",
        ),
        (
            json!({"jwt": {"algorithm": "RS256", "secret_env": "SECRET"}}),
            "takes public_key_file",
        ),
        (
            json!({"jwt": {"algorithm": "ES256", "public_key_file": "no/such.pem"}}),
            "auth.jwt.public_key_file: cannot read",
        ),
        (
            json!({"jwt": {"algorithm": "ES256", "public_key_file": "rsa-public.pem"}}),
            "is not a ES256 public key",
        ),
        (
            json!({"jwt": {"keys": [
                {"algorithm": "ES256", "public_key_file": "ec-a-public.pem", "kid": "a"},
                {"algorithm": "ES256", "public_key_file": "ec-b-public.pem", "kid": "a"},
            ]}}),
            "auth.jwt.keys[1].kid \"a\" is given to another key",
        ),
        (
            json!({"jwt": {"keys": [{"algorithm": "ES256", "secret_env": "SECRET"}]}}),
            "auth.jwt.keys[0]: ES256 takes public_key_file",
        ),
        (
            json!({"jwt": {"algorithm": "HS256", "secret_env": "SECRET", "jwks_cache_seconds": 5}}),
            "need auth.jwt.jwks_url",
        ),
        (
            json!({"jwt": {"jwks_url": "https://id.example/jwks", "jwks_cooldown_seconds": 0}}),
            "auth.jwt.jwks_cooldown_seconds must be at least 1",
        ),
        (
            json!({"jwt": {"jwks_url": "http://id.example/jwks"}}),
            "auth.jwt.jwks_url",
        ),
    ] {
        match resolve(&block(config.clone()), &keys_dir(), &lookup) {
            Err(error) => assert!(error.0.contains(wanted), "{config}: {error}"),
            Ok(_) => panic!("{config} was accepted"),
        }
    }
    for refused in [
        json!({"scoping": "everyone"}),
        json!({"jwt": {"jwks": "https://id.example"}}),
        json!({"jwt": {"keys": [{"algorithm": "HS256", "secret": "inline"}]}}),
    ] {
        assert!(
            serde_json::from_value::<AuthConfig>(refused.clone()).is_err(),
            "{refused}"
        );
    }
}

#[test]
fn an_empty_block_is_no_auth_and_keys_alone_need_no_authorizer() {
    assert!(matches!(
        resolve(&AuthConfig::default(), &keys_dir(), &lookup),
        Ok(None)
    ));
    let keys = resolved(json!({"api_keys": {"alice": KEY}}));
    assert!(keys.auth.authorizer.is_none());
    let scoped = resolved(json!({"api_keys": {"alice": KEY}, "scoping": "owner"}));
    assert!(scoped.auth.authorizer.is_some());
}

#[tokio::test]
async fn an_hmac_token_is_checked_for_signature_expiry_audience_issuer_and_identity() {
    let authenticator = authenticator(json!({"jwt": {
        "algorithm": "HS256", "secret_env": "SECRET", "audience": "agents",
        "issuer": "https://id.example", "leeway_seconds": 0,
    }}));
    let token = |changes: Value, secret: &str| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &support::claims(changes),
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .expect("a token")
    };
    let principal = authenticator
        .authenticate(&bearer(&token(json!({}), SECRET)))
        .await
        .expect("a valid token");
    assert_eq!(principal.identity, "jwt:ada");
    assert_eq!(principal.permissions, vec!["read", "write"]);
    assert_eq!(principal.display_name.as_deref(), Some("Ada"));
    assert_eq!(principal.extra.get("sub"), Some(&json!("ada")));
    for (changes, secret, reason) in [
        (json!({"exp": support::now() - 60}), SECRET, "Token expired"),
        (
            json!({"nbf": support::now() + 60}),
            SECRET,
            "Token not valid yet",
        ),
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
        (
            json!({"sub": null}),
            SECRET,
            "Token lacks the identity claim 'sub'",
        ),
        (json!({"aud": null}), SECRET, "Token lacks a required claim"),
        (json!({"iss": null}), SECRET, "Token lacks a required claim"),
        (json!({"exp": null}), SECRET, "Token lacks a required claim"),
    ] {
        let refused = authenticator
            .authenticate(&bearer(&token(changes.clone(), secret)))
            .await
            .expect_err("refused");
        assert_eq!(refused.message, reason, "{changes}");
        assert!(
            refused
                .challenge
                .is_some_and(|challenge| challenge.contains("invalid_token"))
        );
    }
    for (request, reason) in [
        (
            axum::http::Request::new(()).into_parts().0,
            "Missing credentials",
        ),
        (bearer("not-a-token"), "Invalid credentials"),
        (bearer("a.b.c"), "Token is malformed"),
    ] {
        let refused = authenticator
            .authenticate(&request)
            .await
            .expect_err("refused");
        assert!(refused.message.starts_with(reason), "{}", refused.message);
    }
}

#[tokio::test]
async fn several_static_keys_are_picked_by_kid_or_tried_in_turn() {
    let authenticator = authenticator(json!({"jwt": {
        "algorithm": "ES256", "public_key_file": "ec-a-public.pem", "kid": "a",
        "keys": [
            {"algorithm": "ES256", "public_key_file": "ec-b-public.pem", "kid": "b"},
            {"algorithm": "HS256", "secret_env": "SECRET"},
        ],
        "audience": "agents", "issuer": "https://id.example",
    }}));
    let a = Signer::es256_file("ec-a", Some("a"));
    let b = Signer::es256_file("ec-b", Some("b"));
    for (signer, kid, outcome) in [
        (&a, Some("a"), Ok(())),
        (&b, Some("b"), Ok(())),
        // No kid: every ES256 key is tried.
        (&b, None, Ok(())),
        (&a, Some("b"), Err("Token signature is invalid")),
        (&a, Some("retired"), Err("Token key is not known")),
    ] {
        let token = signer.naming(kid).token(json!({}));
        let answer = authenticator.authenticate(&bearer(&token)).await;
        match (answer, outcome) {
            (Ok(principal), Ok(())) => assert_eq!(principal.identity, "jwt:ada"),
            (Err(refused), Err(reason)) => assert_eq!(refused.message, reason, "{kid:?}"),
            (answer, wanted) => panic!(
                "{kid:?}: {:?} instead of {wanted:?}",
                answer.map(|p| p.identity.clone())
            ),
        }
    }
    // The HMAC key has no kid: it answers to any kid, but only for HS256.
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("whatever".into()),
            ..jsonwebtoken::Header::default()
        },
        &support::claims(json!({})),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("a token");
    assert!(authenticator.authenticate(&bearer(&hmac)).await.is_ok());
    let eddsa = Signer::ed25519("a").token(json!({}));
    let refused = authenticator
        .authenticate(&bearer(&eddsa))
        .await
        .expect_err("refused");
    assert_eq!(refused.message, "Token algorithm not accepted");
}

/// An API key named alice and a token whose subject is alice are two principals, so
/// owner scoping and idempotency keys keep them apart; `shared_identities` makes them
/// one.
#[tokio::test]
async fn an_api_key_and_a_token_of_the_same_name_are_two_principals_unless_shared() {
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &support::claims(json!({"sub": "alice"})),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("a token");
    for (shared, key_identity, token_identity) in [
        (json!(null), "key:alice", "jwt:alice"),
        (json!(false), "key:alice", "jwt:alice"),
        (json!(true), "alice", "alice"),
    ] {
        let mut config = json!({
            "api_keys": {"alice": {"env": "KEY"}},
            "jwt": {"algorithm": "HS256", "secret_env": "SECRET"},
            "scoping": "owner",
        });
        if !shared.is_null() {
            config["shared_identities"] = shared;
        }
        let authenticator = authenticator(config);
        let by_key = authenticator
            .authenticate(&request_with("x-api-key", KEY))
            .await
            .expect("the key");
        let by_token = authenticator
            .authenticate(&bearer(&token))
            .await
            .expect("the token");
        assert_eq!(by_key.identity, key_identity);
        assert_eq!(by_token.identity, token_identity);
    }
}
