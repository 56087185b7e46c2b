//! Subgraphs: a compiled graph run as one node of its parent. The child runs on the
//! parent's thread under a checkpoint namespace of its own (`node:task_id`, nested
//! levels joined by `|`, as LangGraph names them), so its checkpoints, interrupts and
//! state are its own; the parent sees one task whose update is what the child changed
//! of the parent's keys, or whose interrupts are the child's.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use service_graph::{CheckpointConfig, Checkpointer, FinalState, GraphError, RunInput};

use crate::channel::{Channel, Reducer};
use crate::graph::{GraphDef, Node};
use crate::pregel::{Outcome, Run};
use crate::stored::{Loaded, Output, RaisedInterrupt};

/// Separates the levels of a nested namespace.
const LEVEL_SEPARATOR: &str = "|";

/// The namespace of the child a task of `node` runs, under `parent` (empty at the
/// root).
pub(crate) fn child_namespace(parent: &str, node: &str, task_id: &str) -> String {
    if parent.is_empty() {
        format!("{node}:{task_id}")
    } else {
        format!("{parent}{LEVEL_SEPARATOR}{node}:{task_id}")
    }
}

impl Run {
    /// A task of a subgraph node: the child run to its end or pause. A task answered
    /// with resume values resumes the child at its pause, each value sent to the
    /// child's interrupt the parent recorded at that position.
    pub(crate) fn subgraph_task(
        &self,
        current: &Loaded,
        node: &str,
        id: &str,
        resume: BTreeMap<usize, Value>,
        child: Arc<GraphDef>,
    ) -> BoxFuture<'static, Outcome> {
        let namespace = child_namespace(&self.thread.checkpoint_ns, node, id);
        let before = current.body.channel_values.clone();
        let answers: Option<Map<String, Value>> = (!resume.is_empty()).then(|| {
            let raised = current.writes_of(id).interrupts;
            resume
                .into_iter()
                .filter_map(|(index, value)| {
                    let child_interrupt = raised.iter().find(|r| r.index == index)?;
                    Some((child_interrupt.id.clone(), value))
                })
                .collect()
        });
        let mut options = self.options.clone();
        // Pauses before or after nodes name the parent's nodes.
        options.interrupt_before = None;
        options.interrupt_after = None;
        // A subgraph's namespace may hold an earlier call's checkpoints.
        options.thread_is_new = false;
        let run = Run {
            def: child,
            saver: Arc::clone(&self.saver),
            thread: CheckpointConfig {
                thread_id: self.thread.thread_id.clone(),
                checkpoint_ns: namespace,
                checkpoint_id: None,
            },
            options,
            store: self.store.clone(),
            cancel: self.cancel.clone(),
            emit: self.emit.nested(node, id),
            final_state: FinalState::default(),
        };
        let channels = self.def.channels.clone();
        Box::pin(async move {
            let input = match answers {
                None => RunInput::Values(Value::Object(before.clone())),
                Some(answers) => match resume_command(&run, answers).await {
                    Ok(command) => command,
                    Err(error) => return Outcome::Failed(error.to_run_error()),
                },
            };
            match run.run_to_end(input).await {
                Ok(_) => match child_outcome(&run, &channels, &before).await {
                    Ok(outcome) => outcome,
                    Err(error) => Outcome::Failed(error.to_run_error()),
                },
                Err(GraphError::NodeFailed { error, .. }) => Outcome::Failed(*error),
                Err(error) => Outcome::Failed(error.to_run_error()),
            }
        })
    }
}

/// The command resuming the child with `answers` (by the child's interrupt ids). When
/// the child's state was updated since it paused, its interrupt is pending under a
/// new id: a single answer then goes as a plain value, which reaches it all the same.
async fn resume_command(run: &Run, answers: Map<String, Value>) -> Result<RunInput, GraphError> {
    let pending: Vec<String> = match run.saver.get_tuple(&run.thread).await? {
        Some(latest) => Loaded::new(latest)?
            .snapshot()
            .interrupts()
            .into_iter()
            .map(|interrupt| interrupt.id)
            .collect(),
        None => Vec::new(),
    };
    let by_id = answers.keys().all(|id| pending.contains(id));
    let resume = match (by_id, answers.len()) {
        (false, 1) => answers.into_iter().next().map(|(_, value)| value),
        _ => Some(Value::Object(answers)),
    };
    Ok(RunInput::Command(json!({ "resume": resume })))
}

/// How the child's run left it: paused on interrupts (the parent's task raises them,
/// ids kept), or done with its changes to the parent's keys as the task's update.
async fn child_outcome(
    run: &Run,
    channels: &[(String, Channel)],
    before: &Map<String, Value>,
) -> Result<Outcome, GraphError> {
    let Some(latest) = run.saver.get_tuple(&run.thread).await? else {
        return Ok(Outcome::Done(Output {
            update: Value::Null,
            goto: Vec::new(),
        }));
    };
    let snapshot = Loaded::new(latest)?.snapshot();
    let interrupts: Vec<RaisedInterrupt> = snapshot
        .interrupts()
        .into_iter()
        .enumerate()
        .map(|(index, interrupt)| RaisedInterrupt {
            id: interrupt.id,
            index,
            value: interrupt.value,
        })
        .collect();
    if !interrupts.is_empty() {
        return Ok(Outcome::Interrupted(interrupts));
    }
    let Value::Object(after) = snapshot.values else {
        return Err(GraphError::InvalidInput(
            "A subgraph's state must be an object".into(),
        ));
    };
    Ok(Outcome::Done(Output {
        update: changes(channels, before, after),
        goto: Vec::new(),
    }))
}

/// What the child changed of the parent's keys, as an update through the parent's
/// reducers: an appending key gets only the items added after the ones it passed in
/// (else they would be appended twice); messages merge by id, so all go back; other
/// keys get their new value.
fn changes(
    channels: &[(String, Channel)],
    before: &Map<String, Value>,
    mut after: Map<String, Value>,
) -> Value {
    let mut update = Map::new();
    for (key, channel) in channels {
        let Some(value) = after.remove(key) else {
            continue;
        };
        let old = before.get(key);
        if old == Some(&value) {
            continue;
        }
        let value = match (&channel.reducer, old, value) {
            (Reducer::Append, Some(Value::Array(old)), Value::Array(mut new))
                if new.starts_with(old) =>
            {
                Value::Array(new.split_off(old.len()))
            }
            (_, _, value) => value,
        };
        update.insert(key.clone(), value);
    }
    Value::Object(update)
}

/// The graph whose checkpoints live under `namespace` in a thread of `root`: each
/// level's `node:task_id` names a subgraph node; `None` when one names none.
pub(crate) fn graph_at(root: &Arc<GraphDef>, namespace: &str) -> Option<Arc<GraphDef>> {
    let mut def = Arc::clone(root);
    if namespace.is_empty() {
        return Some(def);
    }
    for level in namespace.split(LEVEL_SEPARATOR) {
        let node = level.split(':').next().unwrap_or(level);
        let Some(Node::Graph(child)) = def.node(node) else {
            return None;
        };
        def = Arc::clone(child);
    }
    Some(def)
}

/// Fills in the subgraph tasks of `snapshot` (a checkpoint of the graph `def` under
/// namespace `parent`): each gets its child's coordinates and, with `nested`, the
/// child's latest state, itself filled in likewise.
pub(crate) fn fill_subgraph_tasks<'a>(
    def: &'a GraphDef,
    saver: &'a Arc<dyn Checkpointer>,
    thread_id: &'a str,
    parent: &'a str,
    snapshot: &'a mut service_graph::StateSnapshot,
    nested: bool,
) -> BoxFuture<'a, Result<(), GraphError>> {
    Box::pin(async move {
        for task in &mut snapshot.tasks {
            let Some(Node::Graph(child)) = def.node(&task.name) else {
                continue;
            };
            let coordinates = CheckpointConfig {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: child_namespace(parent, &task.name, &task.id),
                checkpoint_id: None,
            };
            let Some(latest) = saver.get_tuple(&coordinates).await? else {
                continue;
            };
            if nested {
                let mut state = Loaded::new(latest)?.snapshot();
                let namespace = coordinates.checkpoint_ns.clone();
                fill_subgraph_tasks(child, saver, thread_id, &namespace, &mut state, true).await?;
                task.state = Some(Box::new(state));
            }
            task.checkpoint = Some(coordinates);
        }
        Ok(())
    })
}

/// The subgraphs of `def` as LangGraph's `get_subgraphs` lists them: direct ones by
/// node name; with `recurse`, nested ones too as `node|inner`; with `namespace`, only
/// the one it names (and, recursing, what lies under it).
pub(crate) fn subgraphs_of(
    def: &GraphDef,
    namespace: Option<&str>,
    recurse: bool,
) -> Vec<(String, Arc<GraphDef>)> {
    let mut found = Vec::new();
    for (name, node) in &def.nodes {
        let Node::Graph(child) = node else {
            continue;
        };
        let rest = match namespace {
            None => None,
            Some(wanted) if wanted == name => {
                found.push((name.clone(), Arc::clone(child)));
                return found;
            }
            Some(wanted) => match wanted.strip_prefix(&format!("{name}{LEVEL_SEPARATOR}")) {
                Some(rest) => Some(rest),
                None => continue,
            },
        };
        if namespace.is_none() {
            found.push((name.clone(), Arc::clone(child)));
        }
        if recurse || rest.is_some() {
            found.extend(
                subgraphs_of(child, rest, recurse)
                    .into_iter()
                    .map(|(inner, graph)| (format!("{name}{LEVEL_SEPARATOR}{inner}"), graph)),
            );
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(reducer: Reducer) -> Channel {
        Channel {
            reducer,
            schema: json!({}),
        }
    }

    #[test]
    fn a_subgraph_update_holds_only_what_the_child_changed() {
        let channels = vec![
            ("log".to_owned(), channel(Reducer::Append)),
            ("topic".to_owned(), channel(Reducer::LastValue)),
            ("kept".to_owned(), channel(Reducer::LastValue)),
        ];
        let before = json!({"log": ["a"], "topic": "x", "kept": 1});
        let after = json!({"log": ["a", "b"], "topic": "y", "kept": 1, "inner": true});
        let (Value::Object(before), Value::Object(after)) = (before, after) else {
            unreachable!()
        };
        assert_eq!(
            changes(&channels, &before, after),
            json!({"log": ["b"], "topic": "y"})
        );
    }

    #[test]
    fn namespaces_nest_with_a_bar() {
        assert_eq!(child_namespace("", "team", "t1"), "team:t1");
        assert_eq!(
            child_namespace("team:t1", "inner", "t2"),
            "team:t1|inner:t2"
        );
    }
}
