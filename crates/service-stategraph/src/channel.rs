use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::messages::{add_messages, with_ids};

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
    /// Messages merge by `id` (LangGraph's `add_messages`): updates are coerced to
    /// LangChain messages with ids, a known id replaces that message,
    /// `{"type": "remove", "id": ...}` deletes it (`__remove_all__`: every one),
    /// others are appended.
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
            Self::MergeMessages => add_messages(as_list(current), update).map(Value::Array),
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

/// One state key: its reducer and its JSON schema.
#[derive(Clone, Debug)]
pub(crate) struct Channel {
    pub(crate) reducer: Reducer,
    pub(crate) schema: Value,
}

/// Gives the messages of `input`'s message keys the ids they will have in the state.
pub(crate) fn ensure_message_ids(channels: &[(String, Channel)], input: &mut Value) {
    let Value::Object(keys) = input else {
        return;
    };
    for (key, channel) in channels {
        if let (Reducer::MergeMessages, Some(messages)) = (&channel.reducer, keys.get_mut(key)) {
            with_ids(messages);
        }
    }
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
        let current = json!([{"id": "a", "type": "human", "content": "one"}, {"id": "b", "type": "ai", "content": "two"}]);
        let update = json!([
            {"id": "a", "type": "human", "content": "uno"},
            {"type": "remove", "id": "b"},
            {"type": "ai", "content": "three"}
        ]);
        let merged = Reducer::MergeMessages.apply(Some(current), update).unwrap();
        let merged = merged.as_array().unwrap();
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0]["content"], "uno");
        assert_eq!(merged[0]["id"], "a");
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
