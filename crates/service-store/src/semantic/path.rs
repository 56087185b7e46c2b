//! The texts a field path picks out of an item's value, read as LangGraph's stores
//! read `index.fields` (`get_text_at_path`), so an item embeds the same texts here as
//! on the Python peer: `$` is the whole value; `a.b` walks objects; `[2]`, `[-1]` and
//! `[*]` index arrays; `{a,b.c}` picks several fields of one object. A path that
//! reaches nothing yields no text; scalars become text as Python's `str` writes them,
//! objects and arrays as Python's `json.dumps(sort_keys=True)` does.

use serde_json::Value;

/// The texts `path` picks out of `value`, in document order.
pub fn texts_at_path(value: &Value, path: &str) -> Vec<String> {
    if path.is_empty() || path == "$" {
        return vec![python_json(value)];
    }
    let tokens = tokenize(path);
    let mut texts = Vec::new();
    collect(value, &tokens, &mut texts);
    texts
}

/// Splits `a.b[0]{c,d}` into `a`, `b`, `[0]`, `{c,d}`; brackets and braces nest.
fn tokenize(path: &str) -> Vec<String> {
    let chars: Vec<char> = path.chars().collect();
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            open @ ('[' | '{') => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
                let close = if open == '[' { ']' } else { '}' };
                let mut depth = 0;
                let mut token = String::new();
                while i < chars.len() {
                    let char = chars[i];
                    token.push(char);
                    i += 1;
                    if char == open {
                        depth += 1;
                    } else if char == close {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                }
                tokens.push(token);
                continue;
            }
            '.' => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
            }
            other => current.push(other),
        }
        i += 1;
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

fn collect(value: &Value, tokens: &[String], texts: &mut Vec<String>) {
    let Some((token, rest)) = tokens.split_first() else {
        texts.extend(leaf_text(value));
        return;
    };
    if let Some(index) = token.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let Value::Array(items) = value else { return };
        if index == "*" {
            for item in items {
                collect(item, rest, texts);
            }
        } else if let Some(item) = index
            .trim()
            .parse::<i64>()
            .ok()
            .and_then(|at| array_index(items.len(), at))
            .and_then(|at| items.get(at))
        {
            collect(item, rest, texts);
        }
    } else if let Some(fields) = token.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let Value::Object(_) = value else { return };
        for field in fields.split(',') {
            let mut current = Some(value);
            for step in tokenize(field.trim()) {
                current = current
                    .and_then(|at| at.as_object())
                    .and_then(|at| at.get(&step));
            }
            // LangGraph stops here, at the named field: no deeper tokens apply.
            if let Some(found) = current {
                texts.extend(leaf_text(found));
            }
        }
    } else if let Some(field) = value.as_object().and_then(|object| object.get(token)) {
        collect(field, rest, texts);
    }
}

/// A Python-style index (negative counts from the end) into a list of `len`.
fn array_index(len: usize, at: i64) -> Option<usize> {
    let from_end = i64::try_from(len).ok()?;
    let at = if at < 0 { from_end + at } else { at };
    usize::try_from(at).ok().filter(|at| *at < len)
}

/// The text of a reached value; `null` has none.
fn leaf_text(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::String(text) => text.clone(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(number) => number.to_string(),
        Value::Array(_) | Value::Object(_) => python_json(value),
    })
}

/// `json.dumps(value, sort_keys=True, ensure_ascii=False)`: `", "` and `": "`
/// separators, keys sorted.
fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(object) => {
            let mut entries: Vec<_> = object.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (n, (key, item)) in entries.into_iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(": ");
                write_json(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn texts(value: &Value, path: &str) -> Vec<String> {
        texts_at_path(value, path)
    }

    #[test]
    fn the_whole_value_is_python_json_with_sorted_keys() {
        let value = json!({"b": [1, true], "a": "é"});
        assert_eq!(texts(&value, "$"), [r#"{"a": "é", "b": [1, true]}"#]);
    }

    #[test]
    fn dotted_paths_walk_objects_and_scalars_read_as_python_writes_them() {
        let value = json!({"a": {"b": "text", "n": 2, "flag": false, "none": null}});
        assert_eq!(texts(&value, "a.b"), ["text"]);
        assert_eq!(texts(&value, "a.n"), ["2"]);
        assert_eq!(texts(&value, "a.flag"), ["False"]);
        assert!(texts(&value, "a.none").is_empty());
        assert!(texts(&value, "a.missing").is_empty());
        assert_eq!(
            texts(&value, "a"),
            [r#"{"b": "text", "flag": false, "n": 2, "none": null}"#]
        );
    }

    #[test]
    fn array_indexes_count_from_either_end_and_star_takes_each() {
        let value = json!({"list": [{"t": "x"}, {"t": "y"}, {"u": "z"}]});
        assert_eq!(texts(&value, "list[0].t"), ["x"]);
        assert_eq!(texts(&value, "list[-2].t"), ["y"]);
        assert!(texts(&value, "list[5].t").is_empty());
        assert_eq!(texts(&value, "list[*].t"), ["x", "y"]);
        assert!(texts(&value, "list.t").is_empty());
    }

    #[test]
    fn braces_pick_several_fields_of_one_object() {
        let value = json!({"doc": {"title": "T", "meta": {"by": "me"}, "tags": ["a"]}});
        assert_eq!(
            texts(&value, "doc{title, meta.by, tags, nope}"),
            ["T", "me", r#"["a"]"#]
        );
    }
}
