//! A run's options: written once on its row at creation (the `kwargs` clients see),
//! read back by the worker that executes it and by joins of its stream. One type, so
//! what is written is what is read.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use service_graph::{RunnableConfig, StreamOptions};
use service_types::{
    Assistant, Config, Durability, Metadata, NodeSelection, OnCompletion, Run, RunCreate, RunError,
    StreamMode,
};
use uuid::Uuid;

/// Everything a worker needs to execute a run, as stored in `Run::kwargs`.
///
/// Fields a client may omit in its request are optional here; the others are always
/// written, so a row whose options lack them (or hold the wrong type) does not decode
/// and its run fails with [`RunOptions::decode`]'s error instead of running with
/// defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Graph input; `None` continues from the current state.
    pub input: Option<Value>,
    /// `{resume, update, goto, ...}`, handed to the graph whole.
    pub command: Option<Value>,
    /// The assistant's config with the request's over it; `configurable` names the
    /// run, thread, graph and assistant.
    pub config: Config,
    /// The assistant's context with the request's over it.
    pub context: Metadata,
    /// Requested stream modes (`["values"]` when the request named none).
    pub stream_mode: Vec<StreamMode>,
    /// Pause before these nodes.
    pub interrupt_before: Option<NodeSelection>,
    /// Pause after these nodes.
    pub interrupt_after: Option<NodeSelection>,
    /// Run-completion webhook URL.
    pub webhook: Option<String>,
    /// Feedback keys (tracing only).
    pub feedback_keys: Option<Vec<String>>,
    /// Stream frames of subgraphs too.
    pub subgraphs: bool,
    /// Frames carry ids, so a client can rejoin with `Last-Event-ID`.
    pub resumable: bool,
    /// Start from this checkpoint.
    pub checkpoint_id: Option<String>,
    /// The checkpoint namespace to start in.
    pub checkpoint_ns: Option<String>,
    /// Runs on a thread made for it (a stateless run).
    pub temporary: bool,
    /// What happens to a stateless run's thread once it settles.
    pub on_completion: OnCompletion,
    /// Checkpoint durability.
    pub durability: Option<Durability>,
    /// The `traceparent` a run created before `Run::traceparent` existed keeps in its
    /// options: read, never written (one JSON field per run cost more than its column).
    #[serde(default, skip_serializing)]
    pub traceparent: Option<String>,
    /// The thread was made with the run, and it was created claimed or its claim found
    /// no checkpoint on the thread: no checkpoint can be on it yet.
    /// Known only to the worker that took it (a retry after a crash may find the first
    /// attempt's), so never stored.
    #[serde(skip)]
    pub thread_is_new: bool,
}

/// Why a run's stored options cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RunOptionsError {
    /// They are not what [`RunOptions`] reads.
    #[error("the run's stored options do not decode at {path}")]
    Undecodable {
        /// Where, as a path into the options (`stream_mode`, `config.tags[0]`).
        path: String,
        /// What serde found there.
        #[source]
        source: serde_json::Error,
    },
    /// They name no graph to run.
    #[error("the run's stored options name no graph (config.configurable.graph_id)")]
    NoGraph,
}

impl RunOptionsError {
    /// The error the run fails with.
    pub fn to_run_error(&self) -> RunError {
        RunError::from_error("RunOptionsError", self)
    }
}

/// The run, thread, graph and assistant a run's options are written for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunIds<'a> {
    pub(crate) run_id: Uuid,
    pub(crate) thread_id: Uuid,
    pub(crate) assistant: &'a Assistant,
    pub(crate) stateless: bool,
}

impl RunOptions {
    /// The options of a run created from `body` on `assistant`: the assistant's config
    /// and context with the request's over them.
    pub(crate) fn new(body: &RunCreate, ids: RunIds<'_>) -> Self {
        let assistant = ids.assistant;
        let mut config: Config = assistant.config.clone();
        if let Some(request) = &body.config {
            if let Some(tags) = &request.tags {
                config.tags = Some(tags.clone());
            }
            if request.recursion_limit.is_some() {
                config.recursion_limit = request.recursion_limit;
            }
            let mut configurable = config.configurable.take().unwrap_or_default();
            configurable.extend(request.configurable.clone().unwrap_or_default());
            config.configurable = Some(configurable);
            config.extra.extend(request.extra.clone());
        }
        let configurable = config.configurable.get_or_insert_with(Metadata::new);
        configurable.insert("run_id".into(), Value::String(ids.run_id.to_string()));
        configurable.insert("thread_id".into(), Value::String(ids.thread_id.to_string()));
        configurable.insert("graph_id".into(), Value::String(assistant.graph_id.clone()));
        configurable.insert(
            "assistant_id".into(),
            Value::String(assistant.assistant_id.to_string()),
        );
        let mut context = assistant.context.clone();
        context.extend(body.context.clone().unwrap_or_default());
        let checkpoint = body.checkpoint.as_ref();
        Self {
            input: body.input.clone(),
            command: body.command.clone(),
            config,
            context,
            stream_mode: body.stream_modes(),
            interrupt_before: body.interrupt_before.clone(),
            interrupt_after: body.interrupt_after.clone(),
            webhook: body.webhook.clone(),
            feedback_keys: body.feedback_keys.clone(),
            subgraphs: body.stream_subgraphs.unwrap_or(false),
            resumable: body.stream_resumable.unwrap_or(false),
            checkpoint_id: body
                .checkpoint_id
                .clone()
                .or_else(|| checkpoint.and_then(|c| c.checkpoint_id.clone())),
            checkpoint_ns: checkpoint.map(|c| c.checkpoint_ns.clone()),
            temporary: ids.stateless,
            on_completion: body.on_completion.unwrap_or_default(),
            // `checkpoint_during` is the deprecated alias (false: only at exit).
            durability: body.durability.or(body.checkpoint_during.map(|during| {
                if during {
                    Durability::Async
                } else {
                    Durability::Exit
                }
            })),
            traceparent: None,
            thread_is_new: false,
        }
    }

    /// The options as stored on the row.
    pub(crate) fn to_kwargs(&self) -> Value {
        // Plain data with string keys: serializing cannot fail.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Reads a run's stored options; a row whose options do not decode (or name no
    /// graph) is an error the run fails with, never a run with defaults.
    pub fn decode(run: &Run) -> Result<Self, RunOptionsError> {
        let options = Self::deserialize(&run.kwargs).map_err(|plain| {
            // Read again with its path tracked (slower, so only now) to name where
            // the options went wrong.
            match serde_path_to_error::deserialize::<_, Self>(&run.kwargs) {
                Err(tracked) => RunOptionsError::Undecodable {
                    path: tracked.path().to_string(),
                    source: tracked.into_inner(),
                },
                Ok(_) => RunOptionsError::Undecodable {
                    path: String::from("?"),
                    source: plain,
                },
            }
        })?;
        if options.graph_id().is_none() {
            return Err(RunOptionsError::NoGraph);
        }
        Ok(options)
    }

    /// The graph the run executes.
    pub fn graph_id(&self) -> Option<&str> {
        self.config.configurable.as_ref()?.get("graph_id")?.as_str()
    }

    /// Whether a thread made for the run is deleted once it settles, so mirroring the
    /// run onto it is not worth a write.
    pub(crate) fn discards_thread(&self) -> bool {
        self.temporary && self.on_completion == OnCompletion::Delete
    }

    /// The graph call options: config and checkpoint coordinates, the requested modes,
    /// and the run keys every checkpoint records.
    pub(crate) fn stream_options(&self) -> StreamOptions {
        let mut config = RunnableConfig::from(self.config.clone());
        if let Some(checkpoint_id) = &self.checkpoint_id {
            config = config.with_checkpoint_id(checkpoint_id.clone());
        }
        if let Some(ns) = &self.checkpoint_ns {
            config
                .configurable
                .insert("checkpoint_ns".into(), Value::String(ns.clone()));
        }
        let mut metadata = Metadata::new();
        for key in ["run_id", "thread_id", "graph_id", "assistant_id"] {
            if let Some(value) = config.configurable.get(key) {
                metadata.insert(key.into(), value.clone());
            }
        }
        metadata.insert("run_attempt".into(), Value::from(1));
        StreamOptions {
            stream_mode: self.stream_mode.clone(),
            subgraphs: self.subgraphs,
            interrupt_before: self.interrupt_before.clone(),
            interrupt_after: self.interrupt_after.clone(),
            config,
            context: self.context.clone(),
            metadata,
            durability: self.durability.unwrap_or_default(),
            thread_is_new: self.thread_is_new,
            thread_is_discarded: self.discards_thread(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn assistant() -> Assistant {
        serde_json::from_value(json!({
            "assistant_id": "6e4f3b4e-0000-4000-8000-000000000001",
            "graph_id": "echo",
            "config": {"tags": ["a"], "configurable": {"model": "x"}},
            "context": {"tone": "dry"},
            "metadata": {},
            "name": "echo",
            "version": 1,
            "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T00:00:00+00:00",
        }))
        .unwrap()
    }

    fn run_with(kwargs: Value) -> Run {
        let mut run: Run = serde_json::from_value(json!({
            "run_id": "6e4f3b4e-0000-4000-8000-000000000002",
            "thread_id": "6e4f3b4e-0000-4000-8000-000000000003",
            "assistant_id": "6e4f3b4e-0000-4000-8000-000000000001",
            "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T00:00:00+00:00",
            "status": "pending",
            "metadata": {},
            "multitask_strategy": "reject",
            "kwargs": {},
        }))
        .unwrap();
        run.kwargs = kwargs;
        run
    }

    fn written(body: Value) -> RunOptions {
        let body: RunCreate = serde_json::from_value(body).unwrap();
        let assistant = assistant();
        RunOptions::new(
            &body,
            RunIds {
                run_id: Uuid::nil(),
                thread_id: Uuid::max(),
                assistant: &assistant,
                stateless: false,
            },
        )
    }

    #[test]
    fn durability_defaults_to_async_and_checkpoint_during_is_its_alias() {
        let durability = |body: Value| written(body).stream_options().durability;
        assert_eq!(
            durability(json!({"assistant_id": "echo"})),
            Durability::Async
        );
        assert_eq!(
            durability(json!({"assistant_id": "echo", "durability": "sync"})),
            Durability::Sync
        );
        assert_eq!(
            durability(json!({"assistant_id": "echo", "checkpoint_during": false})),
            Durability::Exit
        );
        assert_eq!(
            durability(json!({"assistant_id": "echo", "checkpoint_during": true})),
            Durability::Async
        );
        assert_eq!(
            durability(
                json!({"assistant_id": "echo", "durability": "sync", "checkpoint_during": false})
            ),
            Durability::Sync
        );
    }

    #[test]
    fn options_read_back_are_the_options_written() {
        let options = written(json!({
            "assistant_id": "echo",
            "input": {"n": 1},
            "config": {"configurable": {"user": "u"}, "recursion_limit": 5},
            "context": {"tone": "warm"},
            "stream_mode": ["updates", "custom"],
            "stream_resumable": true,
            "webhook": "http://127.0.0.1:9/hook",
            "checkpoint": {"checkpoint_ns": "", "checkpoint_id": "c1"},
        }));
        let decoded = RunOptions::decode(&run_with(options.to_kwargs())).unwrap();
        assert_eq!(decoded, options);
        assert_eq!(decoded.graph_id(), Some("echo"));
        assert!(decoded.resumable);
        assert_eq!(decoded.checkpoint_id.as_deref(), Some("c1"));
        assert_eq!(decoded.context["tone"], json!("warm"));
        let configurable = decoded.config.configurable.unwrap();
        assert_eq!(configurable["model"], json!("x"));
        assert_eq!(configurable["user"], json!("u"));
        assert_eq!(configurable["thread_id"], json!(Uuid::max().to_string()));
    }

    #[test]
    fn a_traceparent_in_older_options_is_read_and_never_written() {
        // A run stored before `Run::traceparent` kept the creating span's context here.
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut kwargs = written(json!({"assistant_id": "echo"})).to_kwargs();
        kwargs["traceparent"] = json!(traceparent);
        let decoded = RunOptions::decode(&run_with(kwargs)).unwrap();
        assert_eq!(decoded.traceparent.as_deref(), Some(traceparent));
        assert!(decoded.to_kwargs().get("traceparent").is_none());
    }

    #[test]
    fn the_stored_keys_are_the_ones_clients_see() {
        let kwargs = written(json!({"assistant_id": "echo"})).to_kwargs();
        let mut keys: Vec<&str> = kwargs
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "checkpoint_id",
                "checkpoint_ns",
                "command",
                "config",
                "context",
                "durability",
                "feedback_keys",
                "input",
                "interrupt_after",
                "interrupt_before",
                "on_completion",
                "resumable",
                "stream_mode",
                "subgraphs",
                "temporary",
                "webhook",
            ]
        );
        assert_eq!(kwargs["stream_mode"], json!(["values"]));
    }

    #[test]
    fn options_that_do_not_decode_are_an_error_not_defaults() {
        let mut kwargs = written(json!({"assistant_id": "echo"})).to_kwargs();
        kwargs["stream_mode"] = json!("values-and-more");
        let error = RunOptions::decode(&run_with(kwargs))
            .unwrap_err()
            .to_run_error();
        assert_eq!(error.error, "RunOptionsError");
        assert!(
            error.message.contains("at stream_mode"),
            "{}",
            error.message
        );
        assert!(error.cause.is_some(), "serde's error is kept as the cause");

        let error = RunOptions::decode(&run_with(json!({}))).unwrap_err();
        assert_eq!(error.to_run_error().error, "RunOptionsError");

        let mut kwargs = written(json!({"assistant_id": "echo"})).to_kwargs();
        kwargs["config"]["configurable"]
            .as_object_mut()
            .unwrap()
            .remove("graph_id");
        let error = RunOptions::decode(&run_with(kwargs)).unwrap_err();
        assert!(matches!(error, RunOptionsError::NoGraph), "{error}");
    }
}
