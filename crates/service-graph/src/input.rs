use std::fmt;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use service_types::{Durability, Metadata, NodeSelection, StreamMode};
use tokio_util::sync::CancellationToken;

use crate::{LongTermStore, RunnableConfig, StateSnapshot};

/// What a run hands the agent in place of LangGraph's input argument.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum RunInput {
    /// No input: continue from the current state (e.g. after `interrupt_before`).
    #[default]
    None,
    /// New input values.
    Values(Value),
    /// The run was created with a `command`: the complete command object (`resume`,
    /// `update`, `goto`, unknown fields kept).
    Command(Value),
}

impl RunInput {
    /// Builds the input from a run-creation body's `input` and `command`; a command
    /// wins, and a JSON `null` input means no input.
    pub fn from_request(input: Option<Value>, command: Option<Value>) -> Self {
        match (input, command) {
            (_, Some(command)) if !command.is_null() => Self::Command(command),
            (Some(input), _) if !input.is_null() => Self::Values(input),
            _ => Self::None,
        }
    }
}

/// Options of one run (LangGraph's `stream` options).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamOptions {
    /// Requested stream modes; an agent emits frames only for these (empty means
    /// `values`).
    pub stream_mode: Vec<StreamMode>,
    /// Whether subgraph frames are wanted (namespaced chunks).
    pub subgraphs: bool,
    /// Pause before these nodes run.
    pub interrupt_before: Option<NodeSelection>,
    /// Pause after these nodes run.
    pub interrupt_after: Option<NodeSelection>,
    /// Thread and checkpoint coordinates, run keys, tags, recursion limit.
    pub config: RunnableConfig,
    /// The run context object (assistant context).
    pub context: Metadata,
    /// Extra keys merged into the metadata of every checkpoint the run writes
    /// (`run_id`, `graph_id`, `assistant_id`, ...).
    pub metadata: Metadata,
    /// When the run's checkpoints are written: before the next superstep (`sync`) or
    /// while it runs (`async`, the default), all of them before the run ends.
    pub durability: Durability,
    /// The thread was made with this run, which is its first: it holds no checkpoint,
    /// so a runtime may skip reading one. `false` when not known so.
    pub thread_is_new: bool,
    /// The thread is deleted once the run settles (a stateless run's), so nothing
    /// reads its checkpoints after the run: a runtime may keep them to itself.
    pub thread_is_discarded: bool,
}

impl StreamOptions {
    /// Whether `mode` was requested (`values` when nothing was).
    pub fn wants(&self, mode: StreamMode) -> bool {
        if self.stream_mode.is_empty() {
            mode == StreamMode::Values
        } else {
            self.stream_mode.contains(&mode)
        }
    }
}

/// What the engine passes into every run call besides input and options.
#[derive(Clone, Default)]
pub struct RunContext {
    /// Cancelled when the run is cancelled; an agent must stop executing, not just
    /// stop yielding chunks.
    pub cancel: CancellationToken,
    /// The long-term store handle, when the server embeds one.
    pub store: Option<Arc<dyn LongTermStore>>,
    /// Where the agent may leave the state its run ended in.
    pub final_state: FinalState,
}

/// The state a run ended in, handed over by the agent before its chunk stream ends,
/// so the engine need not read it back through `get_state` (a round trip to the
/// checkpointer per run). An agent sets it only when its values, `next` and tasks
/// are what `get_state` on the thread would return at that moment (the engine reads
/// nothing else of it); left empty, the engine reads the state. A run that kept a
/// discarded thread's checkpoints to itself ([`StreamOptions::thread_is_discarded`])
/// sets it to where they ended, whatever the ending: nobody else can read them.
#[derive(Clone, Debug, Default)]
pub struct FinalState(Arc<Mutex<Option<StateSnapshot>>>);

impl FinalState {
    /// Hands over the state the run ended in.
    pub fn set(&self, snapshot: StateSnapshot) {
        *self.0.lock().unwrap_or_else(|poison| poison.into_inner()) = Some(snapshot);
    }

    /// The handed-over state, if the agent left one.
    pub fn take(&self) -> Option<StateSnapshot> {
        self.0
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take()
    }
}

impl RunContext {
    /// A context with this cancellation token and no store.
    pub fn new(cancel: CancellationToken) -> Self {
        Self {
            cancel,
            store: None,
            final_state: FinalState::default(),
        }
    }

    /// This context with a long-term store handle.
    pub fn with_store(mut self, store: Arc<dyn LongTermStore>) -> Self {
        self.store = Some(store);
        self
    }
}

impl fmt::Debug for RunContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunContext")
            .field("cancelled", &self.cancel.is_cancelled())
            .field("store", &self.store.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn command_wins_over_input() {
        let input = RunInput::from_request(Some(json!({"a": 1})), Some(json!({"resume": true})));
        assert_eq!(input, RunInput::Command(json!({"resume": true})));
        assert_eq!(
            RunInput::from_request(Some(Value::Null), None),
            RunInput::None
        );
    }

    #[test]
    fn node_selection_reads_star_or_list() {
        let all: NodeSelection = serde_json::from_value(json!("*")).unwrap();
        assert!(all.contains("anything"));
        let some: NodeSelection = serde_json::from_value(json!(["step"])).unwrap();
        assert!(some.contains("step") && !some.contains("other"));
    }

    #[test]
    fn values_is_the_default_mode() {
        let options = StreamOptions::default();
        assert!(options.wants(StreamMode::Values));
        assert!(!options.wants(StreamMode::Updates));
    }
}
