use serde::{Deserialize, Serialize};

use crate::{Metadata, Timestamp};

/// A pending interrupt: the value a node passed to `interrupt()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Interrupt {
    /// Opaque id (32 hex chars); a resume map is keyed by it.
    pub id: String,
    /// The interrupt value.
    pub value: serde_json::Value,
}

/// Coordinates of a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Checkpoint {
    /// Thread the checkpoint belongs to (absent in run-creation bodies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// `""` for the root graph.
    #[serde(default)]
    pub checkpoint_ns: String,
    /// The checkpoint id.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    /// Namespace to checkpoint id map for subgraphs; omitted when empty.
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_map: Option<Metadata>,
}

/// A task of a thread state: a node that ran or is about to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ThreadTask {
    /// Task id.
    pub id: String,
    /// Node name.
    pub name: String,
    /// A JSON-encoded RunError, so clients can rebuild a stream error from it.
    #[serde(default)]
    pub error: Option<String>,
    /// Interrupts raised by this task.
    #[serde(default)]
    pub interrupts: Vec<Interrupt>,
    /// Set when the task is a subgraph.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// Nested subgraph state, when asked for.
    #[schema(no_recursion)]
    #[serde(default)]
    pub state: Option<Box<ThreadState>>,
    /// Writes of a finished task.
    #[serde(default)]
    pub result: Option<serde_json::Value>,
}

/// A thread's state at one checkpoint, as the state and history routes return it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ThreadState {
    /// The state values (`{}` for an empty thread).
    pub values: serde_json::Value,
    /// Nodes still to run; non-empty when paused or failed mid-graph.
    #[schema(required = true)]
    #[serde(default)]
    pub next: Vec<String>,
    /// Tasks of this step.
    #[schema(required = true)]
    #[serde(default)]
    pub tasks: Vec<ThreadTask>,
    /// This checkpoint; null for an empty thread.
    #[schema(required = true)]
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// The parent checkpoint; null for the first one.
    #[schema(required = true)]
    #[serde(default)]
    pub parent_checkpoint: Option<Checkpoint>,
    /// Checkpoint metadata (source, step, parents, run keys).
    #[schema(required = true)]
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    /// When the checkpoint was written.
    #[schema(required = true)]
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    /// Pending interrupts of this checkpoint, flattened.
    #[schema(required = true)]
    #[serde(default)]
    pub interrupts: Vec<Interrupt>,
    /// Legacy duplicate of `checkpoint.checkpoint_id`.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    /// Legacy duplicate of `parent_checkpoint.checkpoint_id`.
    #[serde(default)]
    pub parent_checkpoint_id: Option<String>,
}

impl ThreadState {
    /// The state of a thread that has no checkpoint yet.
    pub fn empty() -> Self {
        Self {
            values: serde_json::Value::Object(Metadata::new()),
            next: Vec::new(),
            tasks: Vec::new(),
            checkpoint: None,
            parent_checkpoint: None,
            metadata: None,
            created_at: None,
            interrupts: Vec::new(),
            checkpoint_id: None,
            parent_checkpoint_id: None,
        }
    }
}

/// The fields history entries keep (`select` of the history routes): top-level fields
/// of a [`ThreadState`], and `values.<key>` for one key of its values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistorySelect(Vec<String>);

/// The top-level fields `select` may name.
const STATE_FIELDS: [&str; 8] = [
    "values",
    "next",
    "tasks",
    "checkpoint",
    "metadata",
    "created_at",
    "parent_checkpoint",
    "interrupts",
];

impl HistorySelect {
    /// The selection; an unknown field is an error naming it and the known ones.
    pub fn new(fields: Vec<String>) -> Result<Self, String> {
        let unknown: Vec<&String> = fields
            .iter()
            .filter(|field| !STATE_FIELDS.contains(&field.as_str()) && !is_values_key(field))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "Invalid select fields: {unknown:?}. Expected: {STATE_FIELDS:?} or values.<key>"
            ));
        }
        Ok(Self(fields))
    }

    /// `state` with only the selected fields (`values` with only the selected keys
    /// when keys are named and `values` itself is not).
    pub fn project(&self, state: &ThreadState) -> serde_json::Value {
        let serde_json::Value::Object(mut whole) = serde_json::to_value(state).unwrap_or_default()
        else {
            return serde_json::Value::Null;
        };
        let mut kept = serde_json::Map::new();
        for field in &self.0 {
            if let Some(value) = whole.remove(field) {
                kept.insert(field.clone(), value);
            }
        }
        let keys: Vec<&str> = self
            .0
            .iter()
            .filter_map(|field| field.strip_prefix("values."))
            .collect();
        if !keys.is_empty()
            && !kept.contains_key("values")
            && let serde_json::Value::Object(values) = &state.values
        {
            let picked = keys
                .into_iter()
                .filter_map(|key| values.get(key).map(|value| (key.to_owned(), value.clone())))
                .collect();
            kept.insert("values".into(), serde_json::Value::Object(picked));
        }
        serde_json::Value::Object(kept)
    }
}

/// `values.<key>`, a key of letters, digits, `_` and `-`.
fn is_values_key(field: &str) -> bool {
    field.strip_prefix("values.").is_some_and(|key| {
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    })
}

#[cfg(test)]
mod select_tests {
    use super::*;
    use serde_json::json;

    fn state() -> ThreadState {
        serde_json::from_value(json!({
            "values": {"messages": [1], "count": 2, "log": ["a"]},
            "next": ["step"], "tasks": [], "checkpoint": null, "parent_checkpoint": null,
            "metadata": {"step": 1}, "created_at": null, "interrupts": [],
        }))
        .unwrap()
    }

    #[test]
    fn select_keeps_the_named_fields_and_value_keys() {
        let select = |fields: &[&str]| {
            HistorySelect::new(fields.iter().map(|f| (*f).to_owned()).collect())
                .unwrap()
                .project(&state())
        };
        assert_eq!(
            select(&["next", "metadata"]),
            json!({"next": ["step"], "metadata": {"step": 1}})
        );
        assert_eq!(
            select(&["values.count", "values.absent"]),
            json!({"values": {"count": 2}})
        );
        assert_eq!(
            select(&["values", "values.count"])["values"],
            json!({"messages": [1], "count": 2, "log": ["a"]}),
            "values itself wins over its keys"
        );
    }

    #[test]
    fn an_unknown_select_field_is_refused_naming_it() {
        for bad in ["checkpoint_id", "values.", "values.a.b", "config"] {
            let error = HistorySelect::new(vec![bad.to_owned()]).unwrap_err();
            assert!(error.contains(bad), "{error}");
        }
    }
}
