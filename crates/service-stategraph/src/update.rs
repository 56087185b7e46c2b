//! `update_state` and `bulk_update_state`: edits applied through the reducers as if
//! a node had written them, one checkpoint per superstep.

use serde_json::{Map, Value, json};
use service_graph::{CheckpointConfig, GraphError, StateUpdate};
use service_types::{JsonText, Metadata};

use crate::channel::apply_update;
use crate::node::Command;
use crate::stored::{Body, Loaded, metadata};
use crate::{CompiledGraph, START};

/// The pseudo-node that records an input checkpoint (LangGraph's `__input__`).
const INPUT: &str = "__input__";

impl CompiledGraph {
    /// The node an update is attributed to. Without `as_node`: the only node that
    /// wrote the base checkpoint, else the graph's only node, else none on a fresh
    /// thread; anything else is ambiguous.
    fn resolve_as_node(
        &self,
        base: Option<&Loaded>,
        as_node: Option<String>,
    ) -> Result<Option<String>, GraphError> {
        if let Some(node) = as_node {
            return if node == START || node == INPUT || self.def.has_node(&node) {
                Ok(Some(node))
            } else {
                Err(GraphError::InvalidInput(format!(
                    "Node {node} does not exist"
                )))
            };
        }
        let last_writers: Vec<&String> = base
            .and_then(|base| base.tuple.metadata.get("writes"))
            .and_then(Value::as_object)
            .map(|writes| {
                writes
                    .keys()
                    .filter(|node| self.def.has_node(node))
                    .collect()
            })
            .unwrap_or_default();
        match (last_writers.as_slice(), self.def.nodes.as_slice()) {
            ([node], _) => Ok(Some((*node).clone())),
            (_, [(node, _)]) => Ok(Some(node.clone())),
            _ if base.is_none() => Ok(None),
            _ => Err(GraphError::InvalidInput(
                "Ambiguous update, specify as_node".into(),
            )),
        }
    }

    /// Applies one superstep of updates on top of `base` and writes its checkpoint.
    pub(crate) async fn write_updates(
        &self,
        thread: &CheckpointConfig,
        base: Option<Loaded>,
        updates: Vec<StateUpdate>,
    ) -> Result<Loaded, GraphError> {
        let step = base.as_ref().map_or(-1, |base| base.step + 1);
        let mut values = base
            .as_ref()
            .map(|base| base.body.channel_values.clone())
            .unwrap_or_else(|| self.def.initial_values());
        if updates
            .iter()
            .any(|update| update.as_node.as_deref() == Some(INPUT))
        {
            let [update] = updates.as_slice() else {
                return Err(GraphError::InvalidInput(format!(
                    "An {INPUT} update must be alone in its superstep"
                )));
            };
            let input = update.values.clone().unwrap_or_else(|| json!({}));
            let mut body = Body::new(values, vec![START.to_owned()]);
            body.input = Some(input.clone());
            let meta = metadata("input", step, json!({ START: input }), &Metadata::new());
            return self.put_update(thread, base.as_ref(), body, meta).await;
        }
        let mut pending = base
            .as_ref()
            .map(|base| base.body.next.clone())
            .unwrap_or_default();
        let mut writers: Vec<(Option<String>, Vec<String>)> = Vec::new();
        let mut writes = Map::new();
        for update in updates {
            let node = self.resolve_as_node(base.as_ref(), update.as_node)?;
            let command = update
                .command
                .as_ref()
                .map(Command::from_value)
                .transpose()?;
            let mut written = update.values.unwrap_or(Value::Null);
            apply_update(&self.def.channels, &mut values, &written)
                .map_err(GraphError::InvalidInput)?;
            if let Some(extra) = command.as_ref().and_then(|command| command.update.clone()) {
                apply_update(&self.def.channels, &mut values, &extra)
                    .map_err(GraphError::InvalidInput)?;
                written = if written.is_null() {
                    extra
                } else {
                    json!([written, extra])
                };
            }
            if let Some(node) = &node {
                pending.retain(|pending| pending != node);
                writes.insert(node.clone(), written);
            }
            writers.push((
                node,
                command.map(|command| command.goto).unwrap_or_default(),
            ));
        }
        let state = Value::Object(values.clone());
        for (node, goto) in writers {
            let targets = match (node, goto.is_empty()) {
                (_, false) => goto,
                (Some(node), true) => self.def.successors(&node, &state),
                (None, true) => Vec::new(),
            };
            for target in targets {
                if !self.def.has_node(&target) {
                    return Err(GraphError::InvalidInput(format!(
                        "Node {target} does not exist"
                    )));
                }
                if !pending.contains(&target) {
                    pending.push(target);
                }
            }
        }
        let writes = if writes.is_empty() {
            Value::Null
        } else {
            Value::Object(writes)
        };
        let meta = metadata("update", step, writes, &Metadata::new());
        self.put_update(thread, base.as_ref(), Body::new(values, pending), meta)
            .await
    }

    async fn put_update(
        &self,
        thread: &CheckpointConfig,
        parent: Option<&Loaded>,
        body: Body,
        meta: Metadata,
    ) -> Result<Loaded, GraphError> {
        let at = parent.map_or_else(
            || CheckpointConfig {
                checkpoint_id: None,
                ..thread.clone()
            },
            |parent| parent.tuple.config.clone(),
        );
        let written = self.saver.put(&at, JsonText::new(&body), meta).await?;
        self.load(&written)
            .await?
            .ok_or_else(|| GraphError::checkpointer("A written checkpoint could not be read back"))
    }
}
