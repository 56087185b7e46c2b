//! Field selection (`select`) and value extraction (`extract`) on search results.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{ApiError, unprocessable};

/// Serializes `items`, keeping only the `select`ed fields when a selection is given.
/// An unknown field name is a 422 naming the allowed ones.
pub(crate) fn select<T: Serialize>(
    items: &[T],
    select: &[String],
    allowed: &[&str],
) -> Result<Vec<Value>, ApiError> {
    if let Some(unknown) = select
        .iter()
        .find(|field| !allowed.contains(&field.as_str()))
    {
        return Err(unprocessable(format!(
            "Invalid select columns: ['{unknown}']. Expected: {allowed:?}"
        )));
    }
    items
        .iter()
        .map(|item| {
            let value = serde_json::to_value(item)
                .map_err(|error| ApiError(service_engine::EngineError::internal(error)))?;
            Ok(if select.is_empty() {
                value
            } else {
                keep(value, select)
            })
        })
        .collect()
}

fn keep(value: Value, fields: &[String]) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(key, _)| fields.iter().any(|field| field == key))
                .collect(),
        ),
        other => other,
    }
}

/// Most aliases one `extract` may name.
pub(crate) const MAX_EXTRACT: usize = 10;

/// Adds `extracted: {alias: value}` to each object, each value read from a path like
/// `values.messages[-1].content` (dot keys, `[i]` indexes, negative from the end).
pub(crate) fn extract(items: &mut [Value], paths: &Map<String, Value>) -> Result<(), ApiError> {
    if paths.len() > MAX_EXTRACT {
        return Err(unprocessable(format!(
            "extract may name at most {MAX_EXTRACT} paths"
        )));
    }
    let parsed: Vec<(String, Vec<Step>)> = paths
        .iter()
        .map(|(alias, path)| {
            let path = path.as_str().ok_or_else(|| {
                unprocessable(format!("extract path of '{alias}' must be a string"))
            })?;
            Ok((alias.clone(), parse_path(path)?))
        })
        .collect::<Result<_, ApiError>>()?;
    for item in items.iter_mut() {
        let extracted: Map<String, Value> = parsed
            .iter()
            .map(|(alias, steps)| {
                (
                    alias.clone(),
                    walk(item, steps).cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        if let Value::Object(map) = item {
            map.insert("extracted".into(), Value::Object(extracted));
        }
    }
    Ok(())
}

enum Step {
    Key(String),
    Index(i64),
}

fn parse_path(path: &str) -> Result<Vec<Step>, ApiError> {
    let invalid = || unprocessable(format!("Invalid extract path: '{path}'"));
    let mut steps = Vec::new();
    for segment in path.split('.') {
        let (key, mut rest) = match segment.find('[') {
            Some(at) => (&segment[..at], &segment[at..]),
            None => (segment, ""),
        };
        if key.is_empty() && steps.is_empty() {
            return Err(invalid());
        }
        if !key.is_empty() {
            steps.push(Step::Key(key.to_owned()));
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']').ok_or_else(invalid)?;
            let index = inner[..close].parse().map_err(|_| invalid())?;
            steps.push(Step::Index(index));
            rest = &inner[close + 1..];
        }
        if !rest.is_empty() {
            return Err(invalid());
        }
    }
    Ok(steps)
}

fn walk<'a>(value: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    steps.iter().try_fold(value, |current, step| match step {
        Step::Key(key) => current.get(key),
        Step::Index(index) => {
            let array = current.as_array()?;
            let position = if *index < 0 {
                array.len().checked_sub(index.unsigned_abs() as usize)?
            } else {
                *index as usize
            };
            array.get(position)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extract_reads_keys_and_negative_indexes() {
        let mut items = vec![json!({"values": {"messages": [{"content": "a"}, {"content": "b"}]}})];
        let paths = json!({"last": "values.messages[-1].content", "none": "values.missing"});
        extract(&mut items, paths.as_object().unwrap()).unwrap();
        assert_eq!(items[0]["extracted"], json!({"last": "b", "none": null}));
    }

    #[test]
    fn select_keeps_only_named_fields_and_rejects_unknown_ones() {
        let items = vec![json!({"a": 1, "b": 2})];
        let kept = select(&items, &["a".into()], &["a", "b"]).unwrap();
        assert_eq!(kept, vec![json!({"a": 1})]);
        assert!(select(&items, &["c".into()], &["a", "b"]).is_err());
    }
}
