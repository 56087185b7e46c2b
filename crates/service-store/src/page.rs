//! Page bounds (SPEC "Limits"): one place decides how many rows a call may return.

use crate::{StoreError, StoreResult};

/// Default of SERVICE_MAX_PAGE_SIZE.
pub const DEFAULT_MAX_PAGE_SIZE: usize = 1000;

/// The largest `limit` a client may send to a search; above it the request is rejected.
pub const MAX_CLIENT_LIMIT: usize = 1000;

/// The page bounds a driver enforces; SERVICE_MAX_PAGE_SIZE, also a constructor option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLimits {
    max_page_size: usize,
}

impl Default for PageLimits {
    fn default() -> Self {
        Self {
            max_page_size: DEFAULT_MAX_PAGE_SIZE,
        }
    }
}

impl PageLimits {
    /// Bounds with `max_page_size` as the largest page (at least 1).
    pub fn new(max_page_size: usize) -> Self {
        Self {
            max_page_size: max_page_size.max(1),
        }
    }

    /// The largest page any list returns.
    pub fn max_page_size(self) -> usize {
        self.max_page_size
    }

    /// Effective limit of a search: above 1000 is rejected, omitted means the max page
    /// size, and a lower max page size silently clamps.
    pub fn search(self, limit: Option<usize>) -> StoreResult<usize> {
        match limit {
            Some(limit) if limit > MAX_CLIENT_LIMIT => Err(StoreError::invalid(format!(
                "{limit} is greater than the maximum of {MAX_CLIENT_LIMIT}"
            ))),
            Some(limit) => Ok(limit.min(self.max_page_size)),
            None => Ok(self.max_page_size),
        }
    }

    /// Effective limit of the namespace list: above 1000 is clamped, not rejected, and
    /// the max page size applies.
    pub fn namespaces(self, limit: Option<usize>) -> usize {
        limit
            .unwrap_or(self.max_page_size)
            .min(MAX_CLIENT_LIMIT)
            .min(self.max_page_size)
    }

    /// Effective limit of a thread's run list: above 1000 is clamped; omitted means
    /// every row, because the driver does not bound that list.
    pub fn runs(self, limit: Option<usize>) -> Option<usize> {
        limit.map(|limit| limit.min(MAX_CLIENT_LIMIT))
    }

    /// Effective limit of an internal list that must stay bounded (active runs, due
    /// rows, expired rows): never more than the max page size.
    pub fn bounded(self, limit: Option<usize>) -> usize {
        limit.unwrap_or(self.max_page_size).min(self.max_page_size)
    }
}

/// Applies `offset` then `limit` to rows already filtered and sorted.
pub fn paginate<T>(
    rows: impl IntoIterator<Item = T>,
    offset: usize,
    limit: Option<usize>,
) -> Vec<T> {
    let rows = rows.into_iter().skip(offset);
    match limit {
        Some(limit) => rows.take(limit).collect(),
        None => rows.collect(),
    }
}
