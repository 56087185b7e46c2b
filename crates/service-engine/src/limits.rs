//! Client-supplied page bounds, checked the way the wire schema checks them.

use service_types::{MAX_TTL_MINUTES, RunCreate, ttl_minutes_valid};

use crate::{EngineError, EngineResult};

/// Largest `limit` a search accepts.
pub const MAX_SEARCH_LIMIT: i64 = 1000;

/// Largest `offset` a page accepts: far past any real listing, and an `offset +
/// limit` that cannot overflow.
pub const MAX_OFFSET: i64 = 1_000_000_000;

/// Longest a run may be delayed (`after_seconds`): one year. A longer delay would
/// keep its thread busy and a waiting client blocked for good.
pub const MAX_AFTER_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// Most supersteps a run may ask for (`config.recursion_limit`).
pub const MAX_RECURSION_LIMIT: u32 = 10_000;

/// A 422 for `field` outside its bounds.
fn out_of_bounds(field: &str, bounds: &str) -> EngineError {
    EngineError::unprocessable(format!("{field} must be {bounds}"))
}

/// The run options a client may send that are numbers: `after_seconds` within 0..=one
/// year, `recursion_limit` within 1..=[`MAX_RECURSION_LIMIT`].
pub fn check_run_numbers(body: &RunCreate) -> EngineResult<()> {
    if let Some(after) = body.after_seconds
        && !(0.0..=MAX_AFTER_SECONDS).contains(&after)
    {
        return Err(out_of_bounds(
            "after_seconds",
            &format!("a number of seconds from 0 to {MAX_AFTER_SECONDS} (one year)"),
        ));
    }
    let recursion_limit = body
        .config
        .as_ref()
        .and_then(|config| config.recursion_limit);
    if let Some(limit) = recursion_limit
        && !(1..=MAX_RECURSION_LIMIT).contains(&limit)
    {
        return Err(out_of_bounds(
            "config.recursion_limit",
            &format!("from 1 to {MAX_RECURSION_LIMIT}"),
        ));
    }
    Ok(())
}

/// A ttl in minutes (threads, store items), as the store bounds it, refused with 422.
pub fn check_ttl_minutes(minutes: Option<f64>) -> EngineResult<()> {
    match minutes {
        Some(minutes) if !ttl_minutes_valid(minutes) => Err(out_of_bounds(
            "ttl",
            &format!("a positive number of minutes, at most {MAX_TTL_MINUTES} (100 years)"),
        )),
        _ => Ok(()),
    }
}

/// A search `limit`: 1..=1000, above the maximum rejected. Absent stays `None`: the
/// store then returns up to its max page size (SPEC "Limits").
pub fn search_limit(limit: Option<i64>) -> EngineResult<Option<usize>> {
    let Some(limit) = limit else {
        return Ok(None);
    };
    if limit > MAX_SEARCH_LIMIT {
        return Err(EngineError::unprocessable(format!(
            "{limit} is greater than the maximum of {MAX_SEARCH_LIMIT}"
        )));
    }
    if limit < 1 {
        return Err(EngineError::unprocessable(format!(
            "{limit} is less than the minimum of 1"
        )));
    }
    Ok(Some(limit as usize))
}

/// A list `limit` that clamps instead of rejecting (run list, namespace list).
pub fn clamped_limit(limit: Option<i64>, default: i64) -> EngineResult<usize> {
    let limit = limit.unwrap_or(default);
    if limit < 1 {
        return Err(EngineError::unprocessable(format!(
            "{limit} is less than the minimum of 1"
        )));
    }
    Ok(limit.min(MAX_SEARCH_LIMIT) as usize)
}

/// An `offset`: 0..=[`MAX_OFFSET`], 0 when absent.
pub fn offset(offset: Option<i64>) -> EngineResult<usize> {
    match offset {
        None => Ok(0),
        Some(offset) if offset > MAX_OFFSET => Err(EngineError::unprocessable(format!(
            "{offset} is greater than the maximum of {MAX_OFFSET}"
        ))),
        Some(offset) if offset >= 0 => Ok(offset as usize),
        Some(offset) => Err(EngineError::unprocessable(format!(
            "{offset} is less than the minimum of 0"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_limit_above_1000_is_rejected() {
        let error = search_limit(Some(1001)).unwrap_err();
        assert_eq!(error.message, "1001 is greater than the maximum of 1000");
        assert_eq!(
            search_limit(None).unwrap(),
            None,
            "the store's max page size"
        );
        assert_eq!(search_limit(Some(1000)).unwrap(), Some(1000));
        assert!(search_limit(Some(0)).is_err());
    }

    #[test]
    fn run_delays_and_recursion_limits_are_bounded() {
        let body = |after: f64, recursion_limit: u32| RunCreate {
            after_seconds: Some(after),
            config: Some(service_types::Config {
                recursion_limit: Some(recursion_limit),
                ..Default::default()
            }),
            ..serde_json::from_value(serde_json::json!({"assistant_id": "a"})).unwrap()
        };
        assert!(check_run_numbers(&body(MAX_AFTER_SECONDS, MAX_RECURSION_LIMIT)).is_ok());
        let error = check_run_numbers(&body(1e30, 25)).unwrap_err();
        assert_eq!(
            error.message,
            "after_seconds must be a number of seconds from 0 to 31536000 (one year)"
        );
        assert!(check_run_numbers(&body(-1.0, 25)).is_err());
        let error = check_run_numbers(&body(0.0, MAX_RECURSION_LIMIT + 1)).unwrap_err();
        assert!(error.message.starts_with("config.recursion_limit must be"));
        assert!(check_run_numbers(&body(0.0, 0)).is_err());
    }

    #[test]
    fn ttls_and_offsets_are_bounded() {
        assert!(check_ttl_minutes(Some(1e30)).is_err());
        assert!(check_ttl_minutes(Some(f64::NAN)).is_err());
        assert!(check_ttl_minutes(Some(0.0)).is_err());
        assert!(check_ttl_minutes(Some(MAX_TTL_MINUTES)).is_ok());
        assert!(offset(Some(MAX_OFFSET + 1)).is_err());
        assert_eq!(offset(Some(MAX_OFFSET)).unwrap(), MAX_OFFSET as usize);
    }

    #[test]
    fn list_limit_above_1000_is_clamped() {
        assert_eq!(clamped_limit(Some(5000), 100).unwrap(), 1000);
        assert!(clamped_limit(Some(0), 100).is_err());
    }
}
