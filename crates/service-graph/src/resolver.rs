use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use service_types::GraphSchema;

use crate::{AgentGraph, GraphError};

/// Finds graphs by id: the embedding dependency SPEC calls the graph resolver.
#[async_trait]
pub trait GraphResolver: Send + Sync {
    /// Every registered graph id.
    fn graph_ids(&self) -> Vec<String>;

    /// Loads a graph. An unknown id is [`GraphError::NotFound`]; a graph that fails to
    /// load is [`GraphError::LoadFailed`] (HTTP 500 `graph_load_failed`).
    async fn load(&self, graph_id: &str) -> Result<Arc<dyn AgentGraph>, GraphError>;

    /// The graph's JSON schemas, with `graph_id` set.
    async fn schemas(&self, graph_id: &str) -> Result<GraphSchema, GraphError>;
}

/// Builds a graph on demand; called on every [`GraphResolver::load`].
pub type GraphLoader =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Arc<dyn AgentGraph>, GraphError>> + Send + Sync>;

struct Entry {
    loader: GraphLoader,
    schema: GraphSchema,
}

/// A [`GraphResolver`] over a fixed map of graph id to loader and schema.
#[derive(Default)]
pub struct GraphRegistry {
    entries: BTreeMap<String, Entry>,
}

impl GraphRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a loader under `graph_id` (replacing any previous one).
    pub fn register(
        &mut self,
        graph_id: impl Into<String>,
        schema: GraphSchema,
        loader: GraphLoader,
    ) {
        self.entries
            .insert(graph_id.into(), Entry { loader, schema });
    }

    /// Registers a ready graph under `graph_id`.
    pub fn insert(
        &mut self,
        graph_id: impl Into<String>,
        schema: GraphSchema,
        graph: Arc<dyn AgentGraph>,
    ) {
        self.register(
            graph_id,
            schema,
            Arc::new(move || {
                let graph = Arc::clone(&graph);
                Box::pin(async move { Ok(graph) })
            }),
        );
    }

    fn entry(&self, graph_id: &str) -> Result<&Entry, GraphError> {
        self.entries.get(graph_id).ok_or_else(|| {
            GraphError::NotFound(format!(
                "Graph '{graph_id}' not found. Expected one of: {:?}",
                self.graph_ids()
            ))
        })
    }
}

impl fmt::Debug for GraphRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphRegistry")
            .field("graph_ids", &self.graph_ids())
            .finish()
    }
}

#[async_trait]
impl GraphResolver for GraphRegistry {
    fn graph_ids(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    async fn load(&self, graph_id: &str) -> Result<Arc<dyn AgentGraph>, GraphError> {
        let loader = Arc::clone(&self.entry(graph_id)?.loader);
        loader().await.map_err(|error| match error {
            GraphError::LoadFailed { .. } => error,
            other => GraphError::LoadFailed {
                graph_id: graph_id.to_owned(),
                reason: other.to_string(),
            },
        })
    }

    async fn schemas(&self, graph_id: &str) -> Result<GraphSchema, GraphError> {
        let mut schema = self.entry(graph_id)?.schema.clone();
        schema.graph_id = Some(graph_id.to_owned());
        Ok(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ChunkStream, RunContext, RunInput, RunnableConfig, StateOptions, StateSnapshot,
        StreamOptions,
    };

    struct Nothing;

    #[async_trait]
    impl AgentGraph for Nothing {
        async fn stream(
            &self,
            _: RunInput,
            _: StreamOptions,
            _: RunContext,
        ) -> Result<ChunkStream, GraphError> {
            Ok(Box::pin(futures::stream::empty()))
        }

        async fn get_state(
            &self,
            _: &RunnableConfig,
            _: StateOptions,
        ) -> Result<StateSnapshot, GraphError> {
            Ok(StateSnapshot::empty())
        }
    }

    #[tokio::test]
    async fn load_failure_is_a_distinct_error() {
        let mut registry = GraphRegistry::new();
        registry.register(
            "broken",
            GraphSchema::default(),
            Arc::new(|| {
                Box::pin(async { Err(service_types::RunError::new("ImportError", "nope").into()) })
            }),
        );
        registry.insert("ok", GraphSchema::default(), Arc::new(Nothing));
        assert!(matches!(
            registry.load("broken").await,
            Err(GraphError::LoadFailed { .. })
        ));
        assert!(matches!(
            registry.load("missing").await,
            Err(GraphError::NotFound(_))
        ));
        assert!(registry.load("ok").await.is_ok());
        assert_eq!(
            registry.schemas("ok").await.unwrap().graph_id.as_deref(),
            Some("ok")
        );
        assert_eq!(
            registry.graph_ids(),
            vec!["broken".to_owned(), "ok".to_owned()]
        );
    }

    #[tokio::test]
    async fn optional_methods_report_capability_missing() {
        let graph = Nothing;
        let config = RunnableConfig::for_thread("t");
        let missing = |result: Result<(), GraphError>| match result {
            Err(GraphError::CapabilityMissing { capability }) => capability,
            other => panic!("expected capability missing, got {other:?}"),
        };
        assert_eq!(
            missing(
                graph
                    .get_state_history(&config, Default::default())
                    .await
                    .map(drop)
            ),
            "getStateHistory"
        );
        assert_eq!(
            missing(
                graph
                    .update_state(&config, serde_json::json!({}), None)
                    .await
                    .map(drop)
            ),
            "updateState"
        );
        assert_eq!(
            missing(graph.bulk_update_state(&config, Vec::new()).await.map(drop)),
            "bulkUpdateState"
        );
        assert_eq!(
            missing(
                graph
                    .stream_events(
                        RunInput::None,
                        StreamOptions::default(),
                        RunContext::default()
                    )
                    .await
                    .map(drop)
            ),
            "streamEvents"
        );
        assert_eq!(
            missing(
                graph
                    .invoke(
                        RunInput::None,
                        StreamOptions::default(),
                        RunContext::default()
                    )
                    .await
                    .map(drop)
            ),
            "invoke"
        );
        assert_eq!(missing(graph.get_graph(0).await.map(drop)), "getGraphAsync");
        assert_eq!(
            missing(graph.get_subgraphs(None, false).await.map(drop)),
            "getSubgraphsAsync"
        );
    }
}
