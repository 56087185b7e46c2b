//! Assistants: system assistants per graph, CRUD, versions, graph introspection.

use std::collections::HashMap;
use std::sync::MutexGuard;

use serde_json::Value;
use service_store::containment::Enforced;
use service_store::{AssistantFilter, AssistantPatch, AssistantQuery, NewAssistant, VersionQuery};
use service_types::{
    Assistant, AssistantCreate, AssistantSearch, AssistantVersion, AssistantVersionsQuery, Config,
    GraphSchema, IfExists, Metadata,
};
use uuid::Uuid;

use crate::auth::Scope;
use crate::limits::{offset, search_limit};
use crate::{Engine, EngineError, EngineResult};

/// How many assistants runs remember at most (the whole memory is dropped when full).
const REMEMBERED_ASSISTANTS: usize = 1024;

/// The metadata entry marking a graph's system assistant, which every tenant may read
/// and run (`created_by: system`, as the reference server marks it). Only the server
/// writes it: a client's create or patch carrying it is refused.
pub(crate) const SYSTEM_MARK: (&str, &str) = ("created_by", "system");

/// True for a graph's system assistant.
fn is_system(assistant: &Assistant) -> bool {
    assistant.assistant_id == Assistant::system_id(&assistant.graph_id)
        && assistant
            .metadata
            .get(SYSTEM_MARK.0)
            .and_then(Value::as_str)
            == Some(SYSTEM_MARK.1)
}

/// Refuses client metadata that carries the system mark.
pub(crate) fn refuse_system_mark(metadata: Option<&Metadata>) -> EngineResult<()> {
    let marked = metadata
        .and_then(|metadata| metadata.get(SYSTEM_MARK.0))
        .and_then(Value::as_str)
        == Some(SYSTEM_MARK.1);
    if marked {
        return Err(EngineError::unprocessable(format!(
            "metadata.{} = \"{}\" marks the server's own assistants; choose another value",
            SYSTEM_MARK.0, SYSTEM_MARK.1
        )));
    }
    Ok(())
}

/// One page of an assistant search.
#[derive(Clone, Debug)]
pub struct AssistantSearchPage {
    /// The matches on this page.
    pub assistants: Vec<Assistant>,
    /// Every match, unpaginated.
    pub total: u64,
    /// Offset of the next page, when more rows exist.
    pub next_offset: Option<usize>,
}

impl Engine {
    /// Creates (once) the system assistant of every registered graph. An assistant a
    /// client made at a graph's system id before the graph was registered (it cannot
    /// carry the mark) is replaced, so a graph added later cannot be squatted.
    pub(crate) async fn ensure_system_assistants(&self) -> EngineResult<()> {
        for graph_id in self.graph_ids() {
            let assistant_id = Assistant::system_id(&graph_id);
            let assistants = self.store().assistants();
            if let Some(existing) = assistants.get(assistant_id).await? {
                if is_system(&existing) {
                    continue;
                }
                tracing::warn!(
                    %assistant_id,
                    graph_id,
                    "an assistant held the graph's system id; it is replaced by the system assistant"
                );
                assistants.delete(assistant_id).await?;
                self.forget_assistant(assistant_id);
            }
            let mut metadata = Metadata::new();
            metadata.insert(SYSTEM_MARK.0.into(), SYSTEM_MARK.1.into());
            let new = NewAssistant {
                assistant_id,
                graph_id: graph_id.clone(),
                config: Config::default(),
                context: Metadata::new(),
                metadata,
                name: graph_id,
                description: None,
            };
            assistants.create(new, IfExists::DoNothing).await?;
        }
        Ok(())
    }

    /// Reads an assistant by UUID or by registered graph id (its system assistant).
    /// `None` when there is no such assistant.
    pub(crate) async fn find_assistant(&self, id: &str) -> EngineResult<Option<Assistant>> {
        let assistant_id = match Uuid::parse_str(id) {
            Ok(uuid) => uuid,
            Err(_) if self.graph_ids().iter().any(|graph| graph == id) => Assistant::system_id(id),
            Err(_) => {
                return Err(EngineError::unprocessable(
                    "Invalid assistant ID: must be a UUID or a registered graph id",
                ));
            }
        };
        Ok(self.store().assistants().get(assistant_id).await?)
    }

    /// Reads an assistant, 404 `Not Found` when absent.
    pub(crate) async fn get_assistant(&self, id: &str) -> EngineResult<Assistant> {
        self.find_assistant(id)
            .await?
            .ok_or_else(|| EngineError::not_found("Not Found"))
    }

    /// The assistant a run names: a UUID, or a registered graph id.
    pub(crate) async fn resolve_run_assistant(&self, id: &str) -> EngineResult<Assistant> {
        let assistant_id = match Uuid::parse_str(id) {
            Ok(uuid) => uuid,
            Err(_) if self.graph_ids().iter().any(|graph| graph == id) => Assistant::system_id(id),
            Err(_) => {
                let graphs = self.graph_ids().join(", ");
                return Err(EngineError::unprocessable(format!(
                    "Invalid assistant: '{id}'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: {graphs}"
                )));
            }
        };
        if let Some(remembered) = self.run_assistants().get(&assistant_id) {
            return Ok(remembered.clone());
        }
        let assistant = self
            .store()
            .assistants()
            .get(assistant_id)
            .await?
            .ok_or_else(|| EngineError::not_found("Thread or assistant not found."))?;
        let mut remembered = self.run_assistants();
        if remembered.len() >= REMEMBERED_ASSISTANTS {
            remembered.clear();
        }
        remembered.insert(assistant_id, assistant.clone());
        Ok(assistant)
    }

    /// Drops what runs remembered of an assistant (changed or gone).
    pub(crate) fn forget_assistant(&self, assistant_id: Uuid) {
        self.run_assistants().remove(&assistant_id);
    }

    fn run_assistants(&self) -> MutexGuard<'_, HashMap<Uuid, Assistant>> {
        // Holds only copies of stored rows; a panic elsewhere cannot corrupt it.
        self.inner
            .run_assistants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_graph(&self, graph_id: &str) -> EngineResult<()> {
        let graphs = self.graph_ids();
        if graphs.iter().any(|graph| graph == graph_id) {
            return Ok(());
        }
        Err(EngineError::not_found(format!(
            "Graph '{graph_id}' not found. Expected one of: [{}]",
            graphs
                .iter()
                .map(|graph| format!("'{graph}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// Creates an assistant (version 1).
    pub(crate) async fn create_assistant(&self, body: AssistantCreate) -> EngineResult<Assistant> {
        let graph_id = body
            .graph_id
            .ok_or_else(|| EngineError::unprocessable("\"graph_id\" is a required property"))?;
        self.check_graph(&graph_id)?;
        let config = body.config.unwrap_or_default();
        // Without an explicit context the reference server seeds it from configurable.
        let context = body
            .context
            .or_else(|| config.configurable.clone())
            .unwrap_or_default();
        let new = NewAssistant {
            assistant_id: body.assistant_id.unwrap_or_else(Uuid::new_v4),
            graph_id,
            config,
            context,
            metadata: body.metadata.unwrap_or_default(),
            name: body.name.unwrap_or_else(|| "Untitled".to_owned()),
            description: body.description,
        };
        let if_exists = body.if_exists.unwrap_or_default();
        Ok(self.store().assistants().create(new, if_exists).await?)
    }

    /// Applies a patch, minting version max+1.
    pub(crate) async fn update_assistant(
        &self,
        id: &str,
        body: service_types::AssistantPatch,
    ) -> EngineResult<Assistant> {
        let assistant = self
            .find_assistant(id)
            .await?
            .ok_or_else(|| EngineError::not_found(format!("Assistant {id} not found")))?;
        if let Some(graph_id) = &body.graph_id {
            self.check_graph(graph_id)?;
        }
        let mut config = body.config;
        if let Some(context) = &body.context {
            // Sending a context also rewrites config.configurable, as the reference does.
            let mut updated = config.unwrap_or_else(|| assistant.config.clone());
            updated.configurable = Some(context.clone());
            config = Some(updated);
        }
        let patch = AssistantPatch {
            graph_id: body.graph_id,
            config,
            context: body.context,
            metadata: body.metadata,
            name: body.name,
            description: body.description,
        };
        self.forget_assistant(assistant.assistant_id);
        Ok(self
            .store()
            .assistants()
            .update(assistant.assistant_id, patch)
            .await?)
    }

    /// Deletes an assistant within `scope` and its versions; with `delete_threads`,
    /// also the threads within the scope whose metadata names it.
    pub(crate) async fn delete_assistant(
        &self,
        id: &str,
        delete_threads: bool,
        scope: &Scope,
    ) -> EngineResult<()> {
        let assistant = self
            .find_assistant(id)
            .await?
            .filter(|assistant| scope.admits(&assistant.metadata))
            .ok_or_else(|| EngineError::not_found(format!("Assistant with ID {id} not found")))?;
        self.forget_assistant(assistant.assistant_id);
        self.store()
            .assistants()
            .delete(assistant.assistant_id)
            .await?;
        if delete_threads {
            self.delete_threads_of_assistant(assistant.assistant_id, scope.enforced())
                .await?;
        }
        Ok(())
    }

    /// Searches assistants within `enforced`.
    pub(crate) async fn search_assistants(
        &self,
        body: AssistantSearch,
        enforced: Option<Enforced>,
    ) -> EngineResult<AssistantSearchPage> {
        if let Some(graph_id) = &body.graph_id {
            self.check_graph(graph_id)?;
        }
        let limit = search_limit(body.limit)?;
        let offset = offset(body.offset)?;
        let query = AssistantQuery {
            filter: AssistantFilter {
                graph_id: body.graph_id,
                metadata: body.metadata,
                enforced,
                name: body.name,
            },
            sort_by: body.sort_by.unwrap_or_default(),
            sort_order: body.sort_order.unwrap_or_default(),
            limit,
            offset,
        };
        let page = self.store().assistants().search(&query).await?;
        let limit = limit.unwrap_or(self.config().max_page_size);
        let next_offset =
            ((offset + page.items.len()) < page.total as usize).then_some(offset + limit);
        Ok(AssistantSearchPage {
            assistants: page.items,
            total: page.total,
            next_offset,
        })
    }

    /// Counts assistants within `enforced`.
    pub(crate) async fn count_assistants(
        &self,
        body: AssistantSearch,
        enforced: Option<Enforced>,
    ) -> EngineResult<u64> {
        if let Some(graph_id) = &body.graph_id {
            self.check_graph(graph_id)?;
        }
        let filter = AssistantFilter {
            graph_id: body.graph_id,
            metadata: body.metadata,
            enforced,
            name: body.name,
        };
        Ok(self.store().assistants().count(&filter).await?)
    }

    /// Versions of an assistant, newest first.
    pub(crate) async fn assistant_versions(
        &self,
        id: &str,
        body: AssistantVersionsQuery,
    ) -> EngineResult<Vec<AssistantVersion>> {
        let assistant = self
            .find_assistant(id)
            .await?
            .ok_or_else(|| EngineError::not_found(format!("Assistant {id} not found")))?;
        let query = VersionQuery {
            metadata: body.metadata,
            limit: search_limit(body.limit)?,
            offset: offset(body.offset)?,
        };
        Ok(self
            .store()
            .assistants()
            .versions(assistant.assistant_id, &query)
            .await?)
    }

    /// Activates an existing version.
    pub(crate) async fn set_latest_assistant_version(
        &self,
        id: &str,
        version: i64,
    ) -> EngineResult<Assistant> {
        let assistant = self
            .find_assistant(id)
            .await?
            .ok_or_else(|| EngineError::not_found(format!("Assistant {id} not found")))?;
        self.forget_assistant(assistant.assistant_id);
        Ok(self
            .store()
            .assistants()
            .set_latest(assistant.assistant_id, version)
            .await?)
    }

    /// The graph drawing of an assistant's graph.
    pub(crate) async fn assistant_graph(&self, id: &str, xray: u32) -> EngineResult<Value> {
        let assistant = self.get_assistant(id).await?;
        let graph = self.load_graph(&assistant.graph_id).await?;
        Ok(graph.get_graph(xray).await?)
    }

    /// Subgraph schemas of an assistant's graph, keyed by namespace.
    pub(crate) async fn assistant_subgraphs(
        &self,
        id: &str,
        namespace: Option<String>,
        recurse: bool,
    ) -> EngineResult<serde_json::Map<String, Value>> {
        let assistant = self.get_assistant(id).await?;
        let graph = self.load_graph(&assistant.graph_id).await?;
        let subgraphs = graph.get_subgraphs(namespace, recurse).await?;
        Ok(subgraphs
            .into_iter()
            .map(|(name, mut schema)| {
                schema.graph_id = None;
                (name, serde_json::to_value(schema).unwrap_or(Value::Null))
            })
            .collect())
    }

    /// JSON schemas of an assistant's graph.
    pub(crate) async fn assistant_schemas(&self, id: &str) -> EngineResult<GraphSchema> {
        let assistant = self.get_assistant(id).await?;
        let mut schema = self
            .inner
            .graphs
            .schemas(&assistant.graph_id)
            .await
            .map_err(EngineError::from)?;
        schema.graph_id = Some(assistant.graph_id);
        Ok(schema)
    }
}
