//! `POST /invoke/{graph_id}`: one blocking call of a graph's `invoke`, with no run row
//! (so no webhook) and no lasting thread.

use std::sync::Arc;

use serde_json::{Value, json};
use service_graph::{GraphError, RunContext, RunInput, RunnableConfig, StreamOptions};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{Engine, EngineError, EngineResult};

impl Engine {
    /// Invokes a graph on `input` and returns its final values; a graph failure is
    /// reported as `{"__error__": RunError}`, like a failed wait.
    pub async fn invoke(&self, graph_id: &str, input: Value) -> EngineResult<Value> {
        // A callback asked for here would never be sent: refused, not ignored.
        if input.get("webhook").is_some() {
            return Err(EngineError::unprocessable(
                "POST /invoke has no run, so it sends no webhook; create a run (POST /runs/wait) to get one",
            ));
        }
        if !self.graph_ids().iter().any(|graph| graph == graph_id) {
            return Err(EngineError::not_found(format!(
                "Graph '{graph_id}' not found"
            )));
        }
        let graph = self.load_graph(graph_id).await?;
        // Graphs that checkpoint need a thread; this one lives only for the call.
        let thread_id = Uuid::now_v7().to_string();
        let options = StreamOptions {
            config: RunnableConfig::for_thread(thread_id.clone()),
            ..StreamOptions::default()
        };
        let ctx = RunContext::new(CancellationToken::new())
            .with_store(Arc::clone(&self.inner.driver.long_term));
        let result = graph
            .invoke(RunInput::from_request(Some(input), None), options, ctx)
            .await;
        if let Err(error) = self.inner.checkpointer.delete_thread(&thread_id).await {
            tracing::warn!(%error, "dropping the invoke call's checkpoints failed");
        }
        match result {
            Ok(values) => Ok(values),
            Err(error @ GraphError::CapabilityMissing { .. }) => Err(error.into()),
            Err(error) => {
                let run_error = error.to_run_error();
                tracing::error!(graph_id, error = %run_error.chain_summary(), "invoke failed");
                Ok(json!({ "__error__": self.inner.frames.client_error(&run_error) }))
            }
        }
    }
}
