use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A free-form JSON object (metadata, configurable, context).
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// A UTC instant, written as ISO 8601 with microseconds and an explicit `+00:00`
/// offset, as the reference server does; any RFC 3339 string is accepted on input.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// Wraps a chrono instant.
    pub fn new(at: DateTime<Utc>) -> Self {
        Self(at)
    }

    /// Microseconds since the Unix epoch; the unit every store keeps.
    pub fn unix_micros(self) -> i64 {
        self.0.timestamp_micros()
    }

    /// The instant `micros` microseconds after the Unix epoch (saturating at the
    /// representable range).
    pub fn from_unix_micros(micros: i64) -> Self {
        Self(
            DateTime::from_timestamp_micros(micros).unwrap_or(if micros < 0 {
                DateTime::<Utc>::MIN_UTC
            } else {
                DateTime::<Utc>::MAX_UTC
            }),
        )
    }

    /// Whole milliseconds since the Unix epoch.
    pub fn unix_millis(self) -> i64 {
        self.0.timestamp_millis()
    }

    /// This instant plus `minutes` (fractional minutes allowed), saturating.
    pub fn plus_minutes(self, minutes: f64) -> Self {
        let micros = (minutes * 60_000_000.0) as i64;
        Self::from_unix_micros(self.unix_micros().saturating_add(micros))
    }

    /// This instant plus `millis`, saturating.
    pub fn plus_millis(self, millis: i64) -> Self {
        Self::from_unix_micros(
            self.unix_micros()
                .saturating_add(millis.saturating_mul(1000)),
        )
    }

    /// The chrono value.
    pub fn as_datetime(self) -> DateTime<Utc> {
        self.0
    }

    /// Parses an RFC 3339 string in any offset.
    pub fn parse(text: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|at| Self(at.with_timezone(&Utc)))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.to_rfc3339_opts(SecondsFormat::Micros, false);
        f.write_str(&text)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(at: DateTime<Utc>) -> Self {
        Self(at)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid RFC 3339 timestamp: {text}")))
    }
}

/// Run configuration: `tags`, `recursion_limit`, `configurable`, and any other keys
/// passed through untouched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Tags for tracing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Maximum number of supersteps a run may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_limit: Option<u32>,
    /// Free-form values; `thread_id`, `checkpoint_id`, `checkpoint_ns` are known keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configurable: Option<Metadata>,
    /// Unknown keys, kept so they round-trip.
    #[serde(flatten)]
    pub extra: Metadata,
}

/// What to do when creating a resource whose id already exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IfExists {
    /// Answer 409.
    #[default]
    Raise,
    /// Return the existing resource unchanged.
    DoNothing,
}

/// Sort direction of a search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    /// Ascending.
    Asc,
    /// Descending (the default everywhere).
    #[default]
    Desc,
}
