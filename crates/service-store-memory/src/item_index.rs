//! An equality index over the top-level scalar fields of one namespace's items, so a
//! filtered search reads the few items holding the wanted value instead of scanning the
//! namespace. It only narrows: every candidate is still checked against the whole
//! filter, so the index may over-approximate (numbers are keyed by their `f64` value,
//! which two distinct large integers can share; long strings by a hash) but never
//! misses a match.

use std::collections::{BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;
use service_store::StoreFilter;
use service_store::filter::{FilterOp, Operand};
use service_types::Metadata;

/// Strings longer than this are indexed by their hash, so a document-sized field does
/// not get a second copy in the index.
const LONGEST_KEPT_STRING: usize = 64;

/// A scalar as an index key. Equal scalars (under the filter's equality, where `1`
/// equals `1.0`) map to the same key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ScalarKey {
    Null,
    Bool(bool),
    Number(u64),
    String(String),
    LongString(u64),
}

impl ScalarKey {
    fn of(value: &Value) -> Option<Self> {
        Some(match value {
            Value::Null => Self::Null,
            Value::Bool(flag) => Self::Bool(*flag),
            Value::Number(number) => {
                // +0.0 and -0.0 are equal numbers and must share a key.
                let float = number.as_f64()? + 0.0;
                Self::Number(float.to_bits())
            }
            Value::String(text) if text.len() > LONGEST_KEPT_STRING => {
                let mut hasher = DefaultHasher::new();
                text.hash(&mut hasher);
                Self::LongString(hasher.finish())
            }
            Value::String(text) => Self::String(text.clone()),
            Value::Array(_) | Value::Object(_) => return None,
        })
    }
}

/// field → scalar → keys of the items whose value holds that scalar at that field.
#[derive(Debug, Default)]
pub(crate) struct ItemIndex {
    fields: HashMap<String, HashMap<ScalarKey, BTreeSet<String>>>,
}

impl ItemIndex {
    pub(crate) fn insert(&mut self, key: &str, value: &Metadata) {
        for (field, scalar) in value {
            if let Some(scalar) = ScalarKey::of(scalar) {
                self.fields
                    .entry(field.clone())
                    .or_default()
                    .entry(scalar)
                    .or_default()
                    .insert(key.to_owned());
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &str, value: &Metadata) {
        for (field, scalar) in value {
            let Some(scalar) = ScalarKey::of(scalar) else {
                continue;
            };
            let Some(values) = self.fields.get_mut(field) else {
                continue;
            };
            if let Some(keys) = values.get_mut(&scalar) {
                keys.remove(key);
                if keys.is_empty() {
                    values.remove(&scalar);
                }
            }
            if values.is_empty() {
                self.fields.remove(field);
            }
        }
    }

    /// The keys that can match `filter`, from its most selective equality (`$eq` or
    /// `$in`) condition; `None` when it has none and every item must be read.
    pub(crate) fn candidates(&self, filter: &StoreFilter) -> Option<BTreeSet<&str>> {
        filter
            .conditions()
            .iter()
            .filter_map(|condition| {
                let operands: &[Value] = match (&condition.op, &condition.operand) {
                    (FilterOp::Eq, Operand::Scalar(operand)) => std::slice::from_ref(operand),
                    (FilterOp::In, Operand::List(operands)) => operands,
                    _ => return None,
                };
                let values = self.fields.get(&condition.key);
                let keys: BTreeSet<&str> = operands
                    .iter()
                    .filter_map(ScalarKey::of)
                    .filter_map(|scalar| values?.get(&scalar))
                    .flatten()
                    .map(String::as_str)
                    .collect();
                Some(keys)
            })
            .min_by_key(BTreeSet::len)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(json: Value) -> Metadata {
        match json {
            Value::Object(map) => map,
            _ => unreachable!("test values are objects"),
        }
    }

    fn filter(json: Value) -> StoreFilter {
        StoreFilter::parse(&json).unwrap()
    }

    fn index() -> ItemIndex {
        let mut index = ItemIndex::default();
        index.insert("a", &value(json!({"n": 1, "tag": "x", "flag": true})));
        index.insert(
            "b",
            &value(json!({"n": 1.0, "tag": "y", "nested": {"n": 1}})),
        );
        index.insert("c", &value(json!({"n": -0.0, "tag": null})));
        index
    }

    fn keys(found: Option<BTreeSet<&str>>) -> Vec<&str> {
        found.expect("an equality condition").into_iter().collect()
    }

    #[test]
    fn equal_numbers_share_a_key_whatever_their_spelling() {
        let index = index();
        assert_eq!(keys(index.candidates(&filter(json!({"n": 1})))), ["a", "b"]);
        assert_eq!(keys(index.candidates(&filter(json!({"n": 0})))), ["c"]);
    }

    #[test]
    fn the_most_selective_condition_narrows_and_in_unions() {
        let index = index();
        let found = index.candidates(&filter(json!({"n": 1, "tag": "y"})));
        assert_eq!(keys(found), ["b"]);
        let found = index.candidates(&filter(json!({"tag": {"$in": ["x", null]}})));
        assert_eq!(keys(found), ["a", "c"]);
        assert!(keys(index.candidates(&filter(json!({"tag": "z"})))).is_empty());
    }

    #[test]
    fn long_strings_are_found_through_their_hash() {
        let long = "x".repeat(LONGEST_KEPT_STRING + 1);
        let mut index = ItemIndex::default();
        index.insert("doc", &value(json!({"body": long})));
        let found = index.candidates(&filter(json!({"body": long})));
        assert_eq!(keys(found), ["doc"]);
        let other = "y".repeat(LONGEST_KEPT_STRING + 1);
        assert!(keys(index.candidates(&filter(json!({"body": other})))).is_empty());
    }

    #[test]
    fn filters_without_equality_read_every_item() {
        let index = index();
        assert!(
            index
                .candidates(&filter(json!({"n": {"$gt": 0}})))
                .is_none()
        );
        assert!(
            index
                .candidates(&filter(json!({"tag": {"$ne": "x"}})))
                .is_none()
        );
    }

    #[test]
    fn removed_items_leave_no_entry() {
        let mut index = index();
        index.remove("a", &value(json!({"n": 1, "tag": "x", "flag": true})));
        assert_eq!(keys(index.candidates(&filter(json!({"n": 1})))), ["b"]);
        assert!(keys(index.candidates(&filter(json!({"flag": true})))).is_empty());
        assert!(!index.fields.contains_key("flag"));
    }
}
