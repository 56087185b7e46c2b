//! Namespace rules every caller shares: what a label may be, and the reserved root
//! under which each tenant's store lives (escaped so no tenant label is a wildcard or
//! another tenant's).

use crate::{EngineError, EngineResult};

/// Checks a namespace: non-empty, every label a non-empty string without `.`.
pub fn validate_namespace(namespace: &[String]) -> EngineResult<()> {
    if namespace.is_empty() {
        return Err(EngineError::bad_request("Namespace cannot be empty."));
    }
    if let Some(label) = namespace
        .iter()
        .find(|label| label.is_empty() || label.contains('.'))
    {
        return Err(EngineError::unprocessable(format!(
            "Namespace label '{label}' must be a non-empty string without periods"
        )));
    }
    Ok(())
}

/// The first label of every tenant's namespaces. The engine adds it for a caller
/// whose scope is a namespace; no request and no graph may name it, so a tenant's
/// items can be neither reached nor planted from outside.
pub const TENANT_ROOT: &str = "@tenant";

/// Refuses a namespace (or prefix) under the reserved root.
pub(crate) fn refuse_reserved_root(namespace: &[String]) -> EngineResult<()> {
    if namespace.first().is_some_and(|label| label == TENANT_ROOT) {
        return Err(EngineError::unprocessable(format!(
            "Namespace label '{TENANT_ROOT}' is reserved for the server"
        )));
    }
    Ok(())
}

/// A tenant's place in the store: the reserved root, then its labels escaped so that
/// no label can be a wildcard (`*`), hold a period, or equal another tenant's.
pub(crate) struct Tenant(Vec<String>);

impl Tenant {
    pub(crate) fn new(labels: &[String]) -> Self {
        let escaped = labels.iter().map(|label| escape_label(label));
        Self(
            std::iter::once(TENANT_ROOT.to_owned())
                .chain(escaped)
                .collect(),
        )
    }

    /// How many labels the tenant's place adds.
    pub(crate) fn depth(&self) -> usize {
        self.0.len()
    }

    /// `namespace` moved under the tenant's place.
    pub(crate) fn inside(&self, namespace: Vec<String>) -> Vec<String> {
        self.0.iter().cloned().chain(namespace).collect()
    }

    /// A stored namespace as the tenant sees it: without its place.
    pub(crate) fn outside(&self, mut namespace: Vec<String>) -> Vec<String> {
        if namespace.starts_with(&self.0) {
            namespace.drain(..self.0.len());
        }
        namespace
    }
}

/// Percent-escapes what a label may not hold or mean: `%` (the escape itself), `.`
/// (the store's separator) and `*` (a wildcard); an empty label becomes `%`, which no
/// escaped label can be.
fn escape_label(label: &str) -> String {
    if label.is_empty() {
        return "%".to_owned();
    }
    let mut escaped = String::with_capacity(label.len());
    for char in label.chars() {
        match char {
            '%' => escaped.push_str("%25"),
            '.' => escaped.push_str("%2E"),
            '*' => escaped.push_str("%2A"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_labels_must_be_non_empty_without_periods() {
        assert!(validate_namespace(&["a".into(), "b".into()]).is_ok());
        assert_eq!(
            validate_namespace(&[]).unwrap_err().message,
            "Namespace cannot be empty."
        );
        assert!(validate_namespace(&["a.b".into()]).is_err());
        assert!(validate_namespace(&[String::new()]).is_err());
    }

    #[test]
    fn tenant_labels_are_escaped_so_none_is_a_wildcard_or_another_tenants() {
        let place = |label: &str| Tenant::new(&[label.to_owned()]).inside(Vec::new());
        assert_eq!(place("*"), vec![TENANT_ROOT, "%2A"]);
        assert_eq!(place("a.b"), vec![TENANT_ROOT, "a%2Eb"]);
        assert_ne!(place("a%2Eb"), place("a.b"));
        assert_ne!(place(""), place("%"));
        let tenant = Tenant::new(&["memories".to_owned()]);
        let stored = tenant.inside(vec!["memories".into()]);
        assert_eq!(stored, vec![TENANT_ROOT, "memories", "memories"]);
        assert_eq!(tenant.outside(stored), vec!["memories".to_owned()]);
    }

    #[test]
    fn the_reserved_root_is_refused_to_requests() {
        assert!(refuse_reserved_root(&[TENANT_ROOT.to_owned(), "x".into()]).is_err());
        assert!(refuse_reserved_root(&["x".to_owned(), TENANT_ROOT.into()]).is_ok());
    }
}
