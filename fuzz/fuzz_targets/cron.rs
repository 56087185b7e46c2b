//! Cron schedules (SPEC "TTL and schedules" 3): a 5-field expression read in an IANA
//! time zone, and its next firing after a time within a century of 2026, bounded by
//! an `end_time` parsed as a request's is. A firing must lie strictly after the time
//! asked about and not past the end.
//!
//! Input, one field a line: the expression, the time zone (empty: none), seconds from
//! 2026-01-01 (not a number: 0), the end time (empty or absent: none).

#![no_main]

use chrono::{DateTime, TimeDelta};
use libfuzzer_sys::fuzz_target;
use service_store::schedule::Schedule;
use service_types::Timestamp;

const CENTURY_SECONDS: i64 = 100 * 366 * 24 * 3600;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let expression = lines.next().unwrap_or_default();
    let timezone = lines.next().filter(|zone| !zone.is_empty());
    let seconds: i64 = lines.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let end = lines.next().and_then(Timestamp::parse);

    let Ok(schedule) = Schedule::parse(expression, timezone) else {
        return;
    };
    let base = DateTime::from_timestamp(1_767_225_600, 0).expect("2026-01-01");
    let after = Timestamp::new(base + TimeDelta::seconds(seconds % CENTURY_SECONDS));
    if let Some(next) = schedule.next_after(after, end) {
        assert!(
            next > after,
            "{expression:?} fires at or before the time asked about"
        );
        assert!(
            end.is_none_or(|end| next <= end),
            "{expression:?} fires past its end"
        );
    }
});
