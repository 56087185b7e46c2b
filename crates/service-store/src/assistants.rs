//! Assistants: a live row mirroring its active version, plus immutable versions.

use async_trait::async_trait;
use service_types::{
    Assistant, AssistantVersion, Config, IfExists, Metadata, SortOrder, Timestamp,
};
use uuid::Uuid;

use crate::StoreResult;
use crate::containment::{self, Enforced};
use crate::ordering::{SortField, SortKey};
pub use service_types::AssistantSortBy;

/// A new assistant; it becomes version 1.
#[derive(Clone, Debug, PartialEq)]
pub struct NewAssistant {
    /// Identifier chosen by the caller.
    pub assistant_id: Uuid,
    /// Registered graph.
    pub graph_id: String,
    /// Run configuration.
    pub config: Config,
    /// Static context.
    pub context: Metadata,
    /// Free-form metadata.
    pub metadata: Metadata,
    /// Display name.
    pub name: String,
    /// Optional description.
    pub description: Option<String>,
}

/// Changes minting a new version; absent fields carry over from the active version.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantPatch {
    /// New graph.
    pub graph_id: Option<String>,
    /// Replaces the config.
    pub config: Option<Config>,
    /// Replaces the context.
    pub context: Option<Metadata>,
    /// Shallow-merged into the metadata.
    pub metadata: Option<Metadata>,
    /// New name.
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
}

impl AssistantPatch {
    /// The snapshot an update mints: the live assistant with the patch applied
    /// (metadata shallow-merged, other fields replaced), numbered `version`.
    pub fn mint(self, live: &Assistant, version: i64, now: Timestamp) -> AssistantVersion {
        let mut snapshot = live.snapshot();
        snapshot.version = version;
        snapshot.created_at = now;
        if let Some(graph_id) = self.graph_id {
            snapshot.graph_id = graph_id;
        }
        if let Some(config) = self.config {
            snapshot.config = config;
        }
        if let Some(context) = self.context {
            snapshot.context = context;
        }
        if let Some(metadata) = self.metadata {
            snapshot.metadata.extend(metadata);
        }
        if let Some(name) = self.name {
            snapshot.name = name;
        }
        if let Some(description) = self.description {
            snapshot.description = Some(description);
        }
        snapshot
    }
}

impl SortField<Assistant> for AssistantSortBy {
    fn key(self, assistant: &Assistant) -> SortKey {
        match self {
            Self::AssistantId => SortKey::Id(assistant.assistant_id),
            Self::GraphId => SortKey::Text(assistant.graph_id.clone()),
            Self::Name => SortKey::Text(assistant.name.clone()),
            Self::CreatedAt => SortKey::Time(assistant.created_at),
            Self::UpdatedAt => SortKey::Time(assistant.updated_at),
        }
    }
}

/// Which assistants a search or count selects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantFilter {
    /// Exact graph id.
    pub graph_id: Option<String>,
    /// Containment on metadata.
    pub metadata: Option<Metadata>,
    /// Server-set containment (ownership); a key also in `metadata` matches nothing.
    pub enforced: Option<Enforced>,
    /// Case-insensitive substring of the name.
    pub name: Option<String>,
}

impl AssistantFilter {
    /// True when `assistant` is selected.
    pub fn matches(&self, assistant: &Assistant) -> bool {
        self.graph_id
            .as_ref()
            .is_none_or(|graph| &assistant.graph_id == graph)
            && containment::visible(
                &assistant.metadata,
                self.metadata.as_ref(),
                self.enforced.as_ref(),
            )
            && self.name.as_ref().is_none_or(|needle| {
                assistant
                    .name
                    .to_lowercase()
                    .contains(&needle.to_lowercase())
            })
    }
}

/// An assistant search: filter, sort (ties by id), page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantQuery {
    /// Selection.
    pub filter: AssistantFilter,
    /// Sort field.
    pub sort_by: AssistantSortBy,
    /// Sort direction, also of the id tie-break.
    pub sort_order: SortOrder,
    /// Page size; above 1000 is rejected, absent means the max page size.
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
}

/// One page of assistants and the unpaginated number of matches.
#[derive(Clone, Debug, PartialEq)]
pub struct AssistantPage {
    /// The page.
    pub items: Vec<Assistant>,
    /// Matches before paging (`X-Pagination-Total`).
    pub total: u64,
}

/// A version listing: newest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VersionQuery {
    /// Containment on the version's metadata.
    pub metadata: Option<Metadata>,
    /// Page size; above 1000 is rejected.
    pub limit: Option<usize>,
    /// Rows to skip.
    pub offset: usize,
}

/// The assistants repository.
#[async_trait]
pub trait AssistantsRepo: Send + Sync {
    /// Creates version 1. An existing id is `Conflict` ("Assistant <id> already
    /// exists") with [`IfExists::Raise`], or returns the existing row unchanged.
    async fn create(&self, new: NewAssistant, if_exists: IfExists) -> StoreResult<Assistant>;

    /// The live row.
    async fn get(&self, assistant_id: Uuid) -> StoreResult<Option<Assistant>>;

    /// Mints version max+1 from the active version plus `patch` and activates it.
    /// Unknown id: `NotFound` ("Assistant <id> not found").
    async fn update(&self, assistant_id: Uuid, patch: AssistantPatch) -> StoreResult<Assistant>;

    /// Re-activates an existing version without minting one. Unknown version:
    /// `NotFound` ("Version <n> not found for assistant <id>").
    async fn set_latest(&self, assistant_id: Uuid, version: i64) -> StoreResult<Assistant>;

    /// Deletes the assistant and all its versions. Unknown id: `NotFound`
    /// ("Assistant with ID <id> not found").
    async fn delete(&self, assistant_id: Uuid) -> StoreResult<()>;

    /// Filters, sorts and pages; also returns the unpaginated total.
    async fn search(&self, query: &AssistantQuery) -> StoreResult<AssistantPage>;

    /// Number of matches, not bounded by the page size.
    async fn count(&self, filter: &AssistantFilter) -> StoreResult<u64>;

    /// Versions newest first. Unknown id: `NotFound` ("Assistant <id> not found").
    async fn versions(
        &self,
        assistant_id: Uuid,
        query: &VersionQuery,
    ) -> StoreResult<Vec<AssistantVersion>>;
}
