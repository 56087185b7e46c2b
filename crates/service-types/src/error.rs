use std::error::Error as StdError;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The one error shape of a failed run: the SSE `error` frame, the stored run
/// `error`, the `__error__` wait body and (JSON-encoded) a task's `error`.
///
/// Building one never panics, is cycle-safe, and caps the cause chain at
/// [`RunError::MAX_CAUSE_DEPTH`] links and aggregates at [`RunError::MAX_ERRORS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunError {
    /// Constructor name of the error.
    pub error: String,
    /// Always equal to `error` (clients read either).
    pub name: String,
    /// The error message.
    pub message: String,
    /// The cause, one RunError per link.
    #[schema(no_recursion)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Box<RunError>>,
    /// Members of an aggregate error.
    #[schema(no_recursion)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<RunError>,
    /// Present only when the server exposes stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
}

impl RunError {
    /// Longest cause chain kept below the top error.
    pub const MAX_CAUSE_DEPTH: usize = 5;
    /// Most aggregate members kept.
    pub const MAX_ERRORS: usize = 10;
    /// Longest message kept, in bytes; longer messages are cut at a char boundary.
    pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

    /// An error with a name and a message.
    pub fn new(name: impl Into<String>, message: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            error: name.clone(),
            name,
            message: clip(message.into()),
            cause: None,
            errors: Vec::new(),
            stack: None,
        }
    }

    /// Sets the cause, trimming the resulting chain to the depth cap.
    pub fn with_cause(mut self, cause: RunError) -> Self {
        self.cause = Some(Box::new(cause));
        self.cap();
        self
    }

    /// Sets the aggregate members, keeping at most [`RunError::MAX_ERRORS`].
    pub fn with_errors(mut self, errors: Vec<RunError>) -> Self {
        self.errors = errors;
        self.cap();
        self
    }

    /// Sets the stack trace text.
    pub fn with_stack(mut self, stack: impl Into<String>) -> Self {
        self.stack = Some(stack.into());
        self
    }

    /// Builds a RunError from a Rust error and its `source()` chain. The top error is
    /// named `name`; each cause is named after what its `Debug` form starts with (the
    /// type or variant name), falling back to `Error`. A source chain that loops back on
    /// itself is cut where it repeats.
    pub fn from_error(name: impl Into<String>, error: &(dyn StdError + 'static)) -> Self {
        let mut top = Self::new(name, error.to_string());
        // A link is known by its address and its message: an error whose source is its
        // own first field shares its address, so the address alone would end the
        // chain at the first wrapper.
        let mut seen: Vec<(*const (), String)> = vec![(
            error as *const dyn StdError as *const (),
            top.message.clone(),
        )];
        let mut links = Vec::new();
        let mut next = error.source();
        while let Some(cause) = next {
            let link = (cause as *const dyn StdError as *const (), cause.to_string());
            if links.len() >= Self::MAX_CAUSE_DEPTH || seen.contains(&link) {
                break;
            }
            links.push(Self::new(debug_name(cause), link.1.clone()));
            seen.push(link);
            next = cause.source();
        }
        top.cause = chain(links);
        top
    }

    /// Builds a RunError from any JSON value a runtime reports as an error: an object
    /// with `error`/`name`/`message`/`cause`/`errors`/`stack` keys (either name key,
    /// missing keys defaulted), a string (taken as the message), or anything else
    /// (rendered as the message). Depth and width are capped.
    pub fn from_value(value: &Value) -> Self {
        Self::from_value_at(value, 0)
    }

    fn from_value_at(value: &Value, depth: usize) -> Self {
        match value {
            Value::Object(map) => {
                let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
                let name = text("name")
                    .or_else(|| text("error"))
                    .unwrap_or_else(|| "Error".to_owned());
                let message = match map.get("message") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                let mut error = Self::new(name, message);
                error.stack = text("stack");
                if depth < Self::MAX_CAUSE_DEPTH {
                    error.cause = map
                        .get("cause")
                        .filter(|cause| !cause.is_null())
                        .map(|cause| Box::new(Self::from_value_at(cause, depth + 1)));
                    if let Some(Value::Array(members)) = map.get("errors") {
                        error.errors = members
                            .iter()
                            .take(Self::MAX_ERRORS)
                            .map(|member| Self::from_value_at(member, depth + 1))
                            .collect();
                    }
                }
                error
            }
            Value::String(text) => Self::new("Error", text.clone()),
            other => Self::new("Error", other.to_string()),
        }
    }

    /// This error with every stack removed (what clients see when stacks are hidden).
    pub fn without_stacks(mut self) -> Self {
        self.strip_stacks();
        self
    }

    fn strip_stacks(&mut self) {
        self.stack = None;
        if let Some(cause) = self.cause.as_mut() {
            cause.strip_stacks();
        }
        for member in &mut self.errors {
            member.strip_stacks();
        }
    }

    /// The cause chain, top first (the top error included).
    pub fn chain(&self) -> impl Iterator<Item = &RunError> {
        std::iter::successors(Some(self), |error| error.cause.as_deref())
    }

    /// One line naming every link: `ValueError: boom; caused by RuntimeError: root cause`.
    pub fn chain_summary(&self) -> String {
        self.chain()
            .map(|link| format!("{}: {}", link.error, link.message))
            .collect::<Vec<_>>()
            .join("; caused by ")
    }

    /// This error JSON-encoded, the form a task's `error` field carries.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            format!(
                r#"{{"error":"Error","name":"Error","message":{:?}}}"#,
                self.message
            )
        })
    }

    /// Enforces the depth and width caps on a value assembled by hand.
    fn cap(&mut self) {
        fn walk(error: &mut RunError, depth: usize) {
            error.errors.truncate(RunError::MAX_ERRORS);
            if depth >= RunError::MAX_CAUSE_DEPTH {
                error.cause = None;
                error.errors.clear();
                return;
            }
            if let Some(cause) = error.cause.as_mut() {
                walk(cause, depth + 1);
            }
            for member in &mut error.errors {
                walk(member, depth + 1);
            }
        }
        walk(self, 0);
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.message)
    }
}

impl StdError for RunError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn StdError + 'static))
    }
}

fn chain(links: Vec<RunError>) -> Option<Box<RunError>> {
    links.into_iter().rev().fold(None, |inner, mut link| {
        link.cause = inner;
        Some(Box::new(link))
    })
}

fn debug_name(error: &dyn StdError) -> String {
    let debug = format!("{error:?}");
    let name: String = debug
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() || name.chars().next().is_some_and(|c| !c.is_alphabetic()) {
        "Error".to_owned()
    } else {
        name
    }
}

fn clip(mut message: String) -> String {
    if message.len() > RunError::MAX_MESSAGE_BYTES {
        let mut cut = RunError::MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug)]
    struct Link {
        message: &'static str,
        source: Option<Box<Link>>,
    }

    impl std::fmt::Display for Link {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.message)
        }
    }

    impl StdError for Link {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.source
                .as_deref()
                .map(|s| s as &(dyn StdError + 'static))
        }
    }

    /// An error whose source is itself: the degenerate cycle.
    #[derive(Debug)]
    struct Ouroboros;

    impl std::fmt::Display for Ouroboros {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("again")
        }
    }

    impl StdError for Ouroboros {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(self)
        }
    }

    fn nested(depth: usize) -> Link {
        (0..depth).fold(
            Link {
                message: "bottom",
                source: None,
            },
            |inner, _| Link {
                message: "link",
                source: Some(Box::new(inner)),
            },
        )
    }

    #[test]
    fn error_and_name_are_equal() {
        let error = RunError::new("ValueError", "boom");
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(
            json,
            json!({"error": "ValueError", "name": "ValueError", "message": "boom"})
        );
    }

    #[test]
    fn cause_chain_from_rust_error_is_capped_at_five() {
        let error = RunError::from_error("Top", &nested(20));
        assert_eq!(error.chain().count(), 1 + RunError::MAX_CAUSE_DEPTH);
        assert_eq!(error.chain().nth(1).unwrap().error, "Link");
    }

    #[test]
    fn self_referential_source_does_not_loop() {
        let error = RunError::from_error("Ouroboros", &Ouroboros);
        assert_eq!(error.chain().count(), 1);
    }

    /// An error whose source is its own first field lives at the field's address.
    #[derive(Debug)]
    struct Wrapper(std::io::Error);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("wrapper")
        }
    }

    impl StdError for Wrapper {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_source_at_its_wrappers_address_is_kept() {
        let error = RunError::from_error("Top", &Wrapper(std::io::Error::other("inner")));
        assert_eq!(
            error.chain_summary(),
            "Top: wrapper; caused by Custom: inner"
        );
    }

    #[test]
    fn json_error_values_of_any_shape_never_panic() {
        for value in [
            json!(null),
            json!(42),
            json!("plain"),
            json!([1, 2]),
            json!({}),
            json!({"message": {"nested": true}}),
            json!({"name": 5, "cause": "text cause"}),
        ] {
            let error = RunError::from_value(&value);
            assert_eq!(error.error, error.name);
        }
    }

    #[test]
    fn json_cause_chain_and_aggregates_are_capped() {
        let mut deep = json!({"name": "Leaf", "message": "leaf"});
        for i in 0..50 {
            deep = json!({"name": "Wrap", "message": format!("wrap {i}"), "cause": deep});
        }
        let members: Vec<_> = (0..30).map(|i| json!({"message": i.to_string()})).collect();
        deep["errors"] = json!(members);
        let error = RunError::from_value(&deep);
        assert_eq!(error.chain().count(), 1 + RunError::MAX_CAUSE_DEPTH);
        assert_eq!(error.errors.len(), RunError::MAX_ERRORS);
    }

    #[test]
    fn hand_built_chains_are_capped() {
        let mut error = RunError::new("E0", "0");
        for i in 1..12 {
            error = RunError::new(format!("E{i}"), i.to_string()).with_cause(error);
        }
        assert_eq!(error.chain().count(), 1 + RunError::MAX_CAUSE_DEPTH);
    }

    #[test]
    fn stacks_are_stripped_recursively() {
        let error = RunError::new("A", "a")
            .with_stack("at a")
            .with_cause(RunError::new("B", "b").with_stack("at b"));
        let hidden = error.without_stacks();
        assert!(hidden.chain().all(|link| link.stack.is_none()));
    }

    #[test]
    fn round_trips_through_the_task_error_string() {
        let error = RunError::new("ValueError", "boom")
            .with_cause(RunError::new("RuntimeError", "root cause"));
        let text = error.to_json_string();
        let back: RunError = serde_json::from_str(&text).unwrap();
        assert_eq!(back, error);
        assert_eq!(
            back.chain_summary(),
            "ValueError: boom; caused by RuntimeError: root cause"
        );
    }
}
