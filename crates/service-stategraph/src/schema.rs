//! The graph drawing and the JSON schemas of a graph.

use serde_json::{Map, Value, json};
use service_types::GraphSchema;

use crate::graph::{GraphDef, Node};
use crate::{END, START};

/// `{nodes, edges}` in the contract's shape; the end node is `{"id": "__end__"}`.
/// With `xray` above 0 a subgraph node is drawn as its own nodes (ids `node:inner`),
/// `xray` levels deep, the edges into and out of it rewired to its first and last
/// nodes.
pub(crate) fn graph_json(def: &GraphDef, xray: u32) -> Value {
    let drawing = draw(def, xray, "", true);
    let mut nodes = vec![json!({"id": START, "type": "schema", "data": START})];
    nodes.extend(drawing.nodes);
    let edges: Vec<Value> = drawing
        .edges
        .iter()
        .map(|(source, target, conditional)| {
            if *conditional {
                json!({"source": source, "target": target, "conditional": true})
            } else {
                json!({"source": source, "target": target})
            }
        })
        .collect();
    if drawing.edges.iter().any(|(_, target, _)| target == END) {
        nodes.push(json!({"id": END}));
    }
    json!({"nodes": nodes, "edges": edges})
}

/// A graph drawn under an id prefix: its nodes, its edges (source, target,
/// conditional), and the node ids its start leads to and its end is reached from.
struct Drawing {
    nodes: Vec<Value>,
    edges: Vec<(String, String, bool)>,
    entries: Vec<String>,
    exits: Vec<String>,
}

fn draw(def: &GraphDef, xray: u32, prefix: &str, root: bool) -> Drawing {
    let mut drawing = Drawing {
        nodes: Vec::new(),
        edges: Vec::new(),
        entries: Vec::new(),
        exits: Vec::new(),
    };
    let mut expanded: Vec<(&str, Drawing)> = Vec::new();
    for (name, node) in &def.nodes {
        match node {
            Node::Graph(child) if xray > 0 => {
                let inner = draw(child, xray - 1, &format!("{prefix}{name}:"), false);
                drawing.nodes.extend(inner.nodes.iter().cloned());
                expanded.push((name, inner));
            }
            _ => drawing.nodes.push(
                json!({"id": format!("{prefix}{name}"), "type": "runnable", "data": {"name": name}}),
            ),
        }
    }
    let expansion = |name: &str| expanded.iter().find(|(node, _)| *node == name);
    let sources = |name: &str| match expansion(name) {
        Some((_, inner)) => inner.exits.clone(),
        None => vec![format!("{prefix}{name}")],
    };
    let targets = |name: &str| match expansion(name) {
        Some((_, inner)) => inner.entries.clone(),
        None => vec![format!("{prefix}{name}")],
    };
    let statics = def.edges.iter().map(|(from, to)| (from, to, false));
    let branches = def.branches.iter().flat_map(|branch| {
        branch
            .targets
            .iter()
            .map(move |target| (&branch.source, target, true))
    });
    for (from, to, conditional) in statics.chain(branches) {
        let from_start = from == START;
        let to_end = to == END;
        let from_ids = if from_start {
            vec![START.to_owned()]
        } else {
            sources(from)
        };
        let to_ids = if to_end {
            vec![END.to_owned()]
        } else {
            targets(to)
        };
        if from_start && !root {
            drawing.entries.extend(to_ids);
            continue;
        }
        if to_end && !root {
            drawing.exits.extend(from_ids);
            continue;
        }
        for source in &from_ids {
            for target in &to_ids {
                drawing
                    .edges
                    .push((source.clone(), target.clone(), conditional));
            }
        }
    }
    for (_, inner) in expanded {
        drawing.edges.extend(inner.edges);
    }
    drawing
}

fn object_schema(def: &GraphDef, title: &str, keys: Option<&[String]>) -> Value {
    let properties: Map<String, Value> = def
        .channels
        .iter()
        .filter(|(key, _)| keys.is_none_or(|keys| keys.contains(key)))
        .map(|(key, channel)| (key.clone(), channel.schema.clone()))
        .collect();
    json!({"title": title, "type": "object", "properties": properties})
}

/// Input, output and state schemas derived from the declared channels.
pub(crate) fn graph_schema(def: &GraphDef) -> GraphSchema {
    GraphSchema {
        graph_id: None,
        input_schema: Some(object_schema(
            def,
            &format!("{}Input", def.name),
            def.input_keys.as_deref(),
        )),
        output_schema: Some(object_schema(def, &format!("{}Output", def.name), None)),
        state_schema: Some(object_schema(def, &format!("{}State", def.name), None)),
        config_schema: None,
        context_schema: None,
    }
}
