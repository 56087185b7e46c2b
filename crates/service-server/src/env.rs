//! The environment knobs (SERVICE_*, DB_*, PORT, DATABASE_URL, RUST_LOG), read once
//! through a lookup function (so tests never touch the process environment) and
//! validated at boot: a malformed value or an unknown SERVICE_ variable stops the boot
//! with a message naming it. The request-log
//! switch falls back to the mode's default instead, as SPEC says.

use std::time::Duration;

/// A boot-time configuration error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The SERVICE_ knobs this server reads.
const SUPPORTED: [&str; 33] = [
    "SERVICE_RUN_CONCURRENCY",
    "SERVICE_RUN_TIMEOUT_MS",
    "SERVICE_SHUTDOWN_GRACE_MS",
    "SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN",
    "SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS",
    "SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES",
    "SERVICE_MAX_PAGE_SIZE",
    "SERVICE_MAX_BODY_BYTES",
    "SERVICE_MAX_BATCH_RUNS",
    "SERVICE_MAX_WS_SUBSCRIPTIONS",
    "SERVICE_WS_REPLAY_MAX_EVENTS",
    "SERVICE_WS_REPLAY_MAX_BYTES",
    "SERVICE_MAX_STREAMS_PER_PRINCIPAL",
    "SERVICE_MAX_STREAMS_PER_ADDRESS",
    "SERVICE_MAX_URI_BYTES",
    "SERVICE_MAX_HEADERS",
    "SERVICE_MAX_HEADER_BYTES",
    "SERVICE_HEADER_READ_TIMEOUT_MS",
    "SERVICE_BODY_READ_TIMEOUT_MS",
    "SERVICE_SEND_TIMEOUT_MS",
    "SERVICE_REQUEST_LOG",
    "SERVICE_WEBHOOK_SECRET",
    "SERVICE_WEBHOOK_TIMEOUT_MS",
    "SERVICE_QUEUE_STREAM_MAXLEN",
    "SERVICE_STREAM_BUFFER_FRAMES",
    "SERVICE_PYTHON",
    "SERVICE_PYTHON_WORKERS",
    "SERVICE_NODE",
    "SERVICE_NODE_WORKERS",
    "SERVICE_HEAP_WARN_PERCENT",
    "SERVICE_HEAP_SAMPLE_MS",
    "SERVICE_METRICS",
    "SERVICE_LOG_FORMAT",
];

/// Knob values; `None` where the variable is unset (or empty).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct EnvKnobs {
    /// PORT.
    pub port: Option<u16>,
    /// DATABASE_URL, else DATABASE_URI.
    pub database_url: Option<String>,
    /// RUST_LOG.
    pub log_filter: Option<String>,
    /// SERVICE_LOG_FORMAT.
    pub log_format: Option<crate::log::LogFormat>,
    /// SERVICE_RUN_CONCURRENCY (alias N_JOBS_PER_WORKER).
    pub run_concurrency: Option<usize>,
    /// SERVICE_RUN_TIMEOUT_MS; `Some(None)` is off.
    pub run_timeout: Option<Option<Duration>>,
    /// SERVICE_SHUTDOWN_GRACE_MS.
    pub shutdown_grace: Option<Duration>,
    /// SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN.
    pub bus_max_frames: Option<usize>,
    /// SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS.
    pub bus_max_retained: Option<usize>,
    /// SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES.
    pub bus_max_retained_bytes: Option<usize>,
    /// SERVICE_MAX_PAGE_SIZE.
    pub max_page_size: Option<usize>,
    /// REDIS_URL: the durable stream bus.
    pub redis_url: Option<String>,
    /// SERVICE_QUEUE_STREAM_MAXLEN (0: no trim).
    pub queue_stream_maxlen: Option<u64>,
    /// SERVICE_STREAM_BUFFER_FRAMES.
    pub stream_buffer_frames: Option<usize>,
    /// SERVICE_MAX_BODY_BYTES.
    pub max_body_bytes: Option<usize>,
    /// SERVICE_MAX_BATCH_RUNS.
    pub max_batch_runs: Option<usize>,
    /// SERVICE_MAX_WS_SUBSCRIPTIONS.
    pub max_ws_subscriptions: Option<usize>,
    /// SERVICE_WS_REPLAY_MAX_EVENTS.
    pub ws_replay_events: Option<usize>,
    /// SERVICE_WS_REPLAY_MAX_BYTES.
    pub ws_replay_bytes: Option<usize>,
    /// SERVICE_MAX_STREAMS_PER_PRINCIPAL.
    pub max_streams_per_principal: Option<usize>,
    /// SERVICE_MAX_STREAMS_PER_ADDRESS (0: no cap).
    pub max_streams_per_address: Option<usize>,
    /// SERVICE_MAX_URI_BYTES.
    pub max_uri_bytes: Option<usize>,
    /// SERVICE_MAX_HEADERS.
    pub max_headers: Option<usize>,
    /// SERVICE_MAX_HEADER_BYTES.
    pub max_header_bytes: Option<usize>,
    /// SERVICE_HEADER_READ_TIMEOUT_MS; `Some(None)` is off.
    pub header_read_timeout: Option<Option<Duration>>,
    /// SERVICE_BODY_READ_TIMEOUT_MS; `Some(None)` is off.
    pub body_read_timeout: Option<Option<Duration>>,
    /// SERVICE_SEND_TIMEOUT_MS; `Some(None)` is off.
    pub send_timeout: Option<Option<Duration>>,
    /// SERVICE_PYTHON: the interpreter of the Python graphs' workers.
    pub python: Option<String>,
    /// SERVICE_PYTHON_WORKERS: how many Python worker processes run.
    pub python_workers: Option<usize>,
    /// SERVICE_NODE: the interpreter of the JS graphs' workers.
    pub node: Option<String>,
    /// SERVICE_NODE_WORKERS: how many Node worker processes run.
    pub node_workers: Option<usize>,
    /// SERVICE_HEAP_WARN_PERCENT: share of the memory limit warned above; 0 is off.
    pub heap_warn_percent: Option<f64>,
    /// SERVICE_HEAP_SAMPLE_MS: how often resident memory is sampled.
    pub heap_sample: Option<Duration>,
    /// SERVICE_METRICS: serve `/metrics` (default: on in `dev`, off in `start`).
    pub metrics: Option<bool>,
    /// SERVICE_REQUEST_LOG (the mode's default on a malformed value).
    pub request_log: Option<bool>,
    /// DB_POOL_MAX: connections per pool.
    pub db_pool_max: Option<usize>,
    /// DB_CONNECTION_TIMEOUT_MS: wait for a free connection; `Some(None)` waits forever.
    pub db_connection_timeout: Option<Option<Duration>>,
    /// DB_IDLE_TIMEOUT_MS: idle pooled connection lifetime.
    pub db_idle_timeout: Option<Duration>,
    /// DB_STATEMENT_TIMEOUT_MS: one statement; `Some(None)` is off.
    pub db_statement_timeout: Option<Option<Duration>>,
    /// SERVICE_WEBHOOK_SECRET: comma-separated, newest first (checked with the
    /// config file's `service.webhooks` in settings).
    pub webhook_secret: Option<String>,
    /// SERVICE_WEBHOOK_TIMEOUT_MS (the default on a malformed value, as SPEC says).
    pub webhook_timeout_ms: Option<String>,
    /// Values that fell back to a default, to log once logging is set up.
    pub warnings: Vec<String>,
}

fn positive(name: &str, text: &str) -> Result<usize, ConfigError> {
    match text.trim().parse::<usize>() {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(ConfigError(format!(
            "{name} must be a positive integer, got {text:?}"
        ))),
    }
}

fn millis(name: &str, text: &str) -> Result<Duration, ConfigError> {
    text.trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| {
            ConfigError(format!(
                "{name} must be a whole number of milliseconds, got {text:?}"
            ))
        })
}

/// Milliseconds where 0 means off.
fn millis_or_off(name: &str, text: &str) -> Result<Option<Duration>, ConfigError> {
    millis(name, text).map(|duration| (!duration.is_zero()).then_some(duration))
}

fn switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

impl EnvKnobs {
    /// Reads and validates the knobs. `names` lists the variables set (to catch
    /// typos); `lookup` reads one.
    pub(crate) fn read(
        names: impl IntoIterator<Item = String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        for name in names {
            if name.starts_with("SERVICE_") && !SUPPORTED.contains(&name.as_str()) {
                return Err(ConfigError(format!(
                    "unknown environment variable {name}; known SERVICE_ variables: {}",
                    SUPPORTED.join(", ")
                )));
            }
        }
        let mut knobs = Self::default();
        if let Some(text) = get("PORT") {
            knobs.port =
                Some(text.trim().parse().map_err(|_| {
                    ConfigError(format!("PORT must be a port number, got {text:?}"))
                })?);
        }
        knobs.database_url = get("DATABASE_URL").or_else(|| get("DATABASE_URI"));
        knobs.log_filter = get("RUST_LOG");
        if let Some(text) = get("SERVICE_LOG_FORMAT") {
            knobs.log_format = Some(crate::log::LogFormat::parse(&text).ok_or_else(|| {
                ConfigError(format!(
                    "SERVICE_LOG_FORMAT must be text or json, got {text:?}"
                ))
            })?);
        }
        knobs.webhook_secret = get("SERVICE_WEBHOOK_SECRET");
        knobs.webhook_timeout_ms = get("SERVICE_WEBHOOK_TIMEOUT_MS");
        if let Some(text) = get("SERVICE_RUN_CONCURRENCY") {
            knobs.run_concurrency = Some(positive("SERVICE_RUN_CONCURRENCY", &text)?);
        } else if let Some(text) = get("N_JOBS_PER_WORKER") {
            knobs.run_concurrency = Some(positive("N_JOBS_PER_WORKER", &text)?);
        }
        if let Some(text) = get("SERVICE_RUN_TIMEOUT_MS") {
            knobs.run_timeout = Some(millis_or_off("SERVICE_RUN_TIMEOUT_MS", &text)?);
        }
        if let Some(text) = get("SERVICE_SHUTDOWN_GRACE_MS") {
            knobs.shutdown_grace = Some(millis("SERVICE_SHUTDOWN_GRACE_MS", &text)?);
        }
        if let Some(text) = get("SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN") {
            knobs.bus_max_frames = Some(positive("SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN", &text)?);
        }
        if let Some(text) = get("SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS") {
            knobs.bus_max_retained = Some(positive("SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS", &text)?);
        }
        if let Some(text) = get("SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES") {
            knobs.bus_max_retained_bytes =
                Some(positive("SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES", &text)?);
        }
        if let Some(text) = get("SERVICE_MAX_PAGE_SIZE") {
            knobs.max_page_size = Some(positive("SERVICE_MAX_PAGE_SIZE", &text)?);
        }
        knobs.redis_url = get("REDIS_URL");
        knobs.python = get("SERVICE_PYTHON");
        if let Some(text) = get("SERVICE_PYTHON_WORKERS") {
            knobs.python_workers = Some(positive("SERVICE_PYTHON_WORKERS", &text)?);
        }
        knobs.node = get("SERVICE_NODE");
        if let Some(text) = get("SERVICE_NODE_WORKERS") {
            knobs.node_workers = Some(positive("SERVICE_NODE_WORKERS", &text)?);
        }
        if let Some(text) = get("SERVICE_QUEUE_STREAM_MAXLEN") {
            knobs.queue_stream_maxlen = Some(text.trim().parse().map_err(|_| {
                ConfigError(format!(
                    "SERVICE_QUEUE_STREAM_MAXLEN must be a whole number of frames (0: no cap), got {text:?}"
                ))
            })?);
        }
        if let Some(text) = get("SERVICE_STREAM_BUFFER_FRAMES") {
            knobs.stream_buffer_frames = Some(positive("SERVICE_STREAM_BUFFER_FRAMES", &text)?);
        }
        if let Some(text) = get("SERVICE_MAX_BODY_BYTES") {
            knobs.max_body_bytes = Some(positive("SERVICE_MAX_BODY_BYTES", &text)?);
        }
        let caps = [
            ("SERVICE_MAX_BATCH_RUNS", &mut knobs.max_batch_runs),
            (
                "SERVICE_MAX_WS_SUBSCRIPTIONS",
                &mut knobs.max_ws_subscriptions,
            ),
            ("SERVICE_WS_REPLAY_MAX_EVENTS", &mut knobs.ws_replay_events),
            ("SERVICE_WS_REPLAY_MAX_BYTES", &mut knobs.ws_replay_bytes),
            (
                "SERVICE_MAX_STREAMS_PER_PRINCIPAL",
                &mut knobs.max_streams_per_principal,
            ),
            ("SERVICE_MAX_URI_BYTES", &mut knobs.max_uri_bytes),
            ("SERVICE_MAX_HEADERS", &mut knobs.max_headers),
            ("SERVICE_MAX_HEADER_BYTES", &mut knobs.max_header_bytes),
        ];
        for (name, knob) in caps {
            if let Some(text) = get(name) {
                *knob = Some(positive(name, &text)?);
            }
        }
        if let Some(text) = get("SERVICE_MAX_STREAMS_PER_ADDRESS") {
            knobs.max_streams_per_address = Some(text.trim().parse().map_err(|_| {
                ConfigError(format!(
                    "SERVICE_MAX_STREAMS_PER_ADDRESS must be a whole number (0: no cap), got {text:?}"
                ))
            })?);
        }
        for (name, knob) in [
            (
                "SERVICE_HEADER_READ_TIMEOUT_MS",
                &mut knobs.header_read_timeout,
            ),
            ("SERVICE_BODY_READ_TIMEOUT_MS", &mut knobs.body_read_timeout),
            ("SERVICE_SEND_TIMEOUT_MS", &mut knobs.send_timeout),
        ] {
            if let Some(text) = get(name) {
                *knob = Some(millis_or_off(name, &text)?);
            }
        }
        if let Some(text) = get("DB_POOL_MAX") {
            knobs.db_pool_max = Some(positive("DB_POOL_MAX", &text)?);
        }
        if let Some(text) = get("DB_CONNECTION_TIMEOUT_MS") {
            knobs.db_connection_timeout = Some(millis_or_off("DB_CONNECTION_TIMEOUT_MS", &text)?);
        }
        if let Some(text) = get("DB_IDLE_TIMEOUT_MS") {
            knobs.db_idle_timeout = Some(millis("DB_IDLE_TIMEOUT_MS", &text)?);
        }
        if let Some(text) = get("DB_STATEMENT_TIMEOUT_MS") {
            knobs.db_statement_timeout = Some(millis_or_off("DB_STATEMENT_TIMEOUT_MS", &text)?);
        }
        if let Some(text) = get("SERVICE_HEAP_WARN_PERCENT") {
            knobs.heap_warn_percent = Some(
                text.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|percent| (0.0..=100.0).contains(percent))
                    .ok_or_else(|| {
                        ConfigError(format!(
                            "SERVICE_HEAP_WARN_PERCENT must be a percentage from 0 (off) to 100, got {text:?}"
                        ))
                    })?,
            );
        }
        if let Some(text) = get("SERVICE_HEAP_SAMPLE_MS") {
            knobs.heap_sample = Some(Duration::from_millis(positive(
                "SERVICE_HEAP_SAMPLE_MS",
                &text,
            )? as u64));
        }
        if let Some(text) = get("SERVICE_METRICS") {
            knobs.metrics = Some(switch(&text).ok_or_else(|| {
                ConfigError(format!("SERVICE_METRICS must be on or off, got {text:?}"))
            })?);
        }
        if let Some(text) = get("SERVICE_REQUEST_LOG") {
            knobs.request_log = switch(&text);
            if knobs.request_log.is_none() {
                knobs.warnings.push(format!(
                    "SERVICE_REQUEST_LOG={text:?} is not a switch; using the mode's default"
                ));
            }
        }
        Ok(knobs)
    }
}

/// A request head must arrive within this by default: long for any real client,
/// short enough that a slow-loris client holds each connection only briefly.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// A request body must arrive within this of its head by default: a 25 MiB body
/// (the default size cap) at half a megabyte a second, while a client trickling a
/// body holds its connection for a minute at most.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// A response write may make no progress this long by default: far beyond a slow
/// network, yet a client that stopped reading lets its connection go in a minute.
const SEND_TIMEOUT: Duration = Duration::from_secs(60);

impl EnvKnobs {
    /// The caps on one client, from their knobs.
    pub(crate) fn client_limits(&self) -> service_axum::ClientLimits {
        let defaults = service_axum::ClientLimits::default();
        service_axum::ClientLimits {
            max_batch_runs: self.max_batch_runs.unwrap_or(defaults.max_batch_runs),
            max_ws_subscriptions: self
                .max_ws_subscriptions
                .unwrap_or(defaults.max_ws_subscriptions),
            ws_replay_events: self.ws_replay_events.unwrap_or(defaults.ws_replay_events),
            ws_replay_bytes: self.ws_replay_bytes.unwrap_or(defaults.ws_replay_bytes),
            max_streams_per_principal: self
                .max_streams_per_principal
                .unwrap_or(defaults.max_streams_per_principal),
            max_streams_per_address: self
                .max_streams_per_address
                .unwrap_or(defaults.max_streams_per_address),
            max_uri_bytes: self.max_uri_bytes.unwrap_or(defaults.max_uri_bytes),
            max_headers: self.max_headers.unwrap_or(defaults.max_headers),
            max_header_bytes: self.max_header_bytes.unwrap_or(defaults.max_header_bytes),
        }
    }

    /// How connections are held to account, from their knobs.
    pub(crate) fn connections(&self) -> crate::listen::Connections {
        let limits = self.client_limits();
        crate::listen::Connections {
            header_read_timeout: self
                .header_read_timeout
                .unwrap_or(Some(HEADER_READ_TIMEOUT)),
            body_read_timeout: self.body_read_timeout.unwrap_or(Some(BODY_READ_TIMEOUT)),
            send_timeout: self.send_timeout.unwrap_or(Some(SEND_TIMEOUT)),
            max_uri_bytes: limits.max_uri_bytes,
            max_headers: limits.max_headers,
            max_header_bytes: limits.max_header_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<EnvKnobs, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        EnvKnobs::read(map.keys().cloned().collect::<Vec<_>>(), |name| {
            map.get(name).cloned()
        })
    }

    #[test]
    fn a_typo_in_a_knob_name_fails_naming_it() {
        let error = read(&[("SERVICE_RUN_CONCURENCY", "4")]).unwrap_err();
        assert!(error.0.contains("SERVICE_RUN_CONCURENCY"));
    }

    #[test]
    fn a_malformed_value_fails_naming_the_variable() {
        let error = read(&[("SERVICE_RUN_CONCURRENCY", "ten")]).unwrap_err();
        assert!(error.0.contains("SERVICE_RUN_CONCURRENCY"));
        assert!(read(&[("SERVICE_MAX_PAGE_SIZE", "0")]).is_err());
        assert!(read(&[("PORT", "http")]).unwrap_err().0.contains("PORT"));
    }

    #[test]
    fn the_heap_knobs_are_read_and_checked() {
        let knobs = read(&[
            ("SERVICE_HEAP_WARN_PERCENT", "0"),
            ("SERVICE_HEAP_SAMPLE_MS", "250"),
        ])
        .unwrap();
        assert_eq!(knobs.heap_warn_percent, Some(0.0));
        assert_eq!(knobs.heap_sample, Some(Duration::from_millis(250)));
        for (name, value) in [
            ("SERVICE_HEAP_WARN_PERCENT", "101"),
            ("SERVICE_HEAP_WARN_PERCENT", "high"),
            ("SERVICE_HEAP_WARN_PERCENT", "NaN"),
            ("SERVICE_HEAP_SAMPLE_MS", "0"),
        ] {
            let error = read(&[(name, value)]).unwrap_err();
            assert!(error.0.contains(name), "{error}");
        }
        // Set but empty is unset.
        assert_eq!(
            read(&[("SERVICE_HEAP_SAMPLE_MS", "")]).unwrap().heap_sample,
            None
        );
        let metrics = read(&[("SERVICE_METRICS", "on")]).unwrap();
        assert_eq!(metrics.metrics, Some(true));
        let error = read(&[("SERVICE_METRICS", "maybe")]).unwrap_err();
        assert!(error.0.contains("SERVICE_METRICS"), "{error}");
        let fraction = read(&[("SERVICE_HEAP_WARN_PERCENT", "0.5")]).unwrap();
        assert_eq!(fraction.heap_warn_percent, Some(0.5));
    }

    #[test]
    fn the_durable_bus_knobs_are_read_and_checked() {
        let knobs = read(&[
            ("SERVICE_QUEUE_STREAM_MAXLEN", "0"),
            ("SERVICE_STREAM_BUFFER_FRAMES", "64"),
            ("REDIS_URL", "redis://127.0.0.1:6379"),
        ])
        .unwrap();
        assert_eq!(knobs.queue_stream_maxlen, Some(0));
        assert_eq!(knobs.stream_buffer_frames, Some(64));
        assert_eq!(knobs.redis_url.as_deref(), Some("redis://127.0.0.1:6379"));
        let error = read(&[("SERVICE_QUEUE_STREAM_MAXLEN", "lots")]).unwrap_err();
        assert!(error.0.contains("SERVICE_QUEUE_STREAM_MAXLEN"));
        assert!(read(&[("SERVICE_STREAM_BUFFER_FRAMES", "0")]).is_err());
    }

    #[test]
    fn the_client_caps_are_positive_integers_named_when_malformed() {
        let knobs = read(&[
            ("SERVICE_MAX_BATCH_RUNS", "10"),
            ("SERVICE_MAX_WS_SUBSCRIPTIONS", "20"),
            ("SERVICE_WS_REPLAY_MAX_EVENTS", "30"),
            ("SERVICE_WS_REPLAY_MAX_BYTES", "40"),
            ("SERVICE_MAX_STREAMS_PER_PRINCIPAL", "50"),
        ])
        .unwrap();
        assert_eq!(knobs.max_batch_runs, Some(10));
        assert_eq!(knobs.max_ws_subscriptions, Some(20));
        assert_eq!(knobs.ws_replay_events, Some(30));
        assert_eq!(knobs.ws_replay_bytes, Some(40));
        assert_eq!(knobs.max_streams_per_principal, Some(50));
        for name in [
            "SERVICE_MAX_BATCH_RUNS",
            "SERVICE_MAX_WS_SUBSCRIPTIONS",
            "SERVICE_WS_REPLAY_MAX_EVENTS",
            "SERVICE_WS_REPLAY_MAX_BYTES",
            "SERVICE_MAX_STREAMS_PER_PRINCIPAL",
            "SERVICE_MEMORY_BUS_MAX_RETAINED_BYTES",
        ] {
            for bad in ["0", "many", "-1"] {
                let error = read(&[(name, bad)]).unwrap_err();
                assert!(error.0.contains(name), "{error}");
            }
        }
    }

    #[test]
    fn a_malformed_request_log_switch_falls_back_with_a_warning() {
        let knobs = read(&[("SERVICE_REQUEST_LOG", "maybe")]).unwrap();
        assert_eq!(knobs.request_log, None);
        assert!(knobs.warnings[0].contains("SERVICE_REQUEST_LOG"));
    }

    #[test]
    fn the_concurrency_alias_is_read() {
        let knobs = read(&[("N_JOBS_PER_WORKER", "3")]).unwrap();
        assert_eq!(knobs.run_concurrency, Some(3));
        let knobs = read(&[("N_JOBS_PER_WORKER", "3"), ("SERVICE_RUN_CONCURRENCY", "5")]).unwrap();
        assert_eq!(knobs.run_concurrency, Some(5));
    }

    #[test]
    fn the_database_url_has_an_alias() {
        let knobs = read(&[("DATABASE_URI", "postgres://db/b")]).unwrap();
        assert_eq!(knobs.database_url.as_deref(), Some("postgres://db/b"));
        let knobs = read(&[
            ("DATABASE_URI", "postgres://db/b"),
            ("DATABASE_URL", "postgres://db/a"),
        ])
        .unwrap();
        assert_eq!(knobs.database_url.as_deref(), Some("postgres://db/a"));
    }

    #[test]
    fn database_knobs_are_validated_and_zero_means_off() {
        assert!(
            read(&[("DB_POOL_MAX", "0")])
                .unwrap_err()
                .0
                .contains("DB_POOL_MAX")
        );
        let knobs = read(&[
            ("DB_STATEMENT_TIMEOUT_MS", "0"),
            ("DB_CONNECTION_TIMEOUT_MS", "250"),
        ])
        .unwrap();
        assert_eq!(knobs.db_statement_timeout, Some(None));
        assert_eq!(
            knobs.db_connection_timeout,
            Some(Some(Duration::from_millis(250)))
        );
    }

    #[test]
    fn values_are_read() {
        let knobs = read(&[
            ("SERVICE_RUN_TIMEOUT_MS", "1500"),
            ("SERVICE_SHUTDOWN_GRACE_MS", "100"),
            ("SERVICE_REQUEST_LOG", "off"),
            ("PORT", "9000"),
        ])
        .unwrap();
        assert_eq!(knobs.run_timeout, Some(Some(Duration::from_millis(1500))));
        assert_eq!(knobs.shutdown_grace, Some(Duration::from_millis(100)));
        assert_eq!(knobs.request_log, Some(false));
        assert_eq!(knobs.port, Some(9000));
    }
}
