use std::fmt;
use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value};
use service_graph::{Checkpointer, GraphError};

use crate::channel::{Channel, Reducer};
use crate::node::{NodeError, NodeFn, NodeOutput};
use crate::{CompiledGraph, END, NodeContext, START};

/// Picks the next node from the state after a superstep.
pub(crate) type RouterFn = Arc<dyn Fn(&Value) -> String + Send + Sync>;

/// A conditional edge: `router` picks one of `targets`.
pub(crate) struct Branch {
    pub(crate) source: String,
    pub(crate) router: RouterFn,
    pub(crate) targets: Vec<String>,
}

/// What a node runs: a function of the state, or a compiled graph (a subgraph, run on
/// a checkpoint namespace of its own).
pub(crate) enum Node {
    Func(NodeFn),
    Graph(Arc<GraphDef>),
}

/// The validated graph definition a [`CompiledGraph`] runs.
pub(crate) struct GraphDef {
    pub(crate) name: String,
    pub(crate) channels: Vec<(String, Channel)>,
    pub(crate) input_keys: Option<Vec<String>>,
    pub(crate) nodes: Vec<(String, Node)>,
    pub(crate) edges: Vec<(String, String)>,
    pub(crate) branches: Vec<Branch>,
}

impl GraphDef {
    /// A new thread's state: each list channel starts empty, as LangGraph's list
    /// reducers (`operator.add`, `add_messages`) start from `[]`.
    pub(crate) fn initial_values(&self) -> Map<String, Value> {
        self.channels
            .iter()
            .filter(|(_, channel)| {
                matches!(channel.reducer, Reducer::Append | Reducer::MergeMessages)
            })
            .map(|(key, _)| (key.clone(), Value::Array(Vec::new())))
            .collect()
    }

    pub(crate) fn node(&self, name: &str) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|(node, _)| node == name)
            .map(|(_, run)| run)
    }

    pub(crate) fn has_node(&self, name: &str) -> bool {
        self.node(name).is_some()
    }

    /// Nodes that follow `node` given the state: static edges, then conditional ones;
    /// `END` dropped.
    pub(crate) fn successors(&self, node: &str, values: &Value) -> Vec<String> {
        let statics = self
            .edges
            .iter()
            .filter(|(from, _)| from == node)
            .map(|(_, to)| to.clone());
        let routed = self
            .branches
            .iter()
            .filter(|branch| branch.source == node)
            .map(|branch| (branch.router)(values));
        let mut next = Vec::new();
        for target in statics.chain(routed) {
            if target != END && !next.contains(&target) {
                next.push(target);
            }
        }
        next
    }
}

/// Builder of a state graph (LangGraph's `StateGraph`): declare state keys, nodes
/// and edges, then [`StateGraph::compile`] it over a checkpointer.
pub struct StateGraph {
    def: GraphDef,
}

impl fmt::Debug for StateGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<&str> = self
            .def
            .nodes
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        f.debug_struct("StateGraph")
            .field("name", &self.def.name)
            .field("nodes", &nodes)
            .finish()
    }
}

impl StateGraph {
    /// An empty graph; `name` titles its schemas and events.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            def: GraphDef {
                name: name.into(),
                channels: Vec::new(),
                input_keys: None,
                nodes: Vec::new(),
                edges: Vec::new(),
                branches: Vec::new(),
            },
        }
    }

    /// Declares a state key with its reducer and JSON schema.
    pub fn channel(mut self, key: impl Into<String>, reducer: Reducer, schema: Value) -> Self {
        self.def
            .channels
            .push((key.into(), Channel { reducer, schema }));
        self
    }

    /// Restricts the input schema to these keys (all keys by default).
    pub fn input_keys(mut self, keys: &[&str]) -> Self {
        self.def.input_keys = Some(keys.iter().map(|key| (*key).to_owned()).collect());
        self
    }

    /// Adds a node: an async function of the state returning an update (a JSON
    /// object) or a [`crate::Command`].
    pub fn node<F, Fut, O>(mut self, name: impl Into<String>, run: F) -> Self
    where
        F: Fn(Value, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput>,
    {
        let run: NodeFn = Arc::new(move |state, ctx| {
            let future = run(state, ctx);
            Box::pin(async move { future.await.map(Into::into) })
        });
        self.def.nodes.push((name.into(), Node::Func(run)));
        self
    }

    /// Adds a compiled graph as node `name` (a subgraph). It runs on the parent's
    /// state (the keys it declares) with checkpoints of its own under the namespace
    /// `name:<task id>`; its changes to the parent's keys are the node's update, and
    /// an interrupt inside it pauses the parent until resumed there.
    pub fn subgraph(mut self, name: impl Into<String>, graph: &CompiledGraph) -> Self {
        self.def
            .nodes
            .push((name.into(), Node::Graph(Arc::clone(&graph.def))));
        self
    }

    /// Adds an edge; use [`START`] and [`END`] for the virtual ends.
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.def.edges.push((from.into(), to.into()));
        self
    }

    /// Adds a conditional edge: after `from`, `router` names the next node among
    /// `targets` (which the graph drawing shows).
    pub fn conditional_edges<R, T>(
        mut self,
        from: impl Into<String>,
        router: R,
        targets: &[&str],
    ) -> Self
    where
        R: Fn(&Value) -> T + Send + Sync + 'static,
        T: Into<String>,
    {
        self.def.branches.push(Branch {
            source: from.into(),
            router: Arc::new(move |values| router(values).into()),
            targets: targets.iter().map(|target| (*target).to_owned()).collect(),
        });
        self
    }

    /// Validates the graph and binds it to a checkpointer.
    pub fn compile(self, checkpointer: Arc<dyn Checkpointer>) -> Result<CompiledGraph, GraphError> {
        self.validate()?;
        Ok(CompiledGraph::new(Arc::new(self.def), checkpointer))
    }

    fn validate(&self) -> Result<(), GraphError> {
        let def = &self.def;
        let invalid = |message: String| Err(GraphError::InvalidInput(message));
        for (index, (name, _)) in def.nodes.iter().enumerate() {
            if name == START || name == END || name.is_empty() {
                return invalid(format!("Node name '{name}' is reserved"));
            }
            if def.nodes[..index].iter().any(|(other, _)| other == name) {
                return invalid(format!("Node '{name}' is already present"));
            }
        }
        let is_source = |name: &str| name == START || def.has_node(name);
        let is_target = |name: &str| name == END || def.has_node(name);
        for (from, to) in &def.edges {
            if !is_source(from) || !is_target(to) {
                return invalid(format!("Edge {from} -> {to} names an unknown node"));
            }
        }
        for branch in &def.branches {
            if !is_source(&branch.source) || !branch.targets.iter().all(|t| is_target(t)) {
                return invalid(format!(
                    "Conditional edge from {} names an unknown node",
                    branch.source
                ));
            }
        }
        let has_entry = def.edges.iter().any(|(from, _)| from == START)
            || def.branches.iter().any(|branch| branch.source == START);
        if !has_entry {
            return invalid(
                "Graph must have an entrypoint: add at least one edge from START".into(),
            );
        }
        Ok(())
    }
}
