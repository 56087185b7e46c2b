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

/// Merges a request's metadata filter with the server-set enforced subset (SPEC
/// "Authentication" 4). `None` means the query matches nothing: a key collision.
pub fn merge_enforced(
    metadata: Option<&Metadata>,
    enforced: Option<&Metadata>,
) -> Option<Metadata> {
    let mut merged = metadata.cloned().unwrap_or_default();
    for (key, value) in enforced.into_iter().flatten() {
        if merged.contains_key(key) {
            return None;
        }
        merged.insert(key.clone(), value.clone());
    }
    Some(merged)
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
        let enforced = json!({"owner": "a"}).as_object().cloned();
        assert_eq!(merge_enforced(request.as_ref(), enforced.as_ref()), None);
    }
}
