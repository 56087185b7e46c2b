//! The graphs this server serves: the built-in example graphs, optionally renamed or
//! narrowed by the configuration file's `graphs` block.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use service_graph::{AgentGraph, Checkpointer, GraphError, GraphResolver};
use service_types::GraphSchema;

use crate::env::ConfigError;

/// Serves `served id → built-in id` over the example registry.
pub(crate) struct AliasedGraphs {
    builtin: Arc<dyn GraphResolver>,
    aliases: BTreeMap<String, String>,
}

impl std::fmt::Debug for AliasedGraphs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AliasedGraphs")
            .field("aliases", &self.aliases)
            .finish()
    }
}

/// The resolver for this boot.
pub(crate) fn resolver(
    checkpointer: Arc<dyn Checkpointer>,
    graphs: Option<&BTreeMap<String, String>>,
) -> Result<Arc<dyn GraphResolver>, ConfigError> {
    let builtin: Arc<dyn GraphResolver> = Arc::new(
        service_example_graphs::registry(checkpointer)
            .map_err(|error| ConfigError(format!("building the example graphs failed: {error}")))?,
    );
    let Some(graphs) = graphs else {
        return Ok(builtin);
    };
    let known = builtin.graph_ids();
    if let Some((id, target)) = graphs.iter().find(|(_, target)| !known.contains(target)) {
        return Err(ConfigError(format!(
            "graphs.{id}: unknown graph {target:?}; built-in graphs: {}",
            known.join(", ")
        )));
    }
    Ok(Arc::new(AliasedGraphs {
        builtin,
        aliases: graphs.clone(),
    }))
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
        self.builtin.load(self.target(graph_id)?).await
    }

    async fn schemas(&self, graph_id: &str) -> Result<GraphSchema, GraphError> {
        let mut schema = self.builtin.schemas(self.target(graph_id)?).await?;
        schema.graph_id = Some(graph_id.to_owned());
        Ok(schema)
    }
}
