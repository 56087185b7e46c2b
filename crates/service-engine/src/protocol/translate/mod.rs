//! Thread-stream frames to protocol v2 events.
//!
//! A connection replays its thread's topic from the start and translates every frame
//! the same way, so two connections number the same events alike (`seq`, which a
//! reconnecting client sends back as `since`) and give them the same `event_id`
//! (the frame's id, `.<n>` for further events of one frame, or a `synth:` id naming
//! the run for events the server adds), which clients de-duplicate on.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Value, json};
use service_types::{EventParams, EventType, ProtocolEvent, RunStatus};
use uuid::Uuid;

use crate::bus::Frame;

/// What a thread-stream `metadata` frame says about a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunMark {
    /// The run was created (its first frame, `{run_id, attempt}`).
    Created(Uuid),
    /// The run is done (`{status: "run_done", run_id}`).
    Done(Uuid),
}

impl RunMark {
    /// The mark a frame carries, if it is a run's `metadata` frame.
    pub(crate) fn of(frame: &Frame) -> Option<Self> {
        if frame.event != "metadata" {
            return None;
        }
        let data: Value = serde_json::from_slice(&frame.data).ok()?;
        let run_id = data.get("run_id")?.as_str()?.parse().ok()?;
        match data.get("status").and_then(Value::as_str) {
            Some("run_done") => Some(Self::Done(run_id)),
            Some(_) => None,
            None => Some(Self::Created(run_id)),
        }
    }
}

/// What the translator is told about a marked run, read from the store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunFacts {
    /// The run's graph (for a `Created` mark).
    pub(crate) graph_name: Option<String>,
    /// The run's final status (for a `Done` mark).
    pub(crate) status: Option<RunStatus>,
}

/// One run's translation state.
#[derive(Debug)]
struct RunState {
    /// Names the run in synthetic event ids.
    key: String,
    graph_name: String,
    /// Subgraph namespaces seen, in order, and whether each is still open.
    namespaces: Vec<(Vec<String>, bool)>,
    /// Interrupts already announced.
    interrupts: HashSet<String>,
    /// Messages streamed chunk by chunk and not yet finished: id to (namespace, text).
    open_messages: HashMap<String, (Vec<String>, String)>,
    /// Every message id already sent on the messages channel.
    sent_messages: HashSet<String>,
    /// The root's terminal lifecycle event was sent.
    ended: bool,
}

/// Where an event's id comes from.
enum Anchor {
    /// The next id derived from the frame being translated.
    Frame,
    /// A synthetic id.
    Synth(String),
}

/// Frames in, events out; one per connection.
#[derive(Debug, Default)]
pub(crate) struct Translator {
    seq: u64,
    /// Runs created on the thread and not done, oldest first, with their graph names;
    /// runs on a thread execute one at a time in this order, so the first one owns the
    /// frames that arrive.
    queued: VecDeque<(Uuid, String)>,
    current: Option<RunState>,
    /// The frame being translated: its id and how many events it gave so far.
    frame_id: String,
    frame_millis: i64,
    frame_events: usize,
    out: Vec<ProtocolEvent>,
}

/// The message roles of the protocol, from a message's `type`.
fn role_of(kind: &str) -> Option<&'static str> {
    match kind {
        "ai" | "AIMessage" | "AIMessageChunk" | "assistant" => Some("ai"),
        "human" | "HumanMessage" | "user" => Some("human"),
        "system" | "SystemMessage" => Some("system"),
        "tool" | "ToolMessage" => Some("tool"),
        _ => None,
    }
}

/// The text of a message's content: a string, or its text blocks joined.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|block| match block {
                Value::String(text) => Some(text.as_str()),
                Value::Object(block) if block.get("type") == Some(&json!("text")) => {
                    block.get("text").and_then(Value::as_str)
                }
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

fn namespace_key(namespace: &[String]) -> String {
    namespace.join("/")
}

/// The graph name of a subgraph namespace: its last segment's node name.
fn graph_of(namespace: &[String]) -> String {
    let last = namespace.last().map_or("root", String::as_str);
    last.split(':').next().unwrap_or(last).to_owned()
}

impl Translator {
    /// The events `frame` gives; `facts` tells about the run a `metadata` frame marks.
    pub(crate) fn accept(&mut self, frame: &Frame, facts: &RunFacts) -> Vec<ProtocolEvent> {
        self.frame_id = frame.id.to_string();
        self.frame_millis = frame.id.millis;
        self.frame_events = 0;
        if frame.is_internal() {
            return Vec::new();
        }
        if let Some(mark) = RunMark::of(frame) {
            match mark {
                RunMark::Created(run_id) => self.created(run_id, facts),
                RunMark::Done(run_id) => self.done(run_id, facts.status),
            }
            return std::mem::take(&mut self.out);
        }
        let mut parts = frame.event.split('|');
        let mode = parts.next().unwrap_or_default().to_owned();
        let namespace: Vec<String> = parts.map(str::to_owned).collect();
        let Ok(data) = serde_json::from_slice::<Value>(&frame.data) else {
            return Vec::new();
        };
        match mode.as_str() {
            "values" => self.values(namespace, data),
            "updates" => self.updates(namespace, data),
            "messages" => self.message_chunk(namespace, data),
            "custom" => {
                self.run_for_frame();
                self.enter(&namespace);
                self.emit(
                    Anchor::Frame,
                    "custom",
                    namespace,
                    json!({ "payload": data }),
                    None,
                );
            }
            "tasks" => {
                self.run_for_frame();
                self.enter(&namespace);
                self.emit(Anchor::Frame, "tasks", namespace, data, None);
            }
            // LangGraph's tool events already have the protocol's shape.
            "tools" => {
                self.run_for_frame();
                self.enter(&namespace);
                self.emit(Anchor::Frame, "tools", namespace, data, None);
            }
            "checkpoints" => self.checkpoint(namespace, &data),
            "error" => self.failed(&data),
            named if named.starts_with("custom:") => {
                let name = &named["custom:".len()..];
                self.run_for_frame();
                self.enter(&namespace);
                let data = json!({ "name": name, "payload": data });
                self.emit(Anchor::Frame, "custom", namespace, data, None);
            }
            _ => {}
        }
        std::mem::take(&mut self.out)
    }

    fn created(&mut self, run_id: Uuid, facts: &RunFacts) {
        let graph_name = facts.graph_name.clone().unwrap_or_else(|| "root".into());
        self.queued.push_back((run_id, graph_name));
        if self.current.is_none() {
            self.start_next();
        }
    }

    /// Starts the oldest queued run: its root `running` event.
    fn start_next(&mut self) {
        let Some((run_id, graph_name)) = self.queued.front().cloned() else {
            return;
        };
        self.begin(run_id.to_string(), graph_name);
    }

    fn begin(&mut self, key: String, graph_name: String) {
        let id = format!("synth:{key}:lc||running");
        self.current = Some(RunState {
            key,
            graph_name: graph_name.clone(),
            namespaces: Vec::new(),
            interrupts: HashSet::new(),
            open_messages: HashMap::new(),
            sent_messages: HashSet::new(),
            ended: false,
        });
        self.emit(
            Anchor::Synth(id),
            "lifecycle",
            Vec::new(),
            json!({"event": "running", "graph_name": graph_name}),
            None,
        );
    }

    /// The run the current frame belongs to: one begun on a frame with no run marked
    /// before it (a thread topic opened while a run was under way).
    fn run_for_frame(&mut self) -> &mut RunState {
        if self.current.is_none() {
            let key = format!("frame-{}", self.frame_id);
            self.begin(key, "root".into());
        }
        self.current
            .as_mut()
            .unwrap_or_else(|| unreachable!("begun above"))
    }

    fn done(&mut self, run_id: Uuid, status: Option<RunStatus>) {
        let queued = self.queued.iter().any(|(queued, _)| *queued == run_id);
        // The front run is the one under way; a run begun on its frames alone (never
        // marked created here) is the one a done mark for an unknown run ends.
        let is_current = match &self.current {
            Some(run) if run.key.starts_with("frame-") => !queued,
            Some(_) => self
                .queued
                .front()
                .is_some_and(|(front, _)| *front == run_id),
            None => false,
        };
        self.queued.retain(|(queued, _)| *queued != run_id);
        if !is_current {
            return;
        }
        if !self.run_for_frame().ended {
            let (event, error) = match status {
                Some(RunStatus::Error) => ("failed", Some("Run failed")),
                Some(RunStatus::Timeout) => ("failed", Some("Run timed out")),
                Some(RunStatus::Cancelled) => ("failed", Some("Run was cancelled")),
                _ => ("completed", None),
            };
            self.finish_messages();
            self.close_namespaces();
            self.root_lifecycle(event, error);
        }
        self.current = None;
        self.start_next();
    }

    fn failed(&mut self, data: &Value) {
        let run = self.run_for_frame();
        if run.ended {
            return;
        }
        let message = data
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| data.to_string(), str::to_owned);
        self.finish_messages();
        self.root_lifecycle("failed", Some(&message));
    }

    /// The root's lifecycle event `event`; a terminal one ends the run's lifecycle.
    fn root_lifecycle(&mut self, event: &str, error: Option<&str>) {
        let run = self.run_for_frame();
        run.ended = true;
        let id = format!("synth:{}:lc||{event}", run.key);
        let mut data = json!({"event": event, "graph_name": run.graph_name});
        if let Some(error) = error {
            data["error"] = json!(error);
        }
        self.emit(Anchor::Synth(id), "lifecycle", Vec::new(), data, None);
    }

    /// Announces (`started`) each subgraph namespace on the way to `namespace` seen
    /// for the first time.
    fn enter(&mut self, namespace: &[String]) {
        for depth in 1..=namespace.len() {
            let prefix = namespace[..depth].to_vec();
            let run = self.run_for_frame();
            if run.namespaces.iter().any(|(known, _)| *known == prefix) {
                continue;
            }
            run.namespaces.push((prefix.clone(), true));
            let id = format!("synth:{}:lc|{}|started", run.key, namespace_key(&prefix));
            let data = json!({"event": "started", "graph_name": graph_of(&prefix)});
            self.emit(Anchor::Synth(id), "lifecycle", prefix, data, None);
        }
    }

    /// `completed` for one open subgraph namespace.
    fn complete(&mut self, namespace: Vec<String>) {
        let run = self.run_for_frame();
        let Some(entry) = run
            .namespaces
            .iter_mut()
            .find(|(known, open)| *open && *known == namespace)
        else {
            return;
        };
        entry.1 = false;
        let id = format!(
            "synth:{}:lc|{}|completed",
            run.key,
            namespace_key(&namespace)
        );
        let data = json!({"event": "completed", "graph_name": graph_of(&namespace)});
        self.emit(Anchor::Synth(id), "lifecycle", namespace, data, None);
    }

    /// Completes every open subgraph namespace, deepest first, before the root ends.
    fn close_namespaces(&mut self) {
        let run = self.run_for_frame();
        let mut open: Vec<Vec<String>> = run
            .namespaces
            .iter()
            .filter(|(_, open)| *open)
            .map(|(namespace, _)| namespace.clone())
            .collect();
        open.sort_by_key(|namespace| std::cmp::Reverse(namespace.len()));
        for namespace in open {
            self.complete(namespace);
        }
    }

    fn values(&mut self, namespace: Vec<String>, data: Value) {
        self.run_for_frame();
        self.enter(&namespace);
        let data = match data {
            Value::Object(mut values) => {
                if let Some(interrupts) = values.remove("__interrupt__") {
                    self.interrupts(&namespace, &interrupts);
                }
                Value::Object(values)
            }
            other => other,
        };
        self.emit(Anchor::Frame, "values", namespace, data, None);
    }

    fn updates(&mut self, namespace: Vec<String>, data: Value) {
        self.run_for_frame();
        self.enter(&namespace);
        let (node, values) = match data {
            Value::Object(map) if map.len() == 1 => {
                let (node, values) = map.into_iter().next().unwrap_or_default();
                (Some(node), values)
            }
            other => (None, other),
        };
        if node.as_deref() == Some("__interrupt__") {
            self.interrupts(&namespace, &values);
            return;
        }
        if let Some(node) = node.as_deref().filter(|node| !node.starts_with("__")) {
            self.node_messages(&namespace, node, &values);
        }
        let values = match values {
            Value::Object(values) => Value::Object(values),
            other => json!({ "value": other }),
        };
        let mut data = json!({ "values": values });
        if let Some(node) = &node {
            data["node"] = json!(node);
        }
        self.emit(
            Anchor::Frame,
            "updates",
            namespace.clone(),
            data,
            node.clone(),
        );
        // The node's task is done: so is the subgraph it ran as.
        if let Some(node) = node {
            let prefix = format!("{node}:");
            let child = self
                .run_for_frame()
                .namespaces
                .iter()
                .find_map(|(known, open)| {
                    let last = known.last()?;
                    (*open
                        && known.len() == namespace.len() + 1
                        && known.starts_with(&namespace)
                        && (last.starts_with(&prefix) || *last == node))
                        .then(|| known.clone())
                });
            if let Some(child) = child {
                self.complete(child);
            }
        }
    }

    /// The protocol's checkpoint envelope (`id`, `parent_id`, `step`, `source`) of a
    /// checkpoint snapshot; clients fetch the state itself when they need it.
    fn checkpoint(&mut self, namespace: Vec<String>, data: &Value) {
        let id_of = |config: &str| {
            data.pointer(&format!("/{config}/configurable/checkpoint_id"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let Some(id) = id_of("config") else {
            return;
        };
        self.run_for_frame();
        self.enter(&namespace);
        let metadata = data.get("metadata");
        let mut envelope = json!({
            "id": id,
            "step": metadata.and_then(|m| m.get("step")).cloned().unwrap_or(json!(0)),
            "source": metadata.and_then(|m| m.get("source")).cloned().unwrap_or(json!("loop")),
        });
        if let Some(parent) = id_of("parent_config") {
            envelope["parent_id"] = json!(parent);
        }
        let run = self.run_for_frame();
        let event_id = format!(
            "synth:{}:checkpoint|{}|{id}",
            run.key,
            namespace_key(&namespace)
        );
        self.emit(
            Anchor::Synth(event_id),
            "checkpoints",
            namespace,
            envelope,
            None,
        );
    }

    /// `input.requested` for each interrupt not announced yet, then the root's
    /// `interrupted` (the run pauses until answered).
    fn interrupts(&mut self, namespace: &[String], interrupts: &Value) {
        let mut any = false;
        for interrupt in interrupts.as_array().into_iter().flatten() {
            let Some(id) = interrupt.get("id").and_then(Value::as_str) else {
                continue;
            };
            let run = self.run_for_frame();
            if !run.interrupts.insert(id.to_owned()) {
                continue;
            }
            let event_id = format!("synth:{}:input|{}|{id}", run.key, namespace_key(namespace));
            let payload = interrupt.get("value").cloned().unwrap_or(Value::Null);
            // The protocol names the value `payload`; the Python SDK reads `value`.
            let data = json!({"interrupt_id": id, "payload": payload, "value": payload});
            self.emit(
                Anchor::Synth(event_id),
                "input.requested",
                namespace.to_vec(),
                data,
                None,
            );
            any = true;
        }
        if any && !self.run_for_frame().ended {
            self.finish_messages();
            self.root_lifecycle("interrupted", None);
        }
    }

    /// One `[message chunk, metadata]` pair of a model's streamed output.
    fn message_chunk(&mut self, namespace: Vec<String>, data: Value) {
        self.run_for_frame();
        self.enter(&namespace);
        let (chunk, metadata) = match data {
            Value::Array(mut pair) if pair.len() == 2 => {
                let metadata = pair.pop().unwrap_or_default();
                (pair.pop().unwrap_or_default(), metadata)
            }
            other => (other, Value::Null),
        };
        let node = metadata
            .get("langgraph_node")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let id = chunk
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("msg-{}", self.frame_id), str::to_owned);
        let text = text_of(chunk.get("content"));
        let run = self.run_for_frame();
        let is_new = !run.open_messages.contains_key(&id);
        if is_new {
            run.open_messages
                .insert(id.clone(), (namespace.clone(), String::new()));
            run.sent_messages.insert(id.clone());
            let role = chunk
                .get("type")
                .and_then(Value::as_str)
                .and_then(role_of)
                .unwrap_or("ai");
            let mut start = json!({"event": "message-start", "role": role, "id": id});
            if let Some(node) = &node {
                start["metadata"] = json!({ "langgraph_node": node });
            }
            self.emit(
                Anchor::Frame,
                "messages",
                namespace.clone(),
                start,
                node.clone(),
            );
            let block = json!({"event": "content-block-start", "index": 0, "id": id,
                               "content": {"type": "text", "text": ""}});
            self.emit(
                Anchor::Frame,
                "messages",
                namespace.clone(),
                block,
                node.clone(),
            );
        }
        if !text.is_empty() {
            if let Some((_, so_far)) = self.run_for_frame().open_messages.get_mut(&id) {
                so_far.push_str(&text);
            }
            let delta = json!({"event": "content-block-delta", "index": 0, "id": id,
                               "delta": {"type": "text-delta", "text": text}});
            self.emit(Anchor::Frame, "messages", namespace, delta, node);
        }
        if chunk.get("chunk_position").and_then(Value::as_str) == Some("last") {
            self.finish_message(&id);
        }
    }

    /// Finishes a streamed message: its block with the whole text, then the message.
    fn finish_message(&mut self, id: &str) {
        let Some((namespace, text)) = self.run_for_frame().open_messages.remove(id) else {
            return;
        };
        let block = json!({"event": "content-block-finish", "index": 0, "id": id,
                           "content": {"type": "text", "text": text}});
        self.emit(Anchor::Frame, "messages", namespace.clone(), block, None);
        let finish = json!({"event": "message-finish", "id": id});
        self.emit(Anchor::Frame, "messages", namespace, finish, None);
    }

    fn finish_messages(&mut self) {
        let mut open: Vec<String> = self.run_for_frame().open_messages.keys().cloned().collect();
        open.sort();
        for id in open {
            self.finish_message(&id);
        }
    }

    /// Messages a node returned: finishes the ones streamed before, and sends each
    /// other one whole, as the runtime's messages stream reports messages nodes return.
    fn node_messages(&mut self, namespace: &[String], node: &str, values: &Value) {
        let messages: Vec<&Value> = match values.get("messages") {
            Some(Value::Array(list)) => list.iter().collect(),
            Some(message @ Value::Object(_)) => vec![message],
            _ => return,
        };
        for (index, message) in messages.into_iter().enumerate() {
            let Some(role) = message
                .get("type")
                .or_else(|| message.get("role"))
                .and_then(Value::as_str)
                .and_then(role_of)
            else {
                continue;
            };
            let id = message
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("msg-{}-{index}", self.frame_id), str::to_owned);
            let run = self.run_for_frame();
            if run.open_messages.contains_key(&id) {
                self.finish_message(&id);
                continue;
            }
            if !run.sent_messages.insert(id.clone()) {
                continue;
            }
            let text = text_of(message.get("content"));
            let node = Some(node.to_owned());
            let ns = namespace.to_vec();
            let events = [
                json!({"event": "message-start", "role": role, "id": id,
                       "metadata": {"langgraph_node": node}}),
                json!({"event": "content-block-start", "index": 0, "id": id,
                       "content": {"type": "text", "text": ""}}),
                json!({"event": "content-block-delta", "index": 0, "id": id,
                       "delta": {"type": "text-delta", "text": text}}),
                json!({"event": "content-block-finish", "index": 0, "id": id,
                       "content": {"type": "text", "text": text}}),
                json!({"event": "message-finish", "id": id}),
            ];
            for data in events {
                self.emit(Anchor::Frame, "messages", ns.clone(), data, node.clone());
            }
        }
    }

    fn emit(
        &mut self,
        anchor: Anchor,
        method: &str,
        namespace: Vec<String>,
        data: Value,
        node: Option<String>,
    ) {
        let event_id = match anchor {
            Anchor::Synth(id) => id,
            Anchor::Frame => {
                let n = self.frame_events;
                self.frame_events += 1;
                if n == 0 {
                    self.frame_id.clone()
                } else {
                    format!("{}.{n}", self.frame_id)
                }
            }
        };
        self.seq += 1;
        self.out.push(ProtocolEvent {
            kind: EventType::Event,
            event_id,
            seq: self.seq,
            method: method.to_owned(),
            params: EventParams {
                namespace,
                timestamp: self.frame_millis,
                data,
                node,
            },
        });
    }
}

#[cfg(test)]
mod tests;
