//! The graph drawing and the JSON schemas of a graph.

use serde_json::{Map, Value, json};
use service_types::GraphSchema;

use crate::graph::GraphDef;
use crate::{END, START};

/// `{nodes, edges}` in the contract's shape; the end node is `{"id": "__end__"}`.
pub(crate) fn graph_json(def: &GraphDef) -> Value {
    let mut nodes = vec![json!({"id": START, "type": "schema", "data": START})];
    nodes.extend(
        def.nodes
            .iter()
            .map(|(name, _)| json!({"id": name, "type": "runnable", "data": {"name": name}})),
    );
    let mut edges: Vec<Value> = def
        .edges
        .iter()
        .map(|(from, to)| json!({"source": from, "target": to}))
        .collect();
    for branch in &def.branches {
        edges.extend(
            branch.targets.iter().map(
                |target| json!({"source": branch.source, "target": target, "conditional": true}),
            ),
        );
    }
    let ends = edges.iter().any(|edge| edge["target"] == END);
    if ends {
        nodes.push(json!({"id": END}));
    }
    json!({"nodes": nodes, "edges": edges})
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
