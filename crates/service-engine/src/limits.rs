//! Client-supplied page bounds, checked the way the wire schema checks them.

use crate::{EngineError, EngineResult};

/// Largest `limit` a search accepts.
pub const MAX_SEARCH_LIMIT: i64 = 1000;

/// A search `limit`: 1..=1000, `default` when absent. Above the maximum is rejected.
pub fn search_limit(limit: Option<i64>, default: i64) -> EngineResult<usize> {
    let limit = limit.unwrap_or(default);
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
    Ok(limit as usize)
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

/// An `offset`: non-negative, 0 when absent.
pub fn offset(offset: Option<i64>) -> EngineResult<usize> {
    match offset {
        None => Ok(0),
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
        let error = search_limit(Some(1001), 10).unwrap_err();
        assert_eq!(error.message, "1001 is greater than the maximum of 1000");
        assert_eq!(search_limit(None, 10).unwrap(), 10);
        assert_eq!(search_limit(Some(1000), 10).unwrap(), 1000);
    }

    #[test]
    fn list_limit_above_1000_is_clamped() {
        assert_eq!(clamped_limit(Some(5000), 100).unwrap(), 1000);
        assert!(clamped_limit(Some(0), 100).is_err());
    }
}
