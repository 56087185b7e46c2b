//! Namespace rules (SPEC "Namespace rules" 1-5): matching, `max_depth` truncation,
//! de-duplication and ordering, implemented once for every driver.

use std::collections::BTreeSet;

use crate::page::{PageLimits, paginate};
use crate::text::refuse_nul;
use crate::{StoreError, StoreResult};

/// The segment that stands for exactly one segment in a prefix or suffix.
pub const WILDCARD: &str = "*";

/// A namespace listing request (the repository-level `maxDepth` query object).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceQuery {
    /// Anchored at the first segment; omitted matches every namespace.
    pub prefix: Option<Vec<String>>,
    /// Anchored at the last segment.
    pub suffix: Option<Vec<String>>,
    /// Truncate each match to this many segments, then de-duplicate.
    pub max_depth: Option<usize>,
    /// Page size; clamped (never rejected) by [`PageLimits::namespaces`].
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
}

impl NamespaceQuery {
    /// True when `namespace` satisfies the prefix and the suffix.
    pub fn matches(&self, namespace: &[String]) -> bool {
        self.prefix
            .as_deref()
            .is_none_or(|prefix| matches_prefix(namespace, prefix))
            && self
                .suffix
                .as_deref()
                .is_none_or(|suffix| matches_suffix(namespace, suffix))
    }

    /// Rejects a zero `max_depth`, which would truncate every namespace to nothing.
    /// Also refuses a NUL in the prefix or suffix.
    pub fn validate(&self) -> StoreResult<()> {
        if self.max_depth == Some(0) {
            return Err(StoreError::invalid("max_depth must be at least 1"));
        }
        refuse_nul("prefix", &self.prefix)?;
        refuse_nul("suffix", &self.suffix)
    }

    /// Filters, truncates, de-duplicates, sorts and pages candidate namespaces (each
    /// distinct or not); what every driver returns.
    pub fn collect<'a>(
        &self,
        candidates: impl IntoIterator<Item = &'a [String]>,
        limits: PageLimits,
    ) -> StoreResult<Vec<Vec<String>>> {
        self.validate()?;
        let unique: BTreeSet<Vec<String>> = candidates
            .into_iter()
            .filter(|namespace| self.matches(namespace))
            .map(|namespace| truncate(namespace, self.max_depth).to_vec())
            .collect();
        Ok(paginate(
            unique,
            self.offset,
            Some(limits.namespaces(self.limit)),
        ))
    }
}

/// True when `prefix` matches the leading segments of `namespace` (`*` is any one
/// segment); a prefix longer than the namespace never matches.
pub fn matches_prefix(namespace: &[String], prefix: &[String]) -> bool {
    prefix.len() <= namespace.len()
        && prefix
            .iter()
            .zip(namespace)
            .all(|(p, n)| segment_matches(p, n))
}

/// True when `suffix` matches the trailing segments of `namespace`.
pub fn matches_suffix(namespace: &[String], suffix: &[String]) -> bool {
    suffix.len() <= namespace.len()
        && suffix
            .iter()
            .rev()
            .zip(namespace.iter().rev())
            .all(|(s, n)| segment_matches(s, n))
}

/// The leading segments of a prefix before its first wildcard; drivers use it for an
/// index range scan before applying [`matches_prefix`].
pub fn literal_prefix(prefix: &[String]) -> &[String] {
    let end = prefix
        .iter()
        .position(|segment| segment == WILDCARD)
        .unwrap_or(prefix.len());
    &prefix[..end]
}

/// `namespace` cut to at most `max_depth` segments.
pub fn truncate(namespace: &[String], max_depth: Option<usize>) -> &[String] {
    match max_depth {
        Some(depth) if depth < namespace.len() => &namespace[..depth],
        _ => namespace,
    }
}

/// A namespace written as text, its labels joined by `.` (the `namespace` query
/// parameter of `GET /store/items`): split at every `.`, so empty labels are kept
/// for the rules to judge.
pub fn from_dotted(text: &str) -> Vec<String> {
    text.split('.').map(str::to_owned).collect()
}

/// Validates a namespace for a write: non-empty, each label non-empty, dot-free and
/// NUL-free.
pub fn validate_namespace(namespace: &[String]) -> StoreResult<()> {
    if namespace.is_empty() {
        return Err(StoreError::invalid("Namespace cannot be empty."));
    }
    refuse_nul("namespace", namespace)?;
    for label in namespace {
        if label.is_empty() || label.contains('.') {
            return Err(StoreError::invalid(format!(
                "Namespace label '{label}' must be a non-empty string without periods"
            )));
        }
    }
    Ok(())
}

fn segment_matches(pattern: &str, segment: &str) -> bool {
    pattern == WILDCARD || pattern == segment
}
