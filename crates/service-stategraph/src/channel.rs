use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// A custom reducer: `(current value or null, update) -> new value`.
pub type ReducerFn = Arc<dyn Fn(&Value, Value) -> Result<Value, String> + Send + Sync>;

/// How a state key combines an update with its current value.
#[derive(Clone, Default)]
pub enum Reducer {
    /// The update replaces the value.
    #[default]
    LastValue,
    /// Lists concatenate (`operator.add`); a non-list update is appended as one item.
    Append,
    /// Messages merge by `id` (LangGraph's `add_messages`): an update with a known id
    /// replaces that message, `{"type": "remove", "id": ...}` deletes it, others are
    /// appended with a fresh id.
    MergeMessages,
    /// A caller-supplied function.
    Custom(ReducerFn),
}

impl fmt::Debug for Reducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::LastValue => "LastValue",
            Self::Append => "Append",
            Self::MergeMessages => "MergeMessages",
            Self::Custom(_) => "Custom",
        })
    }
}

impl Reducer {
    /// Combines `current` (absent when the key has no value yet) with `update`. Takes
    /// the current value by value so a list grows in place instead of being copied on
    /// every superstep.
    pub(crate) fn apply(&self, current: Option<Value>, update: Value) -> Result<Value, String> {
        match self {
            Self::LastValue => Ok(update),
            Self::Append => {
                let mut list = as_list(current);
                match update {
                    Value::Array(items) => list.extend(items),
                    Value::Null => {}
                    item => list.push(item),
                }
                Ok(Value::Array(list))
            }
            Self::MergeMessages => Ok(Value::Array(merge_messages(as_list(current), update))),
            Self::Custom(reduce) => reduce(&current.unwrap_or(Value::Null), update),
        }
    }
}

fn as_list(current: Option<Value>) -> Vec<Value> {
    match current {
        Some(Value::Array(items)) => items,
        Some(Value::Null) | None => Vec::new(),
        Some(other) => vec![other],
    }
}

fn merge_messages(mut list: Vec<Value>, update: Value) -> Vec<Value> {
    let updates = match update {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        item => vec![item],
    };
    for message in updates {
        let mut message = match message {
            Value::Object(map) => map,
            Value::String(text) => text_message(text),
            other => text_message(other.to_string()),
        };
        let id = message.get("id").and_then(Value::as_str).map(str::to_owned);
        let position = id.as_ref().and_then(|id| {
            list.iter()
                .position(|existing| existing.get("id").and_then(Value::as_str) == Some(id))
        });
        let removal = message.get("type").and_then(Value::as_str) == Some("remove");
        match (position, removal) {
            (Some(index), true) => {
                list.remove(index);
            }
            (None, true) => {}
            (Some(index), false) => list[index] = Value::Object(message),
            (None, false) => {
                if id.is_none() {
                    message.insert("id".into(), Value::String(uuid::Uuid::new_v4().to_string()));
                }
                list.push(Value::Object(message));
            }
        }
    }
    list
}

/// A bare string update is a human message, as in LangGraph.
fn text_message(text: String) -> Map<String, Value> {
    let mut message = Map::new();
    message.insert("type".into(), Value::String("human".into()));
    message.insert("content".into(), Value::String(text));
    message
}

/// One state key: its reducer and its JSON schema.
#[derive(Clone, Debug)]
pub(crate) struct Channel {
    pub(crate) reducer: Reducer,
    pub(crate) schema: Value,
}

/// Applies an update object to `values` through the channels' reducers. Keys the
/// state does not declare are refused, so a typo cannot silently vanish.
pub(crate) fn apply_update(
    channels: &[(String, Channel)],
    values: &mut Map<String, Value>,
    update: &Value,
) -> Result<(), String> {
    let update = match update {
        Value::Null => return Ok(()),
        Value::Object(map) => map,
        other => return Err(format!("Expected an object as state update, got {other}")),
    };
    for (key, value) in update {
        let (_, channel) = channels
            .iter()
            .find(|(name, _)| name == key)
            .ok_or_else(|| format!("Channel '{key}' does not exist in the state"))?;
        // On failure the caller discards `values` along with the error.
        let next = channel
            .reducer
            .apply(values.remove(key), value.clone())
            .map_err(|error| format!("Reducer of '{key}' failed: {error}"))?;
        values.insert(key.clone(), next);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn last_value_replaces() {
        assert_eq!(
            Reducer::LastValue.apply(Some(json!(1)), json!(2)),
            Ok(json!(2))
        );
    }

    #[test]
    fn append_concatenates_lists_and_pushes_items() {
        assert_eq!(
            Reducer::Append.apply(Some(json!([1])), json!([2, 3])),
            Ok(json!([1, 2, 3]))
        );
        assert_eq!(Reducer::Append.apply(None, json!("x")), Ok(json!(["x"])));
    }

    #[test]
    fn merge_messages_replaces_by_id_removes_and_appends_with_fresh_ids() {
        let current = json!([{"id": "a", "content": "one"}, {"id": "b", "content": "two"}]);
        let update = json!([
            {"id": "a", "content": "uno"},
            {"type": "remove", "id": "b"},
            {"type": "ai", "content": "three"}
        ]);
        let merged = Reducer::MergeMessages.apply(Some(current), update).unwrap();
        let merged = merged.as_array().unwrap();
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0], json!({"id": "a", "content": "uno"}));
        assert_eq!(merged[1]["content"], "three");
        assert!(merged[1]["id"].is_string());
    }

    #[test]
    fn custom_reducer_sees_null_for_a_missing_value() {
        let sum: ReducerFn = Arc::new(|current, update| {
            Ok(json!(
                current.as_i64().unwrap_or(0) + update.as_i64().unwrap_or(0)
            ))
        });
        let reducer = Reducer::Custom(sum);
        assert_eq!(reducer.apply(None, json!(2)), Ok(json!(2)));
        assert_eq!(reducer.apply(Some(json!(2)), json!(3)), Ok(json!(5)));
    }

    #[test]
    fn undeclared_keys_are_refused() {
        let channels = vec![(
            "a".to_owned(),
            Channel {
                reducer: Reducer::LastValue,
                schema: json!({}),
            },
        )];
        let mut values = Map::new();
        assert!(apply_update(&channels, &mut values, &json!({"a": 1})).is_ok());
        assert!(apply_update(&channels, &mut values, &json!({"b": 1})).is_err());
    }
}
