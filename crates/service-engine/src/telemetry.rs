//! What a run tells operators (SPEC "Logging", "Telemetry"): the failure report logged
//! at error level for every failed run, the run-activity lines `--verbose` turns on,
//! the load-failure report of a graph, and the telemetry sinks an embedder registers.
//! Everything is a `tracing` event with fields; how it reads (a text block, a JSON
//! line, an embedder's own logger) is the subscriber's choice.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;
use service_graph::{Chunk, GraphError, StateSnapshot};
use service_types::{Run, RunError, RunStatus};
use uuid::Uuid;

/// The target of a failed run's report (fields `run_id`, `assistant_id`,
/// `thread_id`, `graph_id`, `node`, `error`, `cause`, `code_frame`, `stack`).
pub const FAILURE_TARGET: &str = "service_engine::run_failure";
/// The target of a graph's load-failure report (fields `graph_id`, `error`).
pub const LOAD_FAILURE_TARGET: &str = "service_engine::graph_load";
/// The target of the run-activity lines (`--verbose`, SPEC `logRunActivity`).
pub const ACTIVITY_TARGET: &str = "service_engine::run_activity";

/// Receives run events (SPEC "Telemetry"): register one with
/// [`Engine::add_telemetry_sink`](crate::Engine::add_telemetry_sink).
///
/// `on_run_event` is called on the task settling the run, after the run is settled:
/// return quickly (hand slow work to a task of your own). A sink that panics is
/// logged and the others still receive the event.
pub trait TelemetrySink: Send + Sync {
    /// The sink's name, for the log when it fails.
    fn name(&self) -> &str;
    /// One event of a run.
    fn on_run_event(&self, event: &RunEvent);
}

/// An event of a run, as telemetry sinks receive it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum RunEvent {
    /// `run.finished`: the run settled, whatever its status.
    Finished(RunFinished),
}

impl RunEvent {
    /// The event's type: `run.finished`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Finished(_) => "run.finished",
        }
    }
}

/// A run that settled.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunFinished {
    /// The run.
    pub run_id: Uuid,
    /// Its thread.
    pub thread_id: Uuid,
    /// Its assistant.
    pub assistant_id: Uuid,
    /// The graph it ran (empty when its options did not decode).
    pub graph_id: String,
    /// How it settled.
    pub status: RunStatus,
    /// From its worker taking it to its settle.
    pub duration: Duration,
    /// Frames it published.
    pub frames: usize,
    /// The RunError as clients see it (a stack only when stacks are exposed).
    pub error: Option<RunError>,
    /// The node that threw, when known.
    pub node: Option<String>,
    /// The original error: its full stack and cause chain, whatever the stack setting.
    pub original: Option<RunError>,
    /// The graph's own error value, when the run failed with one.
    pub graph_error: Option<Arc<GraphError>>,
}

/// Why a run failed: the error (its stack included), the node that threw, and the
/// graph's error it came from.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub(crate) error: RunError,
    pub(crate) node: Option<String>,
    pub(crate) source: Option<Arc<GraphError>>,
}

impl Failure {
    /// A failure the engine itself decided (bad options, a lost claim, a frame that
    /// could not be written).
    pub(crate) fn of(error: RunError) -> Self {
        Self {
            error,
            node: None,
            source: None,
        }
    }

    /// A failure the graph reported. Without a stack of its own, the error gets the
    /// node and graph frames, so a stack is there for the log (and for clients when
    /// they are exposed) whatever the runtime.
    pub(crate) fn of_graph(error: GraphError, graph_id: &str) -> Self {
        let node = match &error {
            GraphError::NodeFailed { node, .. } => Some(node.clone()),
            _ => None,
        };
        let mut run_error = error.to_run_error();
        if run_error.stack.is_none() {
            let mut stack = format!("{}: {}", run_error.error, run_error.message);
            if let Some(node) = &node {
                stack.push_str(&format!("\n    at node {node}"));
            }
            stack.push_str(&format!("\n    at graph {graph_id}"));
            run_error.stack = Some(stack);
        }
        Self {
            error: run_error,
            node,
            source: Some(Arc::new(error)),
        }
    }
}

/// The sinks and the run-activity switch, shared by the engine's driver and settler.
#[derive(Clone, Default)]
pub(crate) struct Observers {
    sinks: Arc<RwLock<Vec<Arc<dyn TelemetrySink>>>>,
    activity: Arc<AtomicBool>,
}

impl Observers {
    pub(crate) fn add_sink(&self, sink: Arc<dyn TelemetrySink>) {
        self.sinks
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(sink);
    }

    pub(crate) fn has_sinks(&self) -> bool {
        !self
            .sinks
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_empty()
    }

    pub(crate) fn logs_activity(&self) -> bool {
        self.activity.load(Ordering::Relaxed)
    }

    pub(crate) fn set_log_activity(&self, on: bool) {
        self.activity.store(on, Ordering::Relaxed);
    }

    /// Hands `event` to every sink; one that panics is logged, the rest still run.
    pub(crate) fn emit(&self, event: &RunEvent) {
        let sinks = self
            .sinks
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        for sink in sinks {
            let delivered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sink.on_run_event(event);
            }));
            if delivered.is_err() {
                tracing::error!(
                    sink = sink.name(),
                    event = event.kind(),
                    "a telemetry sink panicked"
                );
            }
        }
    }
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observers")
            .field("activity", &self.logs_activity())
            .finish_non_exhaustive()
    }
}

/// Whether anyone reads failure reports: the work of naming the node and reading
/// the code frame is skipped otherwise.
pub(crate) fn failure_report_listened() -> bool {
    tracing::enabled!(target: FAILURE_TARGET, tracing::Level::ERROR)
}

/// The node a failed run's state names: the task that recorded an error.
pub(crate) fn failed_node(snapshot: &StateSnapshot) -> Option<String> {
    snapshot
        .tasks
        .iter()
        .find(|task| task.error.is_some())
        .map(|task| task.name.clone())
}

/// Logs the failure report of a run, always at error level.
pub(crate) fn report_failure(run: &Run, graph_id: &str, failure: &Failure) {
    let error = &failure.error;
    let cause = error
        .chain()
        .skip(1)
        .map(|link| format!("{}: {}", link.error, link.message))
        .collect::<Vec<_>>()
        .join("\n");
    let stack = error.stack.as_deref();
    // A file read: only for a subscriber that takes the report.
    let code_frame = stack
        .filter(|_| failure_report_listened())
        .and_then(code_frame);
    tracing::error!(
        target: FAILURE_TARGET,
        run_id = %run.run_id,
        assistant_id = %run.assistant_id,
        thread_id = %run.thread_id,
        graph_id,
        node = failure.node.as_deref(),
        error = %error,
        cause = (!cause.is_empty()).then_some(cause.as_str()),
        code_frame = code_frame.as_deref(),
        stack,
        "run failed"
    );
}

/// Logs a graph that cannot load, always at error level.
pub(crate) fn report_load_failure(graph_id: &str, reason: &str) {
    tracing::error!(
        target: LOAD_FAILURE_TARGET,
        graph_id,
        error = reason,
        "graph failed to load"
    );
}

/// Lines of source around the first frame of `stack` whose file can be read here:
/// `at symbol (file:line:col)` (Rust and JS) or `File "file", line N` (Python).
pub(crate) fn code_frame(stack: &str) -> Option<String> {
    stack.lines().find_map(|line| {
        let (file, number) = frame_location(line.trim())?;
        let source = std::fs::read_to_string(file).ok()?;
        let lines: Vec<&str> = source.lines().collect();
        let at = number.checked_sub(1).filter(|at| *at < lines.len())?;
        let first = at.saturating_sub(2);
        let last = (at + 2).min(lines.len() - 1);
        let mut frame = format!("{file}:{number}");
        for (index, text) in lines.iter().enumerate().take(last + 1).skip(first) {
            let marker = if index == at { '>' } else { ' ' };
            frame.push_str(&format!("\n{marker} {:>4} | {text}", index + 1));
        }
        Some(frame)
    })
}

/// The file and line one stack line names.
fn frame_location(line: &str) -> Option<(&str, usize)> {
    if let Some(rest) = line.strip_prefix("File \"") {
        let (file, rest) = rest.split_once('"')?;
        let number = rest.strip_prefix(", line ")?;
        let number = number.split(|c: char| !c.is_ascii_digit()).next()?;
        return Some((file, number.parse().ok()?));
    }
    let rest = line.strip_prefix("at ")?;
    let inside = match rest.rsplit_once('(') {
        Some((_, inside)) => inside.strip_suffix(')')?,
        None => rest,
    };
    // `file:line:col`, or `file:line`.
    let mut parts = inside.rsplitn(3, ':');
    let last = parts.next()?;
    let middle = parts.next()?;
    match parts.next() {
        Some(file) if middle.parse::<usize>().is_ok() => Some((file, middle.parse().ok()?)),
        _ => Some((middle, last.parse().ok()?)),
    }
}

/// The run-activity lines of one run (`--verbose`): its tool calls and their results,
/// each once however many stream modes repeat it.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    seen: HashSet<String>,
}

/// A tool call or a tool's result, as the activity log names it.
#[derive(Debug, PartialEq)]
enum ToolStep {
    Call {
        tool: String,
        id: String,
        args: String,
    },
    Result {
        tool: String,
        id: String,
        content: String,
    },
}

impl Activity {
    /// Logs the tool calls and results `chunk` shows for the first time.
    pub(crate) fn observe(&mut self, run: &Run, chunk: &Chunk) {
        for step in self.steps(&chunk.data()) {
            match step {
                ToolStep::Call { tool, id, args } => tracing::info!(
                    target: ACTIVITY_TARGET,
                    run_id = %run.run_id,
                    thread_id = %run.thread_id,
                    assistant_id = %run.assistant_id,
                    tool,
                    tool_call_id = id,
                    args,
                    "tool call"
                ),
                ToolStep::Result { tool, id, content } => tracing::info!(
                    target: ACTIVITY_TARGET,
                    run_id = %run.run_id,
                    thread_id = %run.thread_id,
                    assistant_id = %run.assistant_id,
                    tool,
                    tool_call_id = id,
                    result = content,
                    "tool result"
                ),
            }
        }
    }

    /// The tool calls and results in a chunk's data not seen before.
    fn steps(&mut self, data: &Value) -> Vec<ToolStep> {
        let mut messages = Vec::new();
        collect_messages(data, &mut messages, 0);
        let mut steps = Vec::new();
        for message in messages {
            let text = |value: &Value, key: &str| {
                value
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let kind = text(message, "type");
            // Streamed pieces carry partial arguments; the whole message follows.
            if kind.ends_with("Chunk") {
                continue;
            }
            for call in message
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (tool, id) = (text(call, "name"), text(call, "id"));
                if !tool.is_empty() && self.seen.insert(format!("call:{id}:{tool}")) {
                    let args = call.get("args").map(clipped).unwrap_or_default();
                    steps.push(ToolStep::Call { tool, id, args });
                }
            }
            let id = text(message, "tool_call_id");
            if kind == "tool" && self.seen.insert(format!("result:{id}")) {
                steps.push(ToolStep::Result {
                    tool: text(message, "name"),
                    id,
                    content: message.get("content").map(clipped).unwrap_or_default(),
                });
            }
        }
        steps
    }
}

/// Message objects anywhere in a chunk's data (a `values` state, an `updates` map of
/// nodes, a `messages` pair), a few levels deep.
fn collect_messages<'a>(value: &'a Value, into: &mut Vec<&'a Value>, depth: usize) {
    if depth > 4 {
        return;
    }
    match value {
        Value::Object(map) if map.contains_key("type") && map.contains_key("content") => {
            into.push(value);
        }
        Value::Object(map) => {
            for member in map.values() {
                collect_messages(member, into, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_messages(item, into, depth + 1);
            }
        }
        _ => {}
    }
}

/// A value for one log line: text as it is, anything else as JSON, cut at 500 bytes.
fn clipped(value: &Value) -> String {
    let mut text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if text.len() > 500 {
        let mut cut = 500;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Logs a run's start (`--verbose`).
pub(crate) fn run_started(run: &Run, graph_id: &str) {
    tracing::info!(
        target: ACTIVITY_TARGET,
        run_id = %run.run_id,
        thread_id = %run.thread_id,
        assistant_id = %run.assistant_id,
        graph_id,
        "run started"
    );
}

/// Logs the interrupts a paused run waits on (`--verbose`).
pub(crate) fn interrupt_prompts(run: &Run, interrupts: &Value) {
    tracing::info!(
        target: ACTIVITY_TARGET,
        run_id = %run.run_id,
        thread_id = %run.thread_id,
        assistant_id = %run.assistant_id,
        interrupts = %clipped(interrupts),
        "run interrupted"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frame_locations_of_rust_js_and_python_stacks() {
        assert_eq!(
            frame_location("at my_graph::explode::{{closure}} (./src/nodes.rs:12:5)"),
            Some(("./src/nodes.rs", 12))
        );
        assert_eq!(
            frame_location("at explode (/app/src/agent.ts:40:11)"),
            Some(("/app/src/agent.ts", 40))
        );
        assert_eq!(
            frame_location("File \"/app/agent.py\", line 7, in explode"),
            Some(("/app/agent.py", 7))
        );
        assert_eq!(frame_location("ValueError: boom"), None);
    }

    #[test]
    fn the_code_frame_marks_the_failing_line() {
        let path = std::env::temp_dir().join(format!("code-frame-{}.py", std::process::id()));
        std::fs::write(&path, "a = 1\nb = 2\nraise ValueError('boom')\nc = 3\n").unwrap();
        let stack = format!(
            "Traceback (most recent call last):\n  File \"{}\", line 3, in <module>\nValueError: boom",
            path.display()
        );
        let frame = code_frame(&stack).expect("a code frame");
        assert!(
            frame.contains(">    3 | raise ValueError('boom')"),
            "{frame}"
        );
        assert!(frame.contains("     1 | a = 1"), "{frame}");
        assert!(code_frame("E: m\n    at node x").is_none());
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn each_tool_call_and_result_is_logged_once_however_often_streamed() {
        let call = json!({"type": "ai", "content": "", "tool_calls": [
            {"id": "c1", "name": "search", "args": {"q": "weather"}}
        ]});
        let result =
            json!({"type": "tool", "content": "sunny", "name": "search", "tool_call_id": "c1"});
        let mut activity = Activity::default();
        let partial = json!([{"type": "AIMessageChunk", "content": "", "tool_calls": [
            {"id": "c1", "name": "search", "args": {}}
        ]}, {}]);
        assert_eq!(activity.steps(&partial), []);
        assert_eq!(
            activity.steps(&json!({"agent": {"messages": [call.clone()]}})),
            [ToolStep::Call {
                tool: "search".into(),
                id: "c1".into(),
                args: r#"{"q":"weather"}"#.into()
            }]
        );
        assert_eq!(
            activity.steps(&json!({"messages": [call, result]})),
            [ToolStep::Result {
                tool: "search".into(),
                id: "c1".into(),
                content: "sunny".into()
            }],
            "the call is not repeated"
        );
    }

    #[test]
    fn a_graph_error_without_a_stack_gets_its_node_and_graph_frames() {
        let failure = Failure::of_graph(
            GraphError::NodeFailed {
                node: "explode".into(),
                error: Box::new(RunError::new("ValueError", "boom")),
            },
            "agent",
        );
        assert_eq!(failure.node.as_deref(), Some("explode"));
        assert_eq!(
            failure.error.stack.as_deref(),
            Some("ValueError: boom\n    at node explode\n    at graph agent")
        );
    }
}
