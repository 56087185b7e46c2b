//! The messages reducer, as LangGraph's `add_messages`: updates are coerced to
//! LangChain's message shape, every message gets an id, a known id replaces its
//! message, `{"type": "remove", "id": ...}` deletes one and the id `__remove_all__`
//! clears the list.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// The id of a remove message that clears every message before it.
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// Whether a message of `kind` has `field` (LangChain's message models).
fn has_field(kind: &str, field: &str) -> bool {
    match field {
        "content" | "additional_kwargs" | "response_metadata" | "type" | "name" | "id" => true,
        "tool_calls" | "invalid_tool_calls" | "usage_metadata" => kind == "ai",
        "example" => matches!(kind, "ai" | "human"),
        "tool_call_id" | "artifact" | "status" => kind == "tool",
        _ => false,
    }
}

/// `current` merged with `update` (a message or a list of them).
pub(crate) fn add_messages(current: Vec<Value>, update: Value) -> Result<Vec<Value>, String> {
    let mut merged = coerce_all(current)?;
    let updates = coerce_all(match update {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        item => vec![item],
    })?;
    if let Some(last_clear) = updates
        .iter()
        .rposition(|message| is_remove(message) && id_of(message) == Some(REMOVE_ALL_MESSAGES))
    {
        return Ok(updates.into_iter().skip(last_clear + 1).collect());
    }
    let mut index: HashMap<String, usize> = merged
        .iter()
        .enumerate()
        .filter_map(|(position, message)| Some((id_of(message)?.to_owned(), position)))
        .collect();
    // Removals are applied last, so a message removed and re-sent in one update stays.
    let mut removed = HashSet::new();
    for message in updates {
        let id = id_of(&message).unwrap_or_default().to_owned();
        match (index.get(&id), is_remove(&message)) {
            (Some(_), true) => {
                removed.insert(id);
            }
            (Some(&position), false) => {
                removed.remove(&id);
                merged[position] = message;
            }
            (None, true) => {
                return Err(format!(
                    "Attempting to delete a message with an ID that doesn't exist ('{id}')"
                ));
            }
            (None, false) => {
                index.insert(id, merged.len());
                merged.push(message);
            }
        }
    }
    if !removed.is_empty() {
        merged.retain(|message| !id_of(message).is_some_and(|id| removed.contains(id)));
    }
    Ok(merged)
}

/// `update` with a fresh id on every message object that has none, so an input is
/// stored with the ids its messages get in the state (LangGraph's
/// `ensure_message_ids`): a replay of the input keeps them.
pub(crate) fn with_ids(update: &mut Value) {
    let messages = match update {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(_) => vec![update],
        _ => Vec::new(),
    };
    for message in messages {
        if let Value::Object(fields) = message
            && !fields.get("id").is_some_and(Value::is_string)
        {
            fields.insert("id".into(), uuid::Uuid::new_v4().to_string().into());
        }
    }
}

fn id_of(message: &Value) -> Option<&str> {
    message.get("id").and_then(Value::as_str)
}

fn is_remove(message: &Value) -> bool {
    message.get("type").and_then(Value::as_str) == Some("remove")
}

fn coerce_all(messages: Vec<Value>) -> Result<Vec<Value>, String> {
    messages.into_iter().map(coerce).collect()
}

/// One message-like value as a LangChain message with an id: a string is a human
/// message, `[role, content]` a message of that role, an object is read by its `role`
/// (else `type`) and `content`, with keys no message has kept in `additional_kwargs`.
fn coerce(message: Value) -> Result<Value, String> {
    let mut fields = match message {
        Value::String(text) => Map::from_iter([
            ("type".into(), "human".into()),
            ("content".into(), text.into()),
        ]),
        Value::Array(pair) if pair.len() == 2 && pair[0].is_string() => {
            let [role, content] = <[Value; 2]>::try_from(pair).unwrap_or_default();
            Map::from_iter([("role".into(), role), ("content".into(), content)])
        }
        Value::Object(fields) => fields,
        other => return Err(format!("Cannot read {other} as a message")),
    };
    let role = match fields.remove("role") {
        Some(role) => {
            fields.remove("type");
            role
        }
        None => fields.remove("type").unwrap_or(Value::Null),
    };
    let Some(role) = role.as_str() else {
        return Err(format!(
            "Message dict must contain 'role' and 'content' keys, got {}",
            Value::Object(fields)
        ));
    };
    let kind = match role {
        "human" | "user" => "human",
        "ai" | "assistant" => "ai",
        "system" | "developer" => "system",
        "function" | "tool" | "remove" => role,
        other => {
            return Err(format!(
                "Unexpected message type: '{other}'. Use one of 'human', 'user', 'ai', 'assistant', 'function', 'tool', 'system', or 'developer'."
            ));
        }
    };
    let content = match fields.remove("content") {
        Some(Value::Null) => Value::String(String::new()),
        Some(content) => content,
        None if kind == "remove" => Value::String(String::new()),
        None => {
            return Err(format!(
                "Message dict must contain 'role' and 'content' keys, got {}",
                Value::Object(fields)
            ));
        }
    };
    if kind == "tool" && !fields.get("tool_call_id").is_some_and(Value::is_string) {
        return Err("A tool message needs a 'tool_call_id'".to_owned());
    }
    let (mut out, extra): (Map<String, Value>, Map<String, Value>) = fields
        .into_iter()
        .partition(|(field, _)| has_field(kind, field));
    let mut kwargs = match out.remove("additional_kwargs") {
        Some(Value::Object(kwargs)) => kwargs,
        _ => Map::new(),
    };
    kwargs.extend(extra);
    if role == "developer" {
        kwargs.insert("__openai_role__".into(), "developer".into());
    }
    out.insert("content".into(), content);
    out.insert("additional_kwargs".into(), Value::Object(kwargs));
    out.entry("response_metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    out.insert("type".into(), kind.into());
    out.entry("name").or_insert(Value::Null);
    if !out.get("id").is_some_and(Value::is_string) {
        out.insert("id".into(), uuid::Uuid::new_v4().to_string().into());
    }
    match kind {
        "ai" => {
            for list in ["tool_calls", "invalid_tool_calls"] {
                out.entry(list).or_insert_with(|| Value::Array(Vec::new()));
            }
            out.entry("usage_metadata").or_insert(Value::Null);
        }
        "tool" => {
            out.entry("artifact").or_insert(Value::Null);
            out.entry("status").or_insert_with(|| "success".into());
        }
        _ => {}
    }
    Ok(Value::Object(out))
}

/// The text of a message's content: a string as it is, a list of content blocks as
/// its text blocks (and bare strings) joined.
pub fn message_text(message: &Value) -> String {
    match message.get("content").unwrap_or(message) {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                Value::String(text) => Some(text.as_str()),
                Value::Object(block)
                    if block.get("type").and_then(Value::as_str) == Some("text") =>
                {
                    block.get("text").and_then(Value::as_str)
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merge(current: Value, update: Value) -> Result<Vec<Value>, String> {
        let Value::Array(current) = current else {
            panic!("a list")
        };
        add_messages(current, update)
    }

    #[test]
    fn messages_without_an_id_get_one_and_keep_their_order() {
        let merged = merge(
            json!([{"type": "human", "content": "a"}]),
            json!({"type": "ai", "content": "b"}),
        )
        .unwrap();
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0]["content"], "a");
        assert_eq!(merged[1]["content"], "b");
        assert!(merged.iter().all(|message| message["id"].is_string()));
        assert_ne!(merged[0]["id"], merged[1]["id"]);
    }

    #[test]
    fn a_known_id_replaces_its_message_in_place() {
        let current = json!([{"id": "a", "type": "human", "content": "one"}, {"id": "b", "type": "ai", "content": "two"}]);
        let merged = merge(
            current,
            json!([{"id": "a", "type": "human", "content": "uno"}]),
        )
        .unwrap();
        assert_eq!(
            merged
                .iter()
                .map(|m| m["content"].clone())
                .collect::<Vec<_>>(),
            [json!("uno"), json!("two")]
        );
    }

    #[test]
    fn remove_deletes_by_id_and_an_unknown_id_is_refused() {
        let current = json!([{"id": "a", "type": "human", "content": "one"}, {"id": "b", "type": "ai", "content": "two"}]);
        let merged = merge(current.clone(), json!([{"type": "remove", "id": "a"}])).unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0]["id"], "b");
        let error = merge(current, json!({"type": "remove", "id": "zz"})).unwrap_err();
        assert!(error.contains("'zz'"), "{error}");
    }

    #[test]
    fn remove_all_keeps_only_what_follows_it() {
        let current = json!([{"id": "a", "type": "human", "content": "one"}]);
        let update = json!([{"type": "ai", "content": "dropped"}, {"type": "remove", "id": REMOVE_ALL_MESSAGES}, {"type": "ai", "content": "kept"}]);
        let merged = merge(current, update).unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0]["content"], "kept");
    }

    #[test]
    fn roles_strings_and_pairs_are_coerced_as_langchain_does() {
        let update = json!([
            "plain",
            ["assistant", "pair"],
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "developer", "content": "rules", "extra": 1},
            {"type": "ai", "content": null},
            {"role": "tool", "content": "42", "tool_call_id": "t1"}
        ]);
        let merged = merge(json!([]), update).unwrap();
        let types: Vec<_> = merged.iter().map(|m| m["type"].clone()).collect();
        assert_eq!(
            types,
            [
                json!("human"),
                json!("ai"),
                json!("human"),
                json!("system"),
                json!("ai"),
                json!("tool")
            ]
        );
        assert_eq!(
            merged[2]["content"],
            json!([{"type": "text", "text": "hi"}])
        );
        assert!(merged[2].get("role").is_none());
        assert_eq!(
            merged[3]["additional_kwargs"],
            json!({"extra": 1, "__openai_role__": "developer"})
        );
        assert_eq!(merged[4]["content"], "");
        assert_eq!(merged[4]["tool_calls"], json!([]));
        assert_eq!(merged[4]["usage_metadata"], Value::Null);
        assert_eq!(merged[5]["status"], "success");
        assert_eq!(merged[0]["name"], Value::Null);
        assert_eq!(merged[0]["response_metadata"], json!({}));
    }

    #[test]
    fn unreadable_messages_are_refused_with_the_reason() {
        for (update, says) in [
            (
                json!({"type": "bogus", "content": "x"}),
                "Unexpected message type: 'bogus'",
            ),
            (json!({"foo": "bar"}), "must contain 'role' and 'content'"),
            (
                json!({"type": "human"}),
                "must contain 'role' and 'content'",
            ),
            (json!({"role": "tool", "content": "x"}), "tool_call_id"),
            (json!(7), "Cannot read 7"),
        ] {
            let error = merge(json!([]), update).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn with_ids_gives_message_objects_without_one_an_id() {
        let mut update = json!([{"type": "human", "content": "a"}, {"id": "b", "type": "ai", "content": "b"}, "c"]);
        with_ids(&mut update);
        assert!(update[0]["id"].is_string());
        assert_eq!(update[1]["id"], "b");
        assert_eq!(update[2], "c");
        let merged = merge(json!([]), update.clone()).unwrap();
        assert_eq!(merged[0]["id"], update[0]["id"]);
    }

    #[test]
    fn message_text_reads_strings_and_text_blocks() {
        assert_eq!(message_text(&json!({"content": "hi"})), "hi");
        assert_eq!(
            message_text(
                &json!({"content": [{"type": "text", "text": "hel"}, {"type": "image", "url": "x"}, "lo"]})
            ),
            "hello"
        );
        assert_eq!(message_text(&json!({"content": null})), "");
    }
}
