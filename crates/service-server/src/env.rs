//! The SERVICE_* environment knobs, read once through a lookup function (so tests never
//! touch the process environment) and validated at boot: a malformed value or an
//! unknown SERVICE_ variable stops the boot with a message naming it. The webhook
//! timeout and the request-log switch fall back to their defaults instead, as SPEC
//! says.

use std::time::Duration;

/// A boot-time configuration error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Every knob this server reads; any other SERVICE_ variable is a typo.
pub(crate) const KNOWN: [&str; 13] = [
    "SERVICE_RUN_CONCURRENCY",
    "SERVICE_RUN_TIMEOUT_MS",
    "SERVICE_SHUTDOWN_GRACE_MS",
    "SERVICE_WEBHOOK_TIMEOUT_MS",
    "SERVICE_WEBHOOK_SECRET",
    "SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN",
    "SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS",
    "SERVICE_QUEUE_STREAM_MAXLEN",
    "SERVICE_STREAM_BUFFER_FRAMES",
    "SERVICE_MAX_PAGE_SIZE",
    "SERVICE_HEAP_WARN_PERCENT",
    "SERVICE_HEAP_SAMPLE_MS",
    "SERVICE_REQUEST_LOG",
];

/// Knob values; `None` where the variable is unset.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct EnvKnobs {
    /// SERVICE_RUN_CONCURRENCY (alias N_JOBS_PER_WORKER).
    pub run_concurrency: Option<usize>,
    /// SERVICE_RUN_TIMEOUT_MS.
    pub run_timeout: Option<Duration>,
    /// SERVICE_SHUTDOWN_GRACE_MS.
    pub shutdown_grace: Option<Duration>,
    /// SERVICE_WEBHOOK_TIMEOUT_MS (5000 on a malformed value).
    pub webhook_timeout: Duration,
    /// SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN.
    pub bus_max_frames: Option<usize>,
    /// SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS.
    pub bus_max_retained: Option<usize>,
    /// SERVICE_MAX_PAGE_SIZE.
    pub max_page_size: Option<usize>,
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
        for name in names {
            if name.starts_with("SERVICE_") && !KNOWN.contains(&name.as_str()) {
                return Err(ConfigError(format!(
                    "unknown environment variable {name}; known SERVICE_ variables: {}",
                    KNOWN.join(", ")
                )));
            }
        }
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let mut knobs = Self {
            webhook_timeout: Duration::from_millis(5000),
            ..Self::default()
        };
        if let Some(text) = get("SERVICE_RUN_CONCURRENCY") {
            knobs.run_concurrency = Some(positive("SERVICE_RUN_CONCURRENCY", &text)?);
        } else if let Some(text) = get("N_JOBS_PER_WORKER") {
            knobs.run_concurrency = Some(positive("N_JOBS_PER_WORKER", &text)?);
        }
        if let Some(text) = get("SERVICE_RUN_TIMEOUT_MS") {
            let timeout = millis("SERVICE_RUN_TIMEOUT_MS", &text)?;
            knobs.run_timeout = (!timeout.is_zero()).then_some(timeout);
        }
        if let Some(text) = get("SERVICE_SHUTDOWN_GRACE_MS") {
            knobs.shutdown_grace = Some(millis("SERVICE_SHUTDOWN_GRACE_MS", &text)?);
        }
        if let Some(text) = get("SERVICE_WEBHOOK_TIMEOUT_MS") {
            match millis("SERVICE_WEBHOOK_TIMEOUT_MS", &text) {
                Ok(timeout) if !timeout.is_zero() => knobs.webhook_timeout = timeout,
                _ => eprintln!(
                    "warning: SERVICE_WEBHOOK_TIMEOUT_MS={text:?} is not valid; using 5000"
                ),
            }
        }
        if let Some(text) = get("SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN") {
            knobs.bus_max_frames = Some(positive("SERVICE_MEMORY_BUS_MAX_FRAMES_PER_RUN", &text)?);
        }
        if let Some(text) = get("SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS") {
            knobs.bus_max_retained = Some(positive("SERVICE_MEMORY_BUS_MAX_RETAINED_RUNS", &text)?);
        }
        // Checked, not applied: it bounds a subscriber's queue on the durable bus; the
        // in-memory bus has none (subscribers read the run's buffer directly).
        if let Some(text) = get("SERVICE_STREAM_BUFFER_FRAMES") {
            positive("SERVICE_STREAM_BUFFER_FRAMES", &text)?;
        }
        if let Some(text) = get("SERVICE_MAX_PAGE_SIZE") {
            knobs.max_page_size = Some(positive("SERVICE_MAX_PAGE_SIZE", &text)?);
        }
        for name in [
            "SERVICE_QUEUE_STREAM_MAXLEN",
            "SERVICE_HEAP_WARN_PERCENT",
            "SERVICE_HEAP_SAMPLE_MS",
        ] {
            if let Some(text) = get(name) {
                text.trim().parse::<u64>().map_err(|_| {
                    ConfigError(format!(
                        "{name} must be a non-negative integer, got {text:?}"
                    ))
                })?;
            }
        }
        if let Some(text) = get("DB_POOL_MAX") {
            knobs.db_pool_max = Some(positive("DB_POOL_MAX", &text)?);
        }
        if let Some(text) = get("DB_CONNECTION_TIMEOUT_MS") {
            let timeout = millis("DB_CONNECTION_TIMEOUT_MS", &text)?;
            knobs.db_connection_timeout = Some((!timeout.is_zero()).then_some(timeout));
        }
        if let Some(text) = get("DB_IDLE_TIMEOUT_MS") {
            knobs.db_idle_timeout = Some(millis("DB_IDLE_TIMEOUT_MS", &text)?);
        }
        if let Some(text) = get("DB_STATEMENT_TIMEOUT_MS") {
            let timeout = millis("DB_STATEMENT_TIMEOUT_MS", &text)?;
            knobs.db_statement_timeout = Some((!timeout.is_zero()).then_some(timeout));
        }
        if let Some(text) = get("DB_POOL_MAX") {
            knobs.db_pool_max = Some(positive("DB_POOL_MAX", &text)?);
        }
        if let Some(text) = get("DB_CONNECTION_TIMEOUT_MS") {
            let timeout = millis("DB_CONNECTION_TIMEOUT_MS", &text)?;
            knobs.db_connection_timeout = Some((!timeout.is_zero()).then_some(timeout));
        }
        if let Some(text) = get("DB_IDLE_TIMEOUT_MS") {
            knobs.db_idle_timeout = Some(millis("DB_IDLE_TIMEOUT_MS", &text)?);
        }
        if let Some(text) = get("DB_STATEMENT_TIMEOUT_MS") {
            let timeout = millis("DB_STATEMENT_TIMEOUT_MS", &text)?;
            knobs.db_statement_timeout = Some((!timeout.is_zero()).then_some(timeout));
        }
        if let Some(text) = get("SERVICE_REQUEST_LOG") {
            knobs.request_log = switch(&text);
            if knobs.request_log.is_none() {
                eprintln!(
                    "warning: SERVICE_REQUEST_LOG={text:?} is not a switch; using the mode's default"
                );
            }
        }
        Ok(knobs)
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
    }

    #[test]
    fn webhook_timeout_and_request_log_fall_back_instead_of_failing() {
        let knobs = read(&[
            ("SERVICE_WEBHOOK_TIMEOUT_MS", "soon"),
            ("SERVICE_REQUEST_LOG", "maybe"),
        ])
        .unwrap();
        assert_eq!(knobs.webhook_timeout, Duration::from_millis(5000));
        assert_eq!(knobs.request_log, None);
    }

    #[test]
    fn the_concurrency_alias_is_read() {
        let knobs = read(&[("N_JOBS_PER_WORKER", "3")]).unwrap();
        assert_eq!(knobs.run_concurrency, Some(3));
        let knobs = read(&[("N_JOBS_PER_WORKER", "3"), ("SERVICE_RUN_CONCURRENCY", "5")]).unwrap();
        assert_eq!(knobs.run_concurrency, Some(5));
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
        ])
        .unwrap();
        assert_eq!(knobs.run_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(knobs.shutdown_grace, Some(Duration::from_millis(100)));
        assert_eq!(knobs.request_log, Some(false));
    }
}
