//! The one text rule of the store: no string it keeps or queries holds NUL (U+0000).
//! PostgreSQL's `text` and `jsonb` cannot hold one, so every driver refuses it alike,
//! as `Invalid`, before writing anything; the HTTP adapter names the field for the
//! client with [`nul_path`] before a request gets this far.

use serde_json::Value;
use service_types::{Config, Metadata};

use crate::containment::Enforced;
use crate::{
    AssistantFilter, AssistantPatch, CronFilter, CronPatch, ItemSearch, NewAssistant, NewCron,
    NewRun, NewThread, PutItem, StoreError, StoreResult, ThreadFilter, ThreadPatch,
};

/// The wording of a NUL refusal for `field`.
pub fn nul_refused(field: &str) -> String {
    format!("'{field}' must not contain NUL (\\u0000) characters")
}

/// Where in `value` the first NUL is, in a key or a string, as a dotted path
/// (`metadata.k`, `items[2]`); `Some("")` when `value` itself is such a string.
pub fn nul_path(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => text.contains('\0').then(String::new),
        Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
            nul_path(item).map(|inner| join(&format!("[{index}]"), &inner))
        }),
        Value::Object(map) => map_nul_path(map),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

fn map_nul_path(map: &Metadata) -> Option<String> {
    map.iter().find_map(|(key, item)| {
        if key.contains('\0') {
            return Some(key.replace('\0', "\\u0000"));
        }
        nul_path(item).map(|inner| join(key, &inner))
    })
}

fn join(head: &str, tail: &str) -> String {
    if head.is_empty() {
        return tail.to_owned();
    }
    match tail.chars().next() {
        None => head.to_owned(),
        Some('[') => format!("{head}{tail}"),
        Some(_) => format!("{head}.{tail}"),
    }
}

/// Something that may carry client text into the store.
pub trait Text {
    /// The path of its first NUL, as [`nul_path`] reports it.
    fn nul_path(&self) -> Option<String>;
}

impl Text for str {
    fn nul_path(&self) -> Option<String> {
        self.contains('\0').then(String::new)
    }
}

impl Text for String {
    fn nul_path(&self) -> Option<String> {
        self.as_str().nul_path()
    }
}

impl Text for Value {
    fn nul_path(&self) -> Option<String> {
        nul_path(self)
    }
}

impl Text for Metadata {
    fn nul_path(&self) -> Option<String> {
        map_nul_path(self)
    }
}

impl<T: Text> Text for [T] {
    fn nul_path(&self) -> Option<String> {
        self.iter().enumerate().find_map(|(index, item)| {
            item.nul_path()
                .map(|inner| join(&format!("[{index}]"), &inner))
        })
    }
}

impl<T: Text> Text for Vec<T> {
    fn nul_path(&self) -> Option<String> {
        self.as_slice().nul_path()
    }
}

impl<T: Text> Text for Option<T> {
    fn nul_path(&self) -> Option<String> {
        self.as_ref().and_then(Text::nul_path)
    }
}

/// The first NUL among named fields.
fn first(fields: &[(&str, &dyn Text)]) -> Option<String> {
    fields
        .iter()
        .find_map(|(name, field)| field.nul_path().map(|inner| join(name, &inner)))
}

impl Text for Enforced {
    fn nul_path(&self) -> Option<String> {
        self.0.nul_path()
    }
}

impl Text for Config {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("tags", &self.tags),
            ("configurable", &self.configurable),
            ("", &self.extra),
        ])
    }
}

impl Text for NewThread {
    fn nul_path(&self) -> Option<String> {
        first(&[("metadata", &self.metadata)])
    }
}

impl Text for ThreadPatch {
    fn nul_path(&self) -> Option<String> {
        first(&[("metadata", &self.metadata)])
    }
}

impl Text for ThreadFilter {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("metadata", &self.metadata),
            ("metadata", &self.enforced),
            ("values", &self.values),
            ("exclude_metadata", &self.exclude_metadata),
        ])
    }
}

impl Text for NewAssistant {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("graph_id", &self.graph_id),
            ("config", &self.config),
            ("context", &self.context),
            ("metadata", &self.metadata),
            ("name", &self.name),
            ("description", &self.description),
        ])
    }
}

impl Text for AssistantPatch {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("graph_id", &self.graph_id),
            ("config", &self.config),
            ("context", &self.context),
            ("metadata", &self.metadata),
            ("name", &self.name),
            ("description", &self.description),
        ])
    }
}

impl Text for AssistantFilter {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("graph_id", &self.graph_id),
            ("metadata", &self.metadata),
            ("metadata", &self.enforced),
            ("name", &self.name),
        ])
    }
}

impl Text for NewRun {
    fn nul_path(&self) -> Option<String> {
        first(&[("metadata", &self.metadata), ("", &self.kwargs)])
    }
}

impl Text for NewCron {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("user_id", &self.user_id),
            ("schedule", &self.schedule),
            ("timezone", &self.timezone),
            ("payload", &self.payload),
            ("metadata", &self.metadata),
        ])
    }
}

impl Text for CronPatch {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("schedule", &self.schedule),
            ("timezone", &self.timezone.clone().flatten()),
            ("payload", &self.payload),
            ("metadata", &self.metadata),
        ])
    }
}

impl Text for CronFilter {
    fn nul_path(&self) -> Option<String> {
        first(&[("metadata", &self.metadata), ("metadata", &self.enforced)])
    }
}

impl Text for PutItem {
    fn nul_path(&self) -> Option<String> {
        first(&[
            ("namespace", &self.namespace),
            ("key", &self.key),
            ("value", &self.value),
        ])
    }
}

impl Text for ItemSearch {
    fn nul_path(&self) -> Option<String> {
        first(&[("namespace_prefix", &self.namespace_prefix)])
    }
}

/// `Invalid` when `text`, the store's `field`, holds a NUL.
pub fn refuse_nul(field: &str, text: &(impl Text + ?Sized)) -> StoreResult<()> {
    match text.nul_path() {
        None => Ok(()),
        Some(path) => Err(StoreError::invalid(nul_refused(&join(field, &path)))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_nul_is_found_in_nested_strings_and_keys_with_its_path() {
        assert_eq!(
            nul_path(&json!({"a": {"b": ["x", "y\u{0}"]}})),
            Some("a.b[1]".into())
        );
        assert_eq!(
            nul_path(&json!({"a": {"k\u{0}": 1}})),
            Some("a.k\\u0000".into())
        );
        assert_eq!(nul_path(&json!("\u{0}")), Some(String::new()));
        assert_eq!(nul_path(&json!({"a": ["ok", 1, null]})), None);
    }

    #[test]
    fn a_nul_refusal_names_the_field() {
        let error = refuse_nul("namespace", &vec!["a".to_owned(), "\u{0}".to_owned()])
            .expect_err("refused");
        assert_eq!(error.kind, crate::ErrorKind::Invalid);
        assert_eq!(
            error.message,
            "'namespace[1]' must not contain NUL (\\u0000) characters"
        );
        assert!(refuse_nul("key", "fine").is_ok());
    }
}
