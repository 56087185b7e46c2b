//! Turning a run's chunks into frames on its stream topic (and on its thread's, when
//! a thread stream listens), and the run's outcome record that waits and joins read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};
use service_graph::Chunk;
use service_types::{Run, RunError, StreamMode};
use uuid::Uuid;

use crate::bus::{StreamBus, Topic};
use crate::run_options::RunOptions;

/// Event name of the internal record holding a run's wait/join result.
pub(crate) const OUTCOME_EVENT: &str = "__outcome__";

/// A frame whose data could not be written as JSON: never published as an empty one.
#[derive(Debug, thiserror::Error)]
#[error("the {event} frame's data cannot be written as JSON")]
pub(crate) struct FrameError {
    event: String,
    #[source]
    source: serde_json::Error,
}

impl FrameError {
    /// The error a run fails with when one of its frames cannot be written.
    pub(crate) fn to_run_error(&self) -> RunError {
        RunError::from_error("SerializationError", self)
    }
}

fn encode(event: &str, data: &impl Serialize) -> Result<Bytes, FrameError> {
    serde_json::to_vec(data)
        .map(Bytes::from)
        .map_err(|source| FrameError {
            event: event.to_owned(),
            source,
        })
}

/// Adds the frames one chunk of a run makes, as its requested modes ask, to `frames`
/// (published by [`Frames::publish_frames`]).
pub(crate) fn chunk_frames(
    options: &RunOptions,
    chunk: &Chunk,
    messages: &mut MessageAccumulator,
    frames: &mut Vec<(String, Bytes)>,
) -> Result<(), FrameError> {
    let namespace = chunk.namespace();
    if !namespace.is_empty() && !options.subgraphs {
        return Ok(());
    }
    let mode = chunk.mode();
    let requested = |wanted: StreamMode| options.stream_mode.contains(&wanted);
    let suffix = if namespace.is_empty() {
        String::new()
    } else {
        format!("|{}", namespace.join("|"))
    };
    let mut add = |event: String, data: &Value| -> Result<(), FrameError> {
        let bytes = encode(&event, data)?;
        frames.push((event, bytes));
        Ok(())
    };
    if mode == "messages" {
        if requested(StreamMode::MessagesTuple) {
            add(format!("messages{suffix}"), &chunk.data())?;
        }
        if requested(StreamMode::Messages) {
            for (event, data) in messages.accept(&chunk.data()) {
                add(format!("{event}{suffix}"), &data)?;
            }
        }
        return Ok(());
    }
    // A named custom channel (`custom:<name>`) travels under its own event name, so
    // protocol v2 can tell it by name; plain `custom` readers are not sent it.
    if let Some(name) = mode.strip_prefix("custom:") {
        if !name.is_empty() && !name.contains('|') && requested(StreamMode::Custom) {
            add(format!("{mode}{suffix}"), &chunk.data())?;
        }
        return Ok(());
    }
    let Some(mode) = StreamMode::parse(mode) else {
        return Ok(());
    };
    if !requested(mode) {
        return Ok(());
    }
    let event = if mode == StreamMode::Events {
        "events".to_owned()
    } else {
        format!("{}{suffix}", mode.as_str())
    };
    match chunk.encoded_json() {
        Some(json) => {
            frames.push((event, Bytes::from(json.to_owned())));
            Ok(())
        }
        None => add(event, &chunk.data()),
    }
}

/// What writes a run's frames and outcome to the stream bus, and the errors clients
/// see: the bus and whether stacks are exposed, nothing else of the engine.
#[derive(Clone)]
pub(crate) struct Frames {
    bus: Arc<dyn StreamBus>,
    expose_stacks: Arc<AtomicBool>,
}

impl Frames {
    pub(crate) fn new(bus: Arc<dyn StreamBus>, expose_stacks: bool) -> Self {
        Self {
            bus,
            expose_stacks: Arc::new(AtomicBool::new(expose_stacks)),
        }
    }

    /// Whether error stacks reach clients.
    pub(crate) fn exposes_stacks(&self) -> bool {
        self.expose_stacks.load(Ordering::Relaxed)
    }

    /// Turns stack exposure on or off.
    pub(crate) fn set_expose_stacks(&self, expose: bool) {
        self.expose_stacks.store(expose, Ordering::Relaxed);
    }

    /// Publishes a run's frames in order: one bus call for all of them.
    pub(crate) async fn publish_frames(&self, run: &Run, frames: Vec<(String, Bytes)>) {
        let mut frames = frames;
        match frames.len() {
            0 => {}
            1 => {
                if let Some((event, data)) = frames.pop() {
                    self.publish_run_bytes(run, &event, data).await;
                }
            }
            _ => {
                self.bus
                    .publish_run_frames(run.run_id, run.thread_id, frames)
                    .await;
            }
        }
    }

    /// Publishes a frame on the run's topic and, when a thread stream listens, on the
    /// thread's.
    pub(crate) async fn publish_run_frame(
        &self,
        run: &Run,
        event: &str,
        data: &impl Serialize,
    ) -> Result<(), FrameError> {
        let bytes = encode(event, data)?;
        self.publish_run_bytes(run, event, bytes).await;
        Ok(())
    }

    async fn publish_run_bytes(&self, run: &Run, event: &str, bytes: Bytes) {
        self.bus
            .publish_run(run.run_id, run.thread_id, event, bytes)
            .await;
    }

    /// Publishes an event on a thread's stream, if anyone listens to it.
    pub(crate) async fn publish_thread_event(
        &self,
        thread_id: Uuid,
        event: &str,
        data: &impl Serialize,
    ) -> Result<(), FrameError> {
        let bytes = encode(event, data)?;
        self.publish_thread_bytes(thread_id, event, bytes).await;
        Ok(())
    }

    async fn publish_thread_bytes(&self, thread_id: Uuid, event: &str, data: Bytes) {
        let topic = Topic::Thread(thread_id);
        if self.bus.is_open(topic).await {
            self.bus.publish(topic, event, data).await;
        }
    }

    /// Records the run's wait/join result on its topic. A body that cannot be written
    /// is recorded as the error saying so, so a waiter never reads an empty result.
    pub(crate) async fn publish_outcome(&self, run_id: Uuid, body: &Value) {
        let data = encode(OUTCOME_EVENT, body).unwrap_or_else(|error| {
            tracing::error!(%run_id, %error, cause = %error.source, "the run's result cannot be written");
            let error = self.client_error(&error.to_run_error());
            Bytes::from(json!({ "__error__": error }).to_string())
        });
        self.bus
            .publish(Topic::Run(run_id), OUTCOME_EVENT, data)
            .await;
    }

    /// Closes a settled run's topic: its subscribers end after its last frame.
    pub(crate) async fn close_run(&self, run_id: Uuid) {
        self.bus.close(Topic::Run(run_id)).await;
    }

    /// Tells a thread stream that a run of the thread is done.
    pub(crate) async fn publish_run_done(&self, thread_id: Uuid, run_id: Uuid) {
        let done = json!({"status": "run_done", "run_id": run_id});
        if let Err(error) = self
            .publish_thread_event(thread_id, "metadata", &done)
            .await
        {
            tracing::error!(%thread_id, %error, "publishing run_done failed");
        }
    }

    /// The error as clients see it: without stacks unless they are exposed.
    pub(crate) fn client_error(&self, error: &RunError) -> RunError {
        if self.exposes_stacks() {
            error.clone()
        } else {
            error.clone().without_stacks()
        }
    }
}

/// Turns `["messages", [chunk, metadata]]` chunks into the `messages` mode's events:
/// `messages/metadata` once per message id, then `messages/partial` with the message
/// accumulated so far.
#[derive(Debug, Default)]
pub(crate) struct MessageAccumulator {
    messages: std::collections::HashMap<String, Value>,
}

impl MessageAccumulator {
    fn accept(&mut self, data: &Value) -> Vec<(&'static str, Value)> {
        let (chunk, metadata) = match data {
            Value::Array(pair) if pair.len() == 2 => (&pair[0], &pair[1]),
            other => (other, &Value::Null),
        };
        let id = chunk
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_owned();
        let mut events = Vec::new();
        let accumulated = match self.messages.get_mut(&id) {
            Some(existing) => {
                let addition = chunk
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(Value::String(content)) = existing.get_mut("content") {
                    content.push_str(addition);
                }
                existing.clone()
            }
            None => {
                events.push((
                    "messages/metadata",
                    json!({ id.clone(): {"metadata": metadata} }),
                ));
                let mut message = chunk.clone();
                if let Some(kind) = message.get_mut("type")
                    && kind == "AIMessageChunk"
                {
                    *kind = Value::String("ai".into());
                }
                self.messages.insert(id, message.clone());
                message
            }
        };
        events.push(("messages/partial", json!([accumulated])));
        events
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A map whose keys are not strings: serde_json refuses to write it.
    fn unwritable() -> BTreeMap<Vec<u8>, u8> {
        BTreeMap::from([(vec![1], 1)])
    }

    #[test]
    fn data_that_cannot_be_written_is_an_error_naming_the_frame() {
        let error = encode("custom", &unwritable()).unwrap_err();
        assert!(error.to_string().contains("custom"), "{error}");
        let run_error = error.to_run_error();
        assert_eq!(run_error.error, "SerializationError");
        assert!(
            run_error.cause.is_some(),
            "the serde error is kept as the cause"
        );
    }

    /// The frames of `chunk` for a run that asked for `modes` (with subgraphs).
    fn frames_of(modes: Value, chunk: &Chunk) -> Vec<(String, Value)> {
        let assistant: service_types::Assistant = serde_json::from_value(json!({
            "assistant_id": "6e4f3b4e-0000-4000-8000-000000000001", "graph_id": "steps",
            "config": {}, "context": {}, "metadata": {}, "name": "steps", "version": 1,
            "created_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00",
        }))
        .unwrap();
        let body: service_types::RunCreate = serde_json::from_value(
            json!({"assistant_id": "steps", "stream_mode": modes, "stream_subgraphs": true}),
        )
        .unwrap();
        let ids = crate::run_options::RunIds {
            run_id: Uuid::nil(),
            thread_id: Uuid::max(),
            assistant: &assistant,
            stateless: false,
        };
        let options = RunOptions::new(&body, ids);
        let mut frames = Vec::new();
        chunk_frames(
            &options,
            chunk,
            &mut MessageAccumulator::default(),
            &mut frames,
        )
        .unwrap();
        frames
            .into_iter()
            .map(|(event, bytes)| (event, serde_json::from_slice(&bytes).unwrap()))
            .collect()
    }

    #[test]
    fn a_named_custom_chunk_travels_under_its_channel_when_custom_is_asked_for() {
        let chunk = Chunk::new("custom:progress", json!({"pct": 50}))
            .with_namespace(vec!["review:1".to_owned()]);
        assert_eq!(
            frames_of(json!(["custom"]), &chunk),
            [("custom:progress|review:1".to_owned(), json!({"pct": 50}))]
        );
        assert!(frames_of(json!(["values"]), &chunk).is_empty());
        let piped = Chunk::new("custom:a|b", json!(1));
        assert!(
            frames_of(json!(["custom"]), &piped).is_empty(),
            "a name with `|` would read as a namespace"
        );
    }

    #[test]
    fn message_chunks_accumulate_per_message_id() {
        let mut messages = MessageAccumulator::default();
        let first = messages.accept(&json!([
            {"id": "m1", "type": "AIMessageChunk", "content": "hel"},
            {"langgraph_node": "chat"}
        ]));
        assert_eq!(first[0].0, "messages/metadata");
        assert_eq!(
            first[1].1,
            json!([{"id": "m1", "type": "ai", "content": "hel"}])
        );
        let second = messages.accept(&json!([{"id": "m1", "content": "lo"}, {}]));
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].1[0]["content"], json!("hello"));
    }
}
