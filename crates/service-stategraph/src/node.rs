use std::any::Any;
use std::error::Error as StdError;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use service_graph::GraphError;
use service_types::RunError;

use crate::NodeContext;

/// A node body: the state in, an output (or a failure, or an interrupt) out.
pub(crate) type NodeFn = Arc<
    dyn Fn(Value, NodeContext) -> BoxFuture<'static, Result<NodeOutput, NodeError>> + Send + Sync,
>;

/// What a node returns.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeOutput {
    /// A state update (an object of key to value; `null` writes nothing).
    Update(Value),
    /// An update plus where to go next.
    Command(Command),
}

impl From<Value> for NodeOutput {
    fn from(update: Value) -> Self {
        Self::Update(update)
    }
}

impl From<Command> for NodeOutput {
    fn from(command: Command) -> Self {
        Self::Command(command)
    }
}

impl NodeOutput {
    pub(crate) fn into_parts(self) -> (Value, Vec<String>) {
        match self {
            Self::Update(update) => (update, Vec::new()),
            Self::Command(command) => (command.update.unwrap_or(Value::Null), command.goto),
        }
    }
}

/// LangGraph's `Command`: returned by a node (update, goto) or sent as run input
/// (resume, update, goto).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Command {
    /// State update applied through the reducers.
    pub update: Option<Value>,
    /// Nodes to run next instead of the node's edges.
    pub goto: Vec<String>,
    /// Resume value: a scalar for the one pending interrupt, or a map of interrupt
    /// id to value.
    pub resume: Option<Value>,
}

impl Command {
    /// A command that only moves to `node`.
    pub fn goto(node: impl Into<String>) -> Self {
        Self {
            goto: vec![node.into()],
            ..Self::default()
        }
    }

    /// This command with a state update.
    pub fn with_update(mut self, update: Value) -> Self {
        self.update = Some(update);
        self
    }

    /// Reads a wire command object. `update` may be an object or a list of
    /// `[key, value]` pairs; `goto` a node name or a list of them. A `Send` target
    /// (`{node, input}`) is refused: this runtime does not run fan-out sends.
    pub fn from_value(value: &Value) -> Result<Self, GraphError> {
        let Value::Object(map) = value else {
            return Err(GraphError::InvalidInput(
                "A command must be an object".into(),
            ));
        };
        let update = match map.get("update") {
            None | Some(Value::Null) => None,
            Some(Value::Object(update)) => Some(Value::Object(update.clone())),
            Some(Value::Array(pairs)) => Some(Value::Object(pairs_to_object(pairs)?)),
            Some(other) => {
                return Err(GraphError::InvalidInput(format!(
                    "Command update must be an object or a list of pairs, got {other}"
                )));
            }
        };
        let goto = match map.get("goto") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(node)) => vec![node.clone()],
            Some(Value::Array(targets)) => {
                targets.iter().map(goto_target).collect::<Result<_, _>>()?
            }
            Some(other) => vec![goto_target(other)?],
        };
        let resume = map
            .get("resume")
            .filter(|resume| !resume.is_null())
            .cloned();
        Ok(Self {
            update,
            goto,
            resume,
        })
    }
}

fn pairs_to_object(pairs: &[Value]) -> Result<Map<String, Value>, GraphError> {
    pairs
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(key), value]) => Ok((key.clone(), value.clone())),
            _ => Err(GraphError::InvalidInput(format!(
                "Command update pairs must be [key, value], got {pair}"
            ))),
        })
        .collect()
}

fn goto_target(target: &Value) -> Result<String, GraphError> {
    match target {
        Value::String(node) => Ok(node.clone()),
        other => Err(GraphError::InvalidInput(format!(
            "Unsupported goto target {other}: only node names are supported"
        ))),
    }
}

/// Why a node did not return an output: it failed, or it paused on an interrupt.
#[derive(Debug)]
pub struct NodeError(pub(crate) NodeErrorKind);

#[derive(Debug)]
pub(crate) enum NodeErrorKind {
    /// Boxed: keeps `Result<_, NodeError>` small.
    Failed(Box<RunError>),
    Interrupted,
}

impl NodeError {
    /// A failure with this RunError (name, message, cause chain), and the stack of
    /// where it was made, for the log (and clients, when stacks are exposed).
    pub fn failed(error: RunError) -> Self {
        Self(NodeErrorKind::Failed(Box::new(
            service_graph::with_captured_stack(error),
        )))
    }

    /// The pause signal [`NodeContext::interrupt`] returns; propagate it with `?`.
    pub(crate) fn interrupted() -> Self {
        Self(NodeErrorKind::Interrupted)
    }
}

/// Any error converts with `?`: a [`RunError`] is kept as is; other errors are named
/// after their type and keep their `source()` chain as causes.
impl<E: StdError + Send + Sync + 'static> From<E> for NodeError {
    fn from(error: E) -> Self {
        if let Some(run_error) = (&error as &dyn Any).downcast_ref::<RunError>() {
            return Self::failed(run_error.clone());
        }
        Self::failed(RunError::from_error(type_name::<E>(), &error))
    }
}

/// The last path segment of a type name, generics dropped: `my::Error<T>` -> `Error`.
fn type_name<T>() -> String {
    let full = std::any::type_name::<T>();
    let plain = full.split('<').next().unwrap_or(full);
    plain.rsplit("::").next().unwrap_or(plain).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn command_object_keeps_update_goto_and_resume() {
        let command = Command::from_value(&json!({
            "update": [["count", 2]], "goto": "step", "resume": true, "extra": 1
        }))
        .unwrap();
        assert_eq!(command.update, Some(json!({"count": 2})));
        assert_eq!(command.goto, vec!["step".to_owned()]);
        assert_eq!(command.resume, Some(json!(true)));
    }

    #[test]
    fn send_targets_are_refused() {
        let result = Command::from_value(&json!({"goto": {"node": "a", "input": {}}}));
        assert!(matches!(result, Err(GraphError::InvalidInput(_))));
    }

    #[test]
    fn run_errors_convert_unchanged_and_others_by_type_name() {
        let error = RunError::new("ValueError", "boom")
            .with_cause(RunError::new("RuntimeError", "root cause"));
        let NodeError(NodeErrorKind::Failed(kept)) = NodeError::from(error.clone()) else {
            panic!("expected a failure");
        };
        assert!(kept.stack.is_some(), "the stack of where it failed");
        assert_eq!(kept.without_stacks(), error);
        let parse = serde_json::from_str::<Value>("{").unwrap_err();
        let NodeError(NodeErrorKind::Failed(named)) = NodeError::from(parse) else {
            panic!("expected a failure");
        };
        assert_eq!(named.error, "Error");
    }
}
