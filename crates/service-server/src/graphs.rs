//! The graphs a boot serves: the program's graph source, optionally renamed or
//! narrowed by the configuration file's `graphs` block.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use service_graph::{AgentGraph, Checkpointer, GraphError, GraphResolver, GraphSource};
use service_types::GraphSchema;

/// `source` as the `graphs` block (served id → the source's id) says, if given.
pub(crate) fn served(
    source: Box<dyn GraphSource>,
    aliases: Option<BTreeMap<String, String>>,
) -> Box<dyn GraphSource> {
    match aliases {
        Some(aliases) => Box::new(Aliased { source, aliases }),
        None => source,
    }
}

/// A source served under the `graphs` block's ids only.
struct Aliased {
    source: Box<dyn GraphSource>,
    aliases: BTreeMap<String, String>,
}

impl GraphSource for Aliased {
    fn build(
        self: Box<Self>,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Arc<dyn GraphResolver>, GraphError> {
        let graphs = self.source.build(checkpointer)?;
        let known = graphs.graph_ids();
        if let Some((id, target)) = self
            .aliases
            .iter()
            .find(|(_, target)| !known.contains(target))
        {
            return Err(GraphError::NotFound(format!(
                "graphs.{id}: unknown graph {target:?}; this program's graphs: {}",
                known.join(", ")
            )));
        }
        Ok(Arc::new(AliasedGraphs {
            graphs,
            aliases: self.aliases,
        }))
    }
}

/// Serves `served id → source id` over the source's resolver.
struct AliasedGraphs {
    graphs: Arc<dyn GraphResolver>,
    aliases: BTreeMap<String, String>,
}

impl AliasedGraphs {
    fn target(&self, graph_id: &str) -> Result<&str, GraphError> {
        self.aliases
            .get(graph_id)
            .map(String::as_str)
            .ok_or_else(|| GraphError::NotFound(format!("Graph '{graph_id}' not found")))
    }
}

#[async_trait]
impl GraphResolver for AliasedGraphs {
    fn graph_ids(&self) -> Vec<String> {
        self.aliases.keys().cloned().collect()
    }

    async fn load(&self, graph_id: &str) -> Result<Arc<dyn AgentGraph>, GraphError> {
        self.graphs.load(self.target(graph_id)?).await
    }

    async fn schemas(&self, graph_id: &str) -> Result<GraphSchema, GraphError> {
        let mut schema = self.graphs.schemas(self.target(graph_id)?).await?;
        schema.graph_id = Some(graph_id.to_owned());
        Ok(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use service_graph::{GraphRegistry, InMemorySaver};

    fn source(_: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
        let mut registry = GraphRegistry::new();
        for id in ["echo", "steps"] {
            registry.register(
                id,
                GraphSchema::default(),
                Arc::new(|| Box::pin(async { Err(GraphError::NotFound("not loaded".into())) })),
            );
        }
        Ok(registry)
    }

    fn build(aliases: &[(&str, &str)]) -> Result<Arc<dyn GraphResolver>, GraphError> {
        let aliases = aliases
            .iter()
            .map(|(id, target)| ((*id).to_owned(), (*target).to_owned()))
            .collect();
        served(Box::new(source), Some(aliases)).build(Arc::new(InMemorySaver::new()))
    }

    #[tokio::test]
    async fn the_graphs_block_renames_and_narrows_the_source() {
        let graphs = build(&[("chat", "echo")]).unwrap();
        assert_eq!(graphs.graph_ids(), ["chat"]);
        let schema = graphs.schemas("chat").await.unwrap();
        assert_eq!(schema.graph_id.as_deref(), Some("chat"));
        assert!(graphs.schemas("steps").await.is_err());
    }

    #[test]
    fn an_alias_of_a_graph_the_source_lacks_names_its_key() {
        let error = build(&[("chat", "echo"), ("talk", "parrot")])
            .err()
            .unwrap();
        assert!(error.to_string().contains("graphs.talk"), "{error}");
        assert!(error.to_string().contains("echo, steps"), "{error}");
    }
}
