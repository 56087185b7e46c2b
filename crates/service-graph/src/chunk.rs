use std::borrow::Cow;
use std::pin::Pin;

use futures::Stream;
use serde_json::Value;

use crate::GraphError;

/// What [`AgentGraph::stream`](crate::AgentGraph::stream) returns: chunks in order,
/// ending after the last one (a failure is a final `Err`).
pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<Chunk, GraphError>> + Send + 'static>>;

/// One piece of run output, published by the engine as a frame.
///
/// The two variants mirror SPEC's chunk rules: a `[mode, data]` pair becomes a frame
/// of that mode ([`Chunk::Mode`]); any other chunk is an `updates` payload
/// ([`Chunk::Updates`]). A runtime that holds a large payload can hand it over already
/// written as JSON text ([`Chunk::Encoded`]), sparing a copy of it. `namespace` is empty for the root graph; for a subgraph it
/// holds the `<node>:<task id>` segments, published as `mode|seg1|seg2`.
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    /// A frame of a named stream mode (`values`, `custom`, `events`, ...).
    Mode {
        /// The stream mode (event name before any namespace suffix).
        mode: String,
        /// The frame payload.
        data: Value,
        /// Subgraph namespace segments; empty for the root graph.
        namespace: Vec<String>,
    },
    /// A frame of a named stream mode whose payload is already JSON text.
    Encoded {
        /// The stream mode (event name before any namespace suffix).
        mode: String,
        /// The frame payload, as JSON text.
        json: String,
        /// Subgraph namespace segments; empty for the root graph.
        namespace: Vec<String>,
    },
    /// A chunk that is not a `[mode, data]` pair: an `updates` payload.
    Updates {
        /// The frame payload.
        data: Value,
        /// Subgraph namespace segments; empty for the root graph.
        namespace: Vec<String>,
    },
}

impl Chunk {
    /// A root-graph frame of `mode`.
    pub fn new(mode: impl Into<String>, data: Value) -> Self {
        Self::Mode {
            mode: mode.into(),
            data,
            namespace: Vec::new(),
        }
    }

    /// A root-graph frame of `mode` whose payload `value` is written as JSON text now;
    /// a value that cannot be written is an error, never an empty frame.
    pub fn encoded(
        mode: impl Into<String>,
        value: &impl serde::Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self::Encoded {
            mode: mode.into(),
            json: serde_json::to_string(value)?,
            namespace: Vec::new(),
        })
    }

    /// Applies SPEC's chunk rules to a raw chunk: a two-element array whose first
    /// element is a string is a frame of that mode; anything else is `updates`.
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::Array(mut pair)
                if pair.len() == 2 && matches!(pair.first(), Some(Value::String(_))) =>
            {
                let data = pair.pop().unwrap_or(Value::Null);
                let mode = match pair.pop() {
                    Some(Value::String(mode)) => mode,
                    _ => String::from("updates"),
                };
                Self::new(mode, data)
            }
            other => Self::Updates {
                data: other,
                namespace: Vec::new(),
            },
        }
    }

    /// The same chunk placed under a subgraph namespace.
    pub fn with_namespace(mut self, segments: Vec<String>) -> Self {
        match &mut self {
            Self::Mode { namespace, .. }
            | Self::Encoded { namespace, .. }
            | Self::Updates { namespace, .. } => *namespace = segments,
        }
        self
    }

    /// The stream mode the frame is published under.
    pub fn mode(&self) -> &str {
        match self {
            Self::Mode { mode, .. } | Self::Encoded { mode, .. } => mode,
            Self::Updates { .. } => "updates",
        }
    }

    /// The frame payload (parsed again from an [`Chunk::Encoded`] one).
    pub fn data(&self) -> Cow<'_, Value> {
        match self {
            Self::Mode { data, .. } | Self::Updates { data, .. } => Cow::Borrowed(data),
            Self::Encoded { json, .. } => Cow::Owned(parse(json)),
        }
    }

    /// The payload as JSON text, when the runtime wrote it so.
    pub fn encoded_json(&self) -> Option<&str> {
        match self {
            Self::Encoded { json, .. } => Some(json),
            Self::Mode { .. } | Self::Updates { .. } => None,
        }
    }

    /// The subgraph namespace segments (empty for the root graph).
    pub fn namespace(&self) -> &[String] {
        match self {
            Self::Mode { namespace, .. }
            | Self::Encoded { namespace, .. }
            | Self::Updates { namespace, .. } => namespace,
        }
    }

    /// The SSE event name: the mode, followed by `|segment` per namespace segment.
    pub fn event_name(&self) -> String {
        std::iter::once(self.mode())
            .chain(self.namespace().iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("|")
    }

    /// Splits the chunk into (mode, namespace, payload).
    pub fn into_parts(self) -> (String, Vec<String>, Value) {
        match self {
            Self::Mode {
                mode,
                data,
                namespace,
            } => (mode, namespace, data),
            Self::Encoded {
                mode,
                json,
                namespace,
            } => (mode, namespace, parse(&json)),
            Self::Updates { data, namespace } => ("updates".to_owned(), namespace, data),
        }
    }
}

/// An encoded payload read back; it was written from a value, so it parses.
fn parse(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mode_pair_becomes_a_frame_of_that_mode() {
        let chunk = Chunk::from_value(json!(["custom", {"step": 1}]));
        assert_eq!(chunk.mode(), "custom");
        assert_eq!(*chunk.data(), json!({"step": 1}));
    }

    #[test]
    fn any_other_chunk_is_an_updates_payload() {
        for raw in [
            json!({"node": {"a": 1}}),
            json!([1, 2]),
            json!(["a", "b", "c"]),
            json!("x"),
        ] {
            let chunk = Chunk::from_value(raw.clone());
            assert_eq!(chunk.mode(), "updates");
            assert_eq!(*chunk.data(), raw);
        }
    }

    #[test]
    fn namespaced_event_name_joins_segments_with_pipes() {
        let chunk = Chunk::new("values", json!({})).with_namespace(vec!["child:1".into()]);
        assert_eq!(chunk.event_name(), "values|child:1");
    }

    #[test]
    fn an_encoded_chunk_reads_as_the_value_it_was_written_from() {
        let value = json!({"log": ["a", "b"], "n": 1.5});
        let chunk = Chunk::encoded("values", &value)
            .unwrap()
            .with_namespace(vec!["child:1".into()]);
        assert_eq!(chunk.event_name(), "values|child:1");
        assert_eq!(chunk.encoded_json(), Some(r#"{"log":["a","b"],"n":1.5}"#));
        assert_eq!(*chunk.data(), value);
        assert_eq!(
            chunk.into_parts(),
            ("values".to_owned(), vec!["child:1".to_owned()], value)
        );
        assert_eq!(Chunk::new("values", json!(1)).encoded_json(), None);
    }
}
