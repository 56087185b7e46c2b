use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use service_graph::{
    AgentGraph, Chunk, ChunkStream, GraphError, RunContext, RunInput, RunnableConfig, StateOptions,
    StateSnapshot, StreamOptions,
};
use service_types::{GraphSchema, StreamMode};

/// `reply`: a hand-written agent with only the two required methods, proving the
/// seam works without the runtime. It writes a reply declaration
/// `{"reply": {"text": "reply to <text>"}}` to the custom stream and remembers each
/// thread's last values in memory.
#[derive(Debug, Default)]
pub struct ReplyGraph {
    last_values: Mutex<HashMap<String, Value>>,
}

impl ReplyGraph {
    /// A reply agent with no remembered threads.
    pub fn new() -> Self {
        Self::default()
    }

    /// Its schemas: input `text`, state `text` and `replied`.
    pub fn schema() -> GraphSchema {
        let state = json!({"title": "replyState", "type": "object", "properties": {
            "text": {"type": "string"}, "replied": {"type": "boolean"}
        }});
        GraphSchema {
            input_schema: Some(
                json!({"title": "replyInput", "type": "object", "properties": {
                    "text": {"type": "string"}
                }}),
            ),
            output_schema: Some(state.clone()),
            state_schema: Some(state),
            ..GraphSchema::default()
        }
    }

    fn remembered(&self, thread_id: Option<&str>) -> Map<String, Value> {
        let last = self
            .last_values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        thread_id
            .and_then(|thread| last.get(thread))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[async_trait]
impl AgentGraph for ReplyGraph {
    async fn stream(
        &self,
        input: RunInput,
        options: StreamOptions,
        ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        if ctx.cancel.is_cancelled() {
            return Err(GraphError::Cancelled);
        }
        let thread_id = options.config.thread_id().map(str::to_owned);
        let mut state = self.remembered(thread_id.as_deref());
        if let RunInput::Values(Value::Object(values)) = input {
            state.extend(values);
        }
        let mut raw = Vec::new();
        if options.wants(StreamMode::Values) {
            raw.push(json!(["values", state]));
        }
        let text = text_of(state.get("text").unwrap_or(&Value::Null));
        if options.wants(StreamMode::Custom) {
            raw.push(json!(["custom", {"reply": {"text": format!("reply to {text}")}}]));
        }
        if options.wants(StreamMode::Updates) {
            // A bare chunk: the chunk rules publish it as an `updates` payload.
            raw.push(json!({"reply": {"replied": true}}));
        }
        state.insert("replied".into(), Value::Bool(true));
        if options.wants(StreamMode::Values) {
            raw.push(json!(["values", state]));
        }
        if let Some(thread) = thread_id {
            self.last_values
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(thread, Value::Object(state));
        }
        let chunks: Vec<Result<Chunk, GraphError>> = raw
            .into_iter()
            .map(|raw| Ok(Chunk::from_value(raw)))
            .collect();
        Ok(Box::pin(futures::stream::iter(chunks)))
    }

    async fn get_state(
        &self,
        config: &RunnableConfig,
        _options: StateOptions,
    ) -> Result<StateSnapshot, GraphError> {
        Ok(StateSnapshot::from_values(Value::Object(
            self.remembered(config.thread_id()),
        )))
    }
}
