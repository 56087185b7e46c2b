//! Cron schedules: 5-field expressions read in an IANA time zone (SPEC "TTL and
//! schedules" 3). One function computes the next occurrence for every driver.

use chrono::TimeZone;
use chrono_tz::Tz;
use service_types::Timestamp;

use crate::{StoreError, StoreResult};

/// A parsed schedule: a 5-field cron expression (sub-minute schedules are refused)
/// and the zone it is read in.
#[derive(Clone, Debug)]
pub struct Schedule {
    cron: croner::Cron,
    zone: Tz,
    /// Whether its day and month fields match any date at all.
    fires: bool,
}

impl Schedule {
    /// Parses `expression` in `timezone` (absent means UTC). Errors carry the
    /// contract's texts.
    pub fn parse(expression: &str, timezone: Option<&str>) -> StoreResult<Self> {
        let zone = match timezone {
            None => Tz::UTC,
            Some(name) => name.parse::<Tz>().map_err(|_| {
                StoreError::invalid(format!(
                    "Invalid timezone: '{name}'. Use IANA timezone format (e.g. 'America/New_York')."
                ))
            })?,
        };
        let fields = expression.split_whitespace().count();
        if fields != 5 {
            return Err(StoreError::invalid(format!(
                "Invalid cron schedule: '{expression}'. Reason: expected 5 fields, found {fields}"
            )));
        }
        // croner skips an empty list item, so a field of only commas parses as a field
        // that matches nothing, and the search for a firing then runs to the year 5000.
        if let Some(field) = expression
            .split_whitespace()
            .find(|field| field.split(',').any(|item| item.is_empty()))
        {
            return Err(StoreError::invalid(format!(
                "Invalid cron schedule: '{expression}'. Reason: the field '{field}' has an empty list item"
            )));
        }
        let cron = croner::Cron::new(expression).parse().map_err(|error| {
            StoreError::invalid(format!(
                "Invalid cron schedule: '{expression}'. Reason: {error}"
            ))
        })?;
        let fires = matches_some_date(&cron);
        Ok(Self { cron, zone, fires })
    }

    /// The first occurrence strictly after `after`, or `None` when the schedule never
    /// fires again or the next firing would be past `end_time`.
    pub fn next_after(&self, after: Timestamp, end_time: Option<Timestamp>) -> Option<Timestamp> {
        // croner looks for a firing day by day up to the year 5000 before it gives up:
        // most of a second of CPU for every such computation.
        if !self.fires {
            return None;
        }
        let local = self
            .zone
            .from_utc_datetime(&after.as_datetime().naive_utc());
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        let next = Timestamp::new(next.with_timezone(&chrono::Utc));
        match end_time {
            Some(end) if next > end => None,
            _ => Some(next),
        }
    }
}

/// Whether a date matches the schedule's day-of-month, month and day-of-week fields
/// (`0 0 30 2 *` matches none; minutes and hours always match some time of a day).
/// Every combination of leap year and weekday comes round within 28 years, so the
/// dates of 2000–2027 decide it, a few thousand checks at most.
fn matches_some_date(cron: &croner::Cron) -> bool {
    let pattern = &cron.pattern;
    (1..=12u32)
        .filter(|&month| pattern.month_match(month).unwrap_or(false))
        .any(|month| {
            (2000..2028).any(|year| {
                (1..=31u32).any(|day| {
                    chrono::NaiveDate::from_ymd_opt(year, month, day).is_some()
                        && pattern.day_match(year, month, day).unwrap_or(false)
                })
            })
        })
}

/// The next firing of `expression` in `timezone` strictly after `after`, bounded by
/// `end_time`.
pub fn next_occurrence(
    expression: &str,
    timezone: Option<&str>,
    after: Timestamp,
    end_time: Option<Timestamp>,
) -> StoreResult<Option<Timestamp>> {
    Ok(Schedule::parse(expression, timezone)?.next_after(after, end_time))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    #[test]
    fn daily_schedule_is_read_in_its_zone() {
        let next = next_occurrence(
            "0 9 * * *",
            Some("America/New_York"),
            at("2025-01-15T00:00:00Z"),
            None,
        );
        assert_eq!(next.unwrap(), Some(at("2025-01-15T14:00:00Z")));
    }

    #[test]
    fn an_empty_list_item_is_refused() {
        // Found by the `cron` fuzz target: it parsed, then never fired, and finding
        // that out took minutes.
        for expression in [", * * *  4", "1,,2 * * * *", "0 9 * * 1,"] {
            let error = Schedule::parse(expression, None).unwrap_err();
            assert!(
                error.message.contains("empty list item"),
                "{}",
                error.message
            );
        }
        assert!(Schedule::parse("0,30 9,17 * * 1-5", None).is_ok());
    }

    #[test]
    fn a_schedule_no_date_matches_never_fires_and_a_rare_one_does() {
        let after = at("2026-03-01T00:00:00Z");
        for never in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "15 10 31 2 *"] {
            assert_eq!(next_occurrence(never, None, after, None).unwrap(), None);
        }
        let leap_day = next_occurrence("0 0 29 2 *", None, after, None).unwrap();
        assert_eq!(leap_day, Some(at("2028-02-29T00:00:00Z")));
        // Day of month or day of week: any Friday of February fires.
        let friday = next_occurrence("0 0 30 2 5", None, after, None).unwrap();
        assert_eq!(friday, Some(at("2027-02-05T00:00:00Z")));
    }

    #[test]
    fn six_fields_are_refused() {
        let error = Schedule::parse("* * * * * *", None).unwrap_err();
        assert!(
            error
                .message
                .starts_with("Invalid cron schedule: '* * * * * *'")
        );
    }
}
