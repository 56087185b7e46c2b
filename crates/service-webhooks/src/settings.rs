//! The `service.webhooks` configuration block and the SERVICE_WEBHOOK_* environment,
//! read once into [`WebhookSettings`] and validated at boot.

use std::time::Duration;

use serde::Deserialize;

use crate::guard::AddressGuard;

/// Default attempts (the inline one included): 12 span about 34 minutes.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 12;
/// Default delay before the first retry; each later one doubles it.
pub const DEFAULT_INITIAL_DELAY: Duration = Duration::from_secs(1);
/// Default per-POST timeout (SERVICE_WEBHOOK_TIMEOUT_MS).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5000);
/// Default payload cap.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 256 * 1024;
/// Default time a dead delivery keeps its payload.
pub const DEFAULT_RETAIN_HOURS: f64 = 24.0;

/// How webhooks are sent.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookSettings {
    /// Attempts in all, the inline one included; after the last a delivery is dead.
    pub max_attempts: u32,
    /// Delay before the first retry; each later retry waits twice the one before.
    pub initial_delay: Duration,
    /// Signing secrets, newest first: the first signs.
    pub secrets: Vec<String>,
    /// Largest callback body; over it `values`, then `interrupts`, are cut.
    pub max_payload_bytes: usize,
    /// How long a dead delivery keeps its payload for a replay.
    pub retain: Duration,
    /// Hosts webhooks may go to (`None`: any). `*.example.com` matches subdomains; a
    /// host named exactly is also exempt from the address rules.
    pub allowed_hosts: Option<Vec<String>>,
    /// Refuse plain `http://` URLs.
    pub require_https: bool,
    /// Refuse loopback, private, unspecified, multicast and reserved addresses, as
    /// resolved (link-local and metadata addresses are refused regardless).
    pub block_private_targets: bool,
    /// One POST's timeout.
    pub timeout: Duration,
    /// How often the outbox is searched for due deliveries this instance has no
    /// timer for (another instance's, or ones committed before a crash).
    pub poll_interval: Duration,
    /// How often dead deliveries past retention lose their payload.
    pub purge_interval: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            initial_delay: DEFAULT_INITIAL_DELAY,
            secrets: Vec::new(),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            retain: Duration::from_secs_f64(DEFAULT_RETAIN_HOURS * 3600.0),
            allowed_hosts: None,
            require_https: false,
            block_private_targets: false,
            timeout: DEFAULT_TIMEOUT,
            poll_interval: Duration::from_secs(5),
            purge_interval: Duration::from_secs(60),
        }
    }
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("service.webhooks: {0}")]
pub struct SettingsError(String);

/// The `service.webhooks` block as written in the config file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WebhooksBlock {
    /// `retries.max_attempts`, `retries.initial_delay_ms`.
    #[serde(default)]
    pub retries: RetriesBlock,
    /// One signing secret (SERVICE_WEBHOOK_SECRET wins over it).
    pub secret: Option<String>,
    /// Payload cap in bytes.
    pub max_payload_bytes: Option<usize>,
    /// Hours a dead delivery keeps its payload.
    pub retain_hours: Option<f64>,
    /// Host allow-list.
    pub allowed_hosts: Option<Vec<String>>,
    /// Refuse plain-HTTP URLs.
    pub require_https: Option<bool>,
    /// Refuse targets that resolve to loopback, private and other non-public addresses.
    pub block_private_targets: Option<bool>,
}

/// `service.webhooks.retries`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RetriesBlock {
    /// Attempts in all.
    pub max_attempts: Option<u32>,
    /// First retry delay, milliseconds.
    pub initial_delay_ms: Option<u64>,
}

impl WebhookSettings {
    /// Settings from the config block and the environment's SERVICE_WEBHOOK_SECRET
    /// (a comma-separated list, newest first, that wins over the block's `secret`)
    /// and SERVICE_WEBHOOK_TIMEOUT_MS (a malformed value falls back to the default,
    /// as SPEC says of this knob, with a warning returned for the boot to log).
    pub fn resolve(
        block: &WebhooksBlock,
        env_secret: Option<&str>,
        env_timeout_ms: Option<&str>,
    ) -> Result<(Self, Vec<String>), SettingsError> {
        let mut warnings = Vec::new();
        let mut settings = Self::default();
        if let Some(attempts) = block.retries.max_attempts {
            if !(1..=100).contains(&attempts) {
                return Err(SettingsError(format!(
                    "retries.max_attempts must be between 1 and 100, got {attempts}"
                )));
            }
            settings.max_attempts = attempts;
        }
        if let Some(delay) = block.retries.initial_delay_ms {
            if delay == 0 {
                return Err(SettingsError(
                    "retries.initial_delay_ms must be at least 1".into(),
                ));
            }
            settings.initial_delay = Duration::from_millis(delay);
        }
        if let Some(bytes) = block.max_payload_bytes {
            if bytes < 1024 {
                return Err(SettingsError(format!(
                    "max_payload_bytes must be at least 1024, got {bytes}"
                )));
            }
            settings.max_payload_bytes = bytes;
        }
        if let Some(hours) = block.retain_hours {
            if !hours.is_finite() || !(0.0..=24.0 * 365.0).contains(&hours) {
                return Err(SettingsError(format!(
                    "retain_hours must be between 0 and 8760, got {hours}"
                )));
            }
            settings.retain = Duration::from_secs_f64(hours * 3600.0);
        }
        if let Some(hosts) = &block.allowed_hosts {
            let mut patterns = Vec::with_capacity(hosts.len());
            for host in hosts {
                let host = host.trim().to_ascii_lowercase();
                // An IP address as URLs' hosts are compared: IPv6 without brackets.
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
                    patterns.push(ip.to_string());
                    continue;
                }
                let name = host.strip_prefix("*.").unwrap_or(&host);
                if name.is_empty() || name.contains(['/', ':', '*', ' ']) {
                    return Err(SettingsError(format!(
                        "allowed_hosts entry '{host}' is not a host name or IP address (use 'example.com', '*.example.com' or '10.0.0.5')"
                    )));
                }
                patterns.push(host.trim_end_matches('.').to_owned());
            }
            settings.allowed_hosts = Some(patterns);
        }
        settings.require_https = block.require_https.unwrap_or(false);
        settings.block_private_targets = block.block_private_targets.unwrap_or(false);
        settings.secrets = match env_secret {
            Some(list) => {
                let secrets: Vec<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|secret| !secret.is_empty())
                    .map(str::to_owned)
                    .collect();
                if secrets.is_empty() {
                    return Err(SettingsError(
                        "SERVICE_WEBHOOK_SECRET is set but holds no secret".into(),
                    ));
                }
                secrets
            }
            None => match block.secret.as_deref().map(str::trim) {
                Some("") => return Err(SettingsError("secret must not be empty".into())),
                Some(secret) => vec![secret.to_owned()],
                None => Vec::new(),
            },
        };
        if let Some(raw) = env_timeout_ms {
            match raw.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => settings.timeout = Duration::from_millis(ms),
                _ => warnings.push(format!(
                    "SERVICE_WEBHOOK_TIMEOUT_MS={raw:?} is not a positive number of milliseconds; using {}",
                    DEFAULT_TIMEOUT.as_millis()
                )),
            }
        }
        Ok((settings, warnings))
    }

    /// The address rules these settings describe.
    pub(crate) fn address_guard(&self) -> AddressGuard {
        AddressGuard::new(self.block_private_targets, self.allowed_hosts.as_deref())
    }

    /// The delay after failed attempt `attempt` (1-based) before the next, without
    /// jitter: `initial_delay * 2^(attempt-1)`.
    pub fn retry_delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        self.initial_delay.saturating_mul(1 << doublings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(json: &str) -> WebhooksBlock {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn defaults_span_about_34_minutes_over_12_attempts() {
        let settings = WebhookSettings::resolve(&WebhooksBlock::default(), None, None)
            .unwrap()
            .0;
        assert_eq!(settings.max_attempts, 12);
        let total: Duration = (1..settings.max_attempts)
            .map(|attempt| settings.retry_delay(attempt))
            .sum();
        assert_eq!(total.as_secs(), 2047, "about 34 minutes");
        let six: Duration = (1..6).map(|attempt| settings.retry_delay(attempt)).sum();
        assert_eq!(six.as_secs(), 31, "6 attempts take about 31 seconds");
    }

    #[test]
    fn environment_secrets_win_over_the_file_newest_first() {
        let file = block(r#"{"secret": "from-file"}"#);
        let (settings, _) = WebhookSettings::resolve(&file, Some("new, old"), None).unwrap();
        assert_eq!(settings.secrets, ["new", "old"]);
        let (settings, _) = WebhookSettings::resolve(&file, None, None).unwrap();
        assert_eq!(settings.secrets, ["from-file"]);
        assert!(WebhookSettings::resolve(&file, Some(" , "), None).is_err());
    }

    #[test]
    fn a_malformed_timeout_falls_back_to_the_default() {
        let empty = WebhooksBlock::default();
        let (settings, warnings) = WebhookSettings::resolve(&empty, None, Some("abc")).unwrap();
        assert_eq!(settings.timeout, DEFAULT_TIMEOUT);
        assert!(warnings[0].contains("SERVICE_WEBHOOK_TIMEOUT_MS"));
        let (settings, warnings) = WebhookSettings::resolve(&empty, None, Some("250")).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(settings.timeout, Duration::from_millis(250));
    }

    #[test]
    fn bad_values_and_unknown_keys_are_refused() {
        for bad in [
            r#"{"retries": {"max_attempts": 0}}"#,
            r#"{"retries": {"initial_delay_ms": 0}}"#,
            r#"{"max_payload_bytes": 10}"#,
            r#"{"retain_hours": -1}"#,
            r#"{"allowed_hosts": ["https://example.com"]}"#,
            r#"{"secret": ""}"#,
        ] {
            assert!(
                WebhookSettings::resolve(&block(bad), None, None).is_err(),
                "{bad} was accepted"
            );
        }
        assert!(serde_json::from_str::<WebhooksBlock>(r#"{"retry": {}}"#).is_err());
        let (settings, _) = WebhookSettings::resolve(
            &block(
                r#"{"allowed_hosts": ["Example.com.", "*.hooks.dev", "[FD00:EC2::254]", "169.254.169.254"],
                    "require_https": true, "block_private_targets": true}"#,
            ),
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            settings.allowed_hosts.as_deref(),
            Some(
                &[
                    "example.com".to_owned(),
                    "*.hooks.dev".to_owned(),
                    "fd00:ec2::254".to_owned(),
                    "169.254.169.254".to_owned()
                ][..]
            )
        );
        assert!(settings.require_https);
        assert!(settings.block_private_targets);
        let defaults = WebhookSettings::resolve(&WebhooksBlock::default(), None, None)
            .unwrap()
            .0;
        assert!(
            !defaults.block_private_targets,
            "off by default: an upgrade drops no callback"
        );
    }
}
