//! A remote JWK Set, served over real HTTP: key selection by `kid` and type, rotation
//! without a restart, the cooldown that keeps made-up `kid`s from hammering the
//! provider, the cache age, and a boot that fails naming the URL.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use service_auth::{Identities, Jwt, JwtConfig};
use service_axum::auth::Authenticator;
use service_store::ManualClock;
use service_types::Timestamp;
use support::{JwksServer, Signer, bearer};

fn config(url: &str) -> JwtConfig {
    JwtConfig {
        jwks_url: Some(url.to_owned()),
        issuer: Some("https://id.example".into()),
        audience: Some(service_auth::Audience::One("agents".into())),
        ..JwtConfig::default()
    }
}

/// A verifier of the set at `url`, on a clock moved by hand, its keys loaded.
async fn loaded(url: &str, clock: &Arc<ManualClock>) -> Jwt {
    let jwt = Jwt::from_config(&config(url), Identities::Qualified, Path::new("."), &|_| {
        None
    })
    .expect("a verifier")
    .with_clock(clock.clone());
    jwt.load_keys().await.expect("the set is fetched");
    jwt
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_unix_micros(
        1_000_000_000_000,
    )))
}

async fn refusal(jwt: &Jwt, token: &str) -> String {
    match jwt.authenticate(&bearer(token)).await {
        Ok(principal) => panic!("accepted as {}", principal.identity),
        Err(refused) => refused.message,
    }
}

#[tokio::test]
async fn each_key_type_verifies_tokens_naming_its_kid() {
    let signers = [
        Signer::es256("p256"),
        Signer::es384("p384"),
        Signer::ed25519("ed"),
        Signer::rs256("rsa"),
    ];
    let server = JwksServer::start(&signers.iter().collect::<Vec<_>>()).await;
    let jwt = loaded(&server.url, &clock()).await;
    for signer in &signers {
        let principal = jwt
            .authenticate(&bearer(&signer.token(json!({"sub": "ada"}))))
            .await
            .unwrap_or_else(|refused| panic!("{:?}: {}", signer.kid, refused.message));
        assert_eq!(principal.identity, "jwt:ada");
        assert_eq!(principal.permissions, vec!["read", "write"]);
    }
    // The claims are still checked, whichever key signed.
    let expired = signers[2].token(json!({"exp": support::now() - 120}));
    assert_eq!(refusal(&jwt, &expired).await, "Token expired");
    // A key signs only with its own kid's algorithm: P-256 under the P-384 kid.
    let wrong = signers[0].naming(Some("p384")).token(json!({}));
    assert_eq!(refusal(&jwt, &wrong).await, "Token key is not known");
    assert_eq!(server.hits(), 1, "the cooldown holds off a second fetch");
}

#[tokio::test]
async fn a_rotated_set_is_picked_up_by_a_new_kid_and_the_removed_key_is_refused() {
    let old = Signer::es256("2024");
    let new = Signer::es256("2025");
    let server = JwksServer::start(&[&old]).await;
    let clock = clock();
    let jwt = loaded(&server.url, &clock).await;
    let old_token = old.token(json!({}));
    assert!(jwt.authenticate(&bearer(&old_token)).await.is_ok());

    server.publish(&[&new]);
    clock.advance(Duration::from_secs(31));
    let principal = jwt
        .authenticate(&bearer(&new.token(json!({"sub": "grace"}))))
        .await
        .expect("the new kid fetches the set again");
    assert_eq!(principal.identity, "jwt:grace");
    assert_eq!(server.hits(), 2);
    assert_eq!(refusal(&jwt, &old_token).await, "Token key is not known");
}

#[tokio::test]
async fn made_up_kids_fetch_the_set_at_most_once_per_cooldown() {
    let signer = Signer::es256("real");
    let server = JwksServer::start(&[&signer]).await;
    let clock = clock();
    let jwt = loaded(&server.url, &clock).await;
    clock.advance(Duration::from_secs(31));
    for attempt in 0..20 {
        let forged = signer.naming(Some(&format!("made-up-{attempt}")));
        assert_eq!(
            refusal(&jwt, &forged.token(json!({}))).await,
            "Token key is not known"
        );
    }
    assert_eq!(server.hits(), 2, "one fetch for twenty unknown kids");
    clock.advance(Duration::from_secs(29));
    refusal(&jwt, &signer.naming(Some("again")).token(json!({}))).await;
    assert_eq!(server.hits(), 2, "still within the cooldown");
    clock.advance(Duration::from_secs(1));
    refusal(&jwt, &signer.naming(Some("again")).token(json!({}))).await;
    assert_eq!(server.hits(), 3);
    // Known kids never fetch.
    assert!(
        jwt.authenticate(&bearer(&signer.token(json!({}))))
            .await
            .is_ok()
    );
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn concurrent_unknown_kids_share_one_fetch() {
    let signer = Signer::es256("real");
    let server = JwksServer::start(&[&signer]).await;
    let clock = clock();
    let jwt = Arc::new(loaded(&server.url, &clock).await);
    clock.advance(Duration::from_secs(60));
    let tasks: Vec<_> = (0..16)
        .map(|attempt| {
            let jwt = Arc::clone(&jwt);
            let token = signer
                .naming(Some(&format!("made-up-{attempt}")))
                .token(json!({}));
            tokio::spawn(async move { jwt.verify(&token).await.is_err() })
        })
        .collect();
    for task in tasks {
        assert!(task.await.expect("the task ends"));
    }
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_stale_set_is_fetched_again_and_a_failed_fetch_keeps_the_keys() {
    let signer = Signer::ed25519("ed");
    let server = JwksServer::start(&[&signer]).await;
    let clock = clock();
    let jwt = loaded(&server.url, &clock).await;
    let token = signer.token(json!({}));
    clock.advance(Duration::from_secs(599));
    assert!(jwt.authenticate(&bearer(&token)).await.is_ok());
    assert_eq!(server.hits(), 1, "fresh for ten minutes");

    clock.advance(Duration::from_secs(1));
    server.fail_with(503);
    assert!(
        jwt.authenticate(&bearer(&token)).await.is_ok(),
        "the provider is down: the keys it gave stay"
    );
    assert_eq!(server.hits(), 2);
    assert!(jwt.authenticate(&bearer(&token)).await.is_ok());
    assert_eq!(
        server.hits(),
        2,
        "a failed fetch is not retried before the cooldown"
    );

    server.fail_with(0);
    server.publish(&[]);
    clock.advance(Duration::from_secs(30));
    assert_eq!(refusal(&jwt, &token).await, "Token algorithm not accepted");
    assert_eq!(server.hits(), 3, "an empty set is the provider's word");
}

#[tokio::test]
async fn the_first_fetch_failing_stops_the_boot_naming_the_url() {
    let server = JwksServer::start(&[]).await;
    let jwt = |url: &str| {
        Jwt::from_config(&config(url), Identities::Qualified, Path::new("."), &|_| {
            None
        })
        .expect("a verifier")
    };
    for (status, document, wanted) in [
        (500, json!(null), "500"),
        (0, json!({"not": "a set"}), "not a JWK Set"),
        (
            0,
            json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}),
            "no key this server can use",
        ),
    ] {
        server.fail_with(status);
        server.publish_raw(document);
        let error = jwt(&server.url).load_keys().await.expect_err("refused").0;
        assert!(
            error.contains(&server.url) && error.contains(wanted),
            "{error}"
        );
        assert!(error.starts_with("auth.jwt.jwks_url"), "{error}");
    }
    let closed = "http://127.0.0.1:9/jwks.json";
    let error = jwt(closed).load_keys().await.expect_err("refused").0;
    assert!(error.contains(closed), "{error}");
}

#[test]
fn a_jwks_url_is_https_or_on_this_machine() {
    for (url, accepted) in [
        ("https://tenant.auth0.com/.well-known/jwks.json", true),
        ("http://127.0.0.1:8080/jwks", true),
        ("http://localhost/jwks", true),
        ("http://[::1]/jwks", true),
        ("http://id.example.com/jwks", false),
        ("ftp://id.example.com/jwks", false),
        ("not a url", false),
    ] {
        let built = Jwt::from_config(&config(url), Identities::Qualified, Path::new("."), &|_| {
            None
        });
        assert_eq!(built.is_ok(), accepted, "{url}");
        if let Err(error) = built {
            assert!(error.0.starts_with("auth.jwt.jwks_url"), "{error}");
        }
    }
}
