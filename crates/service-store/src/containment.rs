//! JSON containment (the `metadata` and `values` filters), with the semantics of
//! PostgreSQL's `jsonb @>` so a SQL driver can push it into its query unchanged.

use std::cmp::Ordering;

use serde_json::{Number, Value};
use service_types::Metadata;

/// True when every key of `filter` is in `target` with a contained value.
pub fn contains_object(target: &Metadata, filter: &Metadata) -> bool {
    filter
        .iter()
        .all(|(key, wanted)| target.get(key).is_some_and(|have| contains(have, wanted)))
}

/// `target @> wanted`: objects by key, arrays by "each wanted element is contained in
/// some target element", scalars by equality (numbers by value, so `1` equals `1.0`).
pub fn contains(target: &Value, wanted: &Value) -> bool {
    match (target, wanted) {
        (Value::Object(have), Value::Object(want)) => contains_object(have, want),
        (Value::Array(have), Value::Array(want)) => {
            want.iter().all(|w| have.iter().any(|h| contains(h, w)))
        }
        (Value::Array(_), _)
        | (Value::Object(_), _)
        | (_, Value::Array(_))
        | (_, Value::Object(_)) => false,
        _ => scalar_equals(target, wanted),
    }
}

/// Equality of two JSON values where numbers compare by value.
pub fn scalar_equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y) == Some(Ordering::Equal),
        _ => a == b,
    }
}

/// Numeric order of two JSON numbers: exact for integers, by f64 otherwise.
pub fn compare_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return Some(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return Some(x.cmp(&y));
    }
    a.as_f64()?.partial_cmp(&b.as_f64()?)
}

/// The server-set ownership filter (SPEC "Authentication" 4, `enforcedMetadata`): a
/// row is visible when its metadata contains one of the alternatives. One alternative
/// is SPEC's enforced subset; more let a handler share rows besides the owner's (the
/// system assistants, say).
#[derive(Clone, Debug, PartialEq)]
pub struct Enforced(pub Vec<Metadata>);

impl Enforced {
    /// Rows whose metadata contains `metadata`.
    pub fn metadata(metadata: Metadata) -> Self {
        Self(vec![metadata])
    }

    /// True when `metadata` contains one of the alternatives.
    pub fn admits(&self, metadata: &Metadata) -> bool {
        self.0
            .iter()
            .any(|alternative| contains_object(metadata, alternative))
    }
}

/// The containment filters a row must match one of: the request's metadata filter
/// merged with each enforced alternative. An alternative sharing a key with the
/// request's filter matches nothing (SPEC: a key collision), so it is left out; an
/// empty answer selects no row. Without an enforced filter, the request's alone.
pub fn merge_enforced(metadata: Option<&Metadata>, enforced: Option<&Enforced>) -> Vec<Metadata> {
    let request = metadata.cloned().unwrap_or_default();
    let Some(enforced) = enforced else {
        return vec![request];
    };
    enforced
        .0
        .iter()
        .filter(|alternative| !alternative.keys().any(|key| request.contains_key(key)))
        .map(|alternative| {
            let mut merged = request.clone();
            merged.extend(alternative.clone());
            merged
        })
        .collect()
}

/// True when `target` matches the request's metadata filter and the enforced one
/// (what [`merge_enforced`] selects), for one row.
pub fn visible(
    target: &Metadata,
    metadata: Option<&Metadata>,
    enforced: Option<&Enforced>,
) -> bool {
    let Some(enforced) = enforced else {
        return metadata.is_none_or(|wanted| contains_object(target, wanted));
    };
    contains_any(target, &merge_enforced(metadata, Some(enforced)))
}

/// True when `target` contains one of `alternatives` (the answer of [`merge_enforced`]).
pub fn contains_any(target: &Metadata, alternatives: &[Metadata]) -> bool {
    alternatives
        .iter()
        .any(|alternative| contains_object(target, alternative))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nested_objects_and_arrays_are_contained() {
        let target = json!({"a": {"b": 1, "c": [1, 2, {"d": true}]}, "e": "x"});
        assert!(contains(&target, &json!({"a": {"c": [{"d": true}, 2]}})));
        assert!(!contains(&target, &json!({"a": {"c": [3]}})));
        assert!(contains(&target, &json!({"a": {"b": 1.0}})));
    }

    #[test]
    fn enforced_key_collision_matches_nothing() {
        let request = json!({"owner": "a"}).as_object().cloned();
        let enforced = json!({"owner": "a"})
            .as_object()
            .cloned()
            .map(Enforced::metadata);
        assert!(merge_enforced(request.as_ref(), enforced.as_ref()).is_empty());
    }

    #[test]
    fn an_alternative_that_collides_is_dropped_and_the_others_kept() {
        let request = json!({"owner": "b", "tag": 1}).as_object().cloned();
        let enforced = Enforced(vec![
            json!({"owner": "a"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            json!({"created_by": "system"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ]);
        let merged = merge_enforced(request.as_ref(), Some(&enforced));
        assert_eq!(merged.len(), 1);
        let visible = json!({"owner": "b", "tag": 1, "created_by": "system"});
        assert!(contains_any(
            visible.as_object().unwrap_or(&Metadata::new()),
            &merged
        ));
        let owned = json!({"owner": "b", "tag": 1});
        assert!(!contains_any(
            owned.as_object().unwrap_or(&Metadata::new()),
            &merged
        ));
    }
}
