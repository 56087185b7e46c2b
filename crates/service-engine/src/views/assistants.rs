//! Assistants as a caller sees them.

use serde_json::Value;
use service_types::{
    Assistant, AssistantCreate, AssistantPatch, AssistantSearch, AssistantVersion,
    AssistantVersionsQuery, GraphSchema,
};

use super::View;
use crate::assistants::refuse_system_mark;
use crate::{AssistantSearchPage, EngineError, EngineResult};

/// Assistants (by UUID or graph id), within the caller's scope.
#[derive(Clone, Copy, Debug)]
pub struct Assistants<'a>(View<'a>);

impl<'a> Assistants<'a> {
    pub(super) fn new(view: View<'a>) -> Self {
        Self(view)
    }

    async fn check(self, id: &str) -> EngineResult<()> {
        self.0
            .engine
            .assistant_within(id, self.0.caller.scope())
            .await
    }

    /// Creates an assistant stamped with the caller's scope; an existing one of another
    /// owner is a conflict. The system mark is the server's to write.
    pub async fn create(self, mut body: AssistantCreate) -> EngineResult<Assistant> {
        refuse_system_mark(body.metadata.as_ref())?;
        let scope = self.0.caller.scope();
        scope.stamp_option(&mut body.metadata);
        let assistant = self.0.engine.create_assistant(body).await?;
        // `if_exists: do_nothing` answers with the existing assistant: not someone else's.
        if !scope.admits(&assistant.metadata) {
            return Err(EngineError::conflict(format!(
                "Assistant {} already exists",
                assistant.assistant_id
            )));
        }
        Ok(assistant)
    }

    /// Reads an assistant.
    pub async fn get(self, id: &str) -> EngineResult<Assistant> {
        let assistant = self.0.engine.get_assistant(id).await?;
        if self.0.caller.scope().admits(&assistant.metadata) {
            Ok(assistant)
        } else {
            Err(EngineError::not_found("Not Found"))
        }
    }

    /// Applies a patch (a new version), keeping the scope's stamp.
    pub async fn update(self, id: &str, mut body: AssistantPatch) -> EngineResult<Assistant> {
        self.check(id).await?;
        refuse_system_mark(body.metadata.as_ref())?;
        if body.metadata.is_some() {
            self.0.caller.scope().stamp_option(&mut body.metadata);
        }
        self.0.engine.update_assistant(id, body).await
    }

    /// Deletes an assistant and, with `delete_threads`, the caller's threads of it.
    pub async fn delete(self, id: &str, delete_threads: bool) -> EngineResult<()> {
        let scope = self.0.caller.scope();
        self.0
            .engine
            .delete_assistant(id, delete_threads, scope)
            .await
    }

    /// One page of the assistants the caller may read.
    pub async fn search(self, body: AssistantSearch) -> EngineResult<AssistantSearchPage> {
        let enforced = self.0.caller.scope().enforced();
        self.0.engine.search_assistants(body, enforced).await
    }

    /// Counts the assistants the caller may read.
    pub async fn count(self, body: AssistantSearch) -> EngineResult<u64> {
        let enforced = self.0.caller.scope().enforced();
        self.0.engine.count_assistants(body, enforced).await
    }

    /// An assistant's versions.
    pub async fn versions(
        self,
        id: &str,
        query: AssistantVersionsQuery,
    ) -> EngineResult<Vec<AssistantVersion>> {
        self.check(id).await?;
        self.0.engine.assistant_versions(id, query).await
    }

    /// Makes `version` the assistant's current one.
    pub async fn set_latest(self, id: &str, version: i64) -> EngineResult<Assistant> {
        self.check(id).await?;
        self.0
            .engine
            .set_latest_assistant_version(id, version)
            .await
    }

    /// The assistant's graph, `xray` levels of subgraphs deep.
    pub async fn graph(self, id: &str, xray: u32) -> EngineResult<Value> {
        self.check(id).await?;
        self.0.engine.assistant_graph(id, xray).await
    }

    /// The assistant's subgraphs' schemas, under `namespace` when given.
    pub async fn subgraphs(
        self,
        id: &str,
        namespace: Option<String>,
        recurse: bool,
    ) -> EngineResult<serde_json::Map<String, Value>> {
        self.check(id).await?;
        self.0
            .engine
            .assistant_subgraphs(id, namespace, recurse)
            .await
    }

    /// The assistant's graph's schemas.
    pub async fn schemas(self, id: &str) -> EngineResult<GraphSchema> {
        self.check(id).await?;
        self.0.engine.assistant_schemas(id).await
    }
}
