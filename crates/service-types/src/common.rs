use std::fmt;

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};
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

/// Length of `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`.
const ISO_LEN: usize = 32;

impl Timestamp {
    /// Writes the instant in its wire form without going through `fmt` (every answer
    /// carries several; chrono's formatter was ~5 % of a thread creation's CPU). `None`
    /// for the years and leap seconds chrono spells differently.
    fn write_iso(self, buf: &mut [u8; ISO_LEN]) -> Option<&str> {
        let year = u32::try_from(self.0.year())
            .ok()
            .filter(|year| *year <= 9999)?;
        let micros = self.0.nanosecond() / 1000;
        if micros >= 1_000_000 {
            return None;
        }
        fn digits(out: &mut [u8], mut value: u32) {
            for slot in out.iter_mut().rev() {
                *slot = b'0' + (value % 10) as u8;
                value /= 10;
            }
        }
        *buf = *b"0000-00-00T00:00:00.000000+00:00";
        digits(&mut buf[0..4], year);
        digits(&mut buf[5..7], self.0.month());
        digits(&mut buf[8..10], self.0.day());
        digits(&mut buf[11..13], self.0.hour());
        digits(&mut buf[14..16], self.0.minute());
        digits(&mut buf[17..19], self.0.second());
        digits(&mut buf[20..26], micros);
        std::str::from_utf8(buf).ok()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0; ISO_LEN];
        match self.write_iso(&mut buf) {
            Some(text) => f.write_str(text),
            None => f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Micros, false)),
        }
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
        let mut buf = [0; ISO_LEN];
        match self.write_iso(&mut buf) {
            Some(text) => serializer.serialize_str(text),
            None => serializer.collect_str(self),
        }
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Config {
    /// Tags for tracing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Maximum number of supersteps a run may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_limit: Option<u32>,
    /// Free-form values; `thread_id`, `checkpoint_id`, `checkpoint_ns` are known keys.
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configurable: Option<Metadata>,
    /// Unknown keys, kept so they round-trip.
    #[schema(ignore)]
    #[serde(flatten)]
    pub extra: Metadata,
}

/// What to do when creating a resource whose id already exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IfExists {
    /// Answer 409.
    #[default]
    Raise,
    /// Return the existing resource unchanged.
    DoNothing,
}

/// Sort direction of a search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    /// Ascending.
    Asc,
    /// Descending (the default everywhere).
    #[default]
    Desc,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrono_spelling(at: Timestamp) -> String {
        at.0.to_rfc3339_opts(SecondsFormat::Micros, false)
    }

    #[test]
    fn timestamps_are_written_as_chrono_writes_them() {
        let year = |year: i32| {
            chrono::NaiveDate::from_ymd_opt(year, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp_micros()
        };
        // Edges (epoch, before it, year 0 and 9999, past 9999, the range's ends), then
        // a spread of instants over years 0 to 9999.
        let mut instants = vec![
            0,
            -1,
            1,
            year(0),
            year(0) - 1,
            year(10_000) - 1,
            year(10_000),
            i64::MIN,
            i64::MAX,
        ];
        let (low, span) = (year(0), (year(10_000) - year(0)) as u64);
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            instants.push(low + (state % span) as i64);
        }
        for micros in instants {
            let at = Timestamp::from_unix_micros(micros);
            let expected = chrono_spelling(at);
            assert_eq!(at.to_string(), expected);
            assert_eq!(
                serde_json::to_value(at).unwrap(),
                serde_json::Value::String(expected)
            );
        }
    }

    #[test]
    fn a_leap_second_is_written_as_chrono_writes_it() {
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .unwrap()
            .and_hms_micro_opt(23, 59, 59, 1_500_000)
            .unwrap()
            .and_utc();
        let at = Timestamp::new(leap);
        assert_eq!(at.to_string(), chrono_spelling(at));
    }
}
