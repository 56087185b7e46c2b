use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use service_types::{Checkpoint, Config, Metadata};

/// The per-call configuration handed to an agent: LangGraph's `RunnableConfig`.
///
/// `configurable` carries the checkpoint coordinates (`thread_id`, `checkpoint_id`,
/// `checkpoint_ns`) and the run keys the engine injects (`run_id`, `assistant_id`,
/// `graph_id`, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunnableConfig {
    /// Free-form values, checkpoint coordinates among them.
    #[serde(default)]
    pub configurable: Metadata,
    /// Tags for tracing.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Most supersteps one run may take; the runtime's default applies when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_limit: Option<u32>,
    /// Other keys, passed through.
    #[serde(flatten)]
    pub extra: Metadata,
}

impl RunnableConfig {
    /// A config addressing the latest checkpoint of `thread_id`.
    pub fn for_thread(thread_id: impl Into<String>) -> Self {
        let mut config = Self::default();
        config
            .configurable
            .insert("thread_id".into(), Value::String(thread_id.into()));
        config
    }

    /// This config pinned to one checkpoint.
    pub fn with_checkpoint_id(mut self, checkpoint_id: impl Into<String>) -> Self {
        self.configurable
            .insert("checkpoint_id".into(), Value::String(checkpoint_id.into()));
        self
    }

    /// The `configurable.thread_id`, if any.
    pub fn thread_id(&self) -> Option<&str> {
        self.text("thread_id")
    }

    /// The `configurable.checkpoint_id`, if any (absent means "latest").
    pub fn checkpoint_id(&self) -> Option<&str> {
        self.text("checkpoint_id")
    }

    /// The `configurable.checkpoint_ns`; `""` for the root graph.
    pub fn checkpoint_ns(&self) -> &str {
        self.text("checkpoint_ns").unwrap_or("")
    }

    /// The checkpoint coordinates, when the config names a thread.
    pub fn checkpoint_config(&self) -> Option<CheckpointConfig> {
        Some(CheckpointConfig {
            thread_id: self.thread_id()?.to_owned(),
            checkpoint_ns: self.checkpoint_ns().to_owned(),
            checkpoint_id: self.checkpoint_id().map(str::to_owned),
        })
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.configurable
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    }
}

impl From<Config> for RunnableConfig {
    fn from(config: Config) -> Self {
        Self {
            configurable: config.configurable.unwrap_or_default(),
            tags: config.tags.unwrap_or_default(),
            recursion_limit: config.recursion_limit,
            extra: config.extra,
        }
    }
}

impl From<CheckpointConfig> for RunnableConfig {
    fn from(checkpoint: CheckpointConfig) -> Self {
        let mut config = Self::for_thread(checkpoint.thread_id);
        config.configurable.insert(
            "checkpoint_ns".into(),
            Value::String(checkpoint.checkpoint_ns),
        );
        if let Some(id) = checkpoint.checkpoint_id {
            config = config.with_checkpoint_id(id);
        }
        config
    }
}

/// Coordinates of a checkpoint: what a snapshot's `config` and `parentConfig` hold
/// and what `update_state` returns. A missing `checkpoint_id` means "latest".
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// The thread.
    pub thread_id: String,
    /// `""` for the root graph.
    #[serde(default)]
    pub checkpoint_ns: String,
    /// The checkpoint id.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
}

impl CheckpointConfig {
    /// The root-graph checkpoint `checkpoint_id` of `thread_id`.
    pub fn new(thread_id: impl Into<String>, checkpoint_id: Option<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            checkpoint_ns: String::new(),
            checkpoint_id,
        }
    }

    /// The wire `Checkpoint` object.
    pub fn to_wire(&self) -> Checkpoint {
        Checkpoint {
            thread_id: Some(self.thread_id.clone()),
            checkpoint_ns: self.checkpoint_ns.clone(),
            checkpoint_id: self.checkpoint_id.clone(),
            checkpoint_map: None,
        }
    }

    /// `{"configurable": {thread_id, checkpoint_ns, checkpoint_id}}`, the shape of a
    /// config in stream payloads and of the update-state response's `configurable`.
    pub fn to_config_value(&self) -> Value {
        json!({ "configurable": {
            "thread_id": self.thread_id,
            "checkpoint_ns": self.checkpoint_ns,
            "checkpoint_id": self.checkpoint_id,
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_are_read_from_configurable() {
        let config = RunnableConfig::for_thread("t1").with_checkpoint_id("c1");
        assert_eq!(
            config.checkpoint_config(),
            Some(CheckpointConfig::new("t1", Some("c1".into())))
        );
        assert_eq!(RunnableConfig::default().checkpoint_config(), None);
    }

    #[test]
    fn wire_config_keeps_configurable_and_tags() {
        let wire: Config = serde_json::from_value(json!({
            "tags": ["a"], "recursion_limit": 4, "configurable": {"thread_id": "t"}, "x": 1
        }))
        .unwrap();
        let config = RunnableConfig::from(wire);
        assert_eq!(config.thread_id(), Some("t"));
        assert_eq!(config.recursion_limit, Some(4));
        assert_eq!(config.extra.get("x"), Some(&json!(1)));
    }
}
