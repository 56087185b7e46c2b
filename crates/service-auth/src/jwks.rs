//! A remote JSON Web Key Set: fetched over HTTPS, cached, and fetched again when it is
//! older than its cache age or when a token names a key it lacks. Fetches are at
//! least a cooldown apart whatever tokens arrive, so random `kid`s cannot make the
//! server hammer the provider; a failed fetch keeps the keys it had.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use reqwest::Url;
use service_store::Clock;

use crate::AuthConfigError;
use crate::keys::{VerifyingKey, parse_set};

/// A fetch that has not answered by then has failed.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest key set read: providers publish a few keys, a few KiB.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The keys last fetched, and when.
struct Fetched {
    keys: Arc<[VerifyingKey]>,
    /// Unix microseconds of the last successful fetch.
    fetched_at: Option<i64>,
    /// Unix microseconds of the last fetch, successful or not.
    attempted_at: Option<i64>,
}

/// The key set at one URL.
pub(crate) struct RemoteKeys {
    url: Url,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    max_age: Duration,
    cooldown: Duration,
    fetched: RwLock<Fetched>,
    /// Held by the one fetch in flight; others wait for it or use what is cached.
    fetching: tokio::sync::Mutex<()>,
}

impl fmt::Debug for RemoteKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteKeys")
            .field("url", &self.url.as_str())
            .field("max_age", &self.max_age)
            .field("cooldown", &self.cooldown)
            .field("keys", &self.fetched.read().keys.len())
            .finish()
    }
}

/// `jwks_url` as a URL: HTTPS, or plain HTTP to this machine only (keys fetched in
/// the clear from elsewhere could be swapped on the way).
pub(crate) fn jwks_url(text: &str) -> Result<Url, AuthConfigError> {
    let url = Url::parse(text).map_err(|error| {
        AuthConfigError(format!("auth.jwt.jwks_url {text:?} is not a URL: {error}"))
    })?;
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(AuthConfigError(format!(
            "auth.jwt.jwks_url {text:?}: keys are fetched over https (plain http only from this machine)"
        ))),
    }
}

impl RemoteKeys {
    /// The key set at `url`, not fetched yet.
    pub(crate) fn new(
        url: Url,
        max_age: Duration,
        cooldown: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AuthConfigError> {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|error| {
                AuthConfigError(format!(
                    "auth.jwt.jwks_url: cannot build an HTTP client: {error}"
                ))
            })?;
        Ok(Self {
            url,
            client,
            clock,
            max_age,
            cooldown,
            fetched: RwLock::new(Fetched {
                keys: Arc::from(Vec::new()),
                fetched_at: None,
                attempted_at: None,
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// Swaps the clock (tests move time by hand).
    pub(crate) fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    /// The URL, for messages.
    pub(crate) fn url(&self) -> &Url {
        &self.url
    }

    fn now(&self) -> i64 {
        self.clock.now().unix_micros()
    }

    fn elapsed_since(&self, at: Option<i64>, span: Duration) -> bool {
        let span = i64::try_from(span.as_micros()).unwrap_or(i64::MAX);
        at.is_none_or(|at| self.now().saturating_sub(at) >= span)
    }

    /// Fetches the set now, whatever the cooldown (at boot): an error says why, and the
    /// keys held stay.
    pub(crate) async fn load(&self) -> Result<usize, String> {
        let _fetching = self.fetching.lock().await;
        self.fetch_and_keep().await
    }

    /// The keys to check a token with: the cached set, fetched again first when it is
    /// older than the cache age (by this request, unless another is fetching already:
    /// then the set it has is used).
    pub(crate) async fn current(&self) -> Arc<[VerifyingKey]> {
        let (keys, fetched_at) = {
            let fetched = self.fetched.read();
            (Arc::clone(&fetched.keys), fetched.fetched_at)
        };
        if !self.elapsed_since(fetched_at, self.max_age) {
            return keys;
        }
        let Ok(_fetching) = self.fetching.try_lock() else {
            return keys;
        };
        self.fetch_if_cooled_down().await;
        Arc::clone(&self.fetched.read().keys)
    }

    /// The keys once more, after a token named a key none of `keys` has: fetched
    /// again unless `found` now holds for the set (another request fetched it) or the
    /// last fetch is more recent than the cooldown.
    pub(crate) async fn refreshed(
        &self,
        found: impl Fn(&[VerifyingKey]) -> bool,
    ) -> Arc<[VerifyingKey]> {
        let _fetching = self.fetching.lock().await;
        let keys = Arc::clone(&self.fetched.read().keys);
        if found(&keys) {
            return keys;
        }
        self.fetch_if_cooled_down().await;
        Arc::clone(&self.fetched.read().keys)
    }

    /// Called with `fetching` held.
    async fn fetch_if_cooled_down(&self) {
        let attempted_at = self.fetched.read().attempted_at;
        if !self.elapsed_since(attempted_at, self.cooldown) {
            return;
        }
        if let Err(error) = self.fetch_and_keep().await {
            tracing::warn!(
                url = %self.url,
                "cannot fetch the JWK Set, the keys fetched before stay in use: {error}"
            );
        }
    }

    /// Called with `fetching` held: fetches, and keeps the set on success. The number
    /// of keys kept, or why the fetch failed.
    async fn fetch_and_keep(&self) -> Result<usize, String> {
        self.fetched.write().attempted_at = Some(self.now());
        let (keys, skipped) = self.fetch().await?;
        let kids = |keys: &[VerifyingKey]| -> Vec<String> {
            keys.iter()
                .map(|key| key.kid.clone().unwrap_or_else(|| "(no kid)".into()))
                .collect()
        };
        let (before, after) = (kids(&self.fetched.read().keys), kids(&keys));
        if keys.is_empty() {
            tracing::warn!(url = %self.url, ?skipped, "the JWK Set has no key this server can use");
        } else if before != after {
            // Rotations are rare and worth a line: they explain refused tokens.
            tracing::info!(url = %self.url, kids = ?after, ?skipped, "JWK Set keys changed");
        }
        let count = keys.len();
        let mut fetched = self.fetched.write();
        fetched.keys = Arc::from(keys);
        fetched.fetched_at = Some(self.now());
        Ok(count)
    }

    async fn fetch(&self) -> Result<(Vec<VerifyingKey>, Vec<String>), String> {
        let mut response = self
            .client
            .get(self.url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| error.without_url().to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("the answer is {status}"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| error.without_url().to_string())?
        {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(format!("the answer is larger than {MAX_BODY_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        parse_set(&body)
    }
}
