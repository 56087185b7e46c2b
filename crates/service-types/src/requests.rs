//! Request bodies of every route, as the SDKs send them. Unknown keys are ignored
//! (the SDKs send keys meant for other routes, and JS batch items keep camelCase
//! keys), absent and `null` are the same unless a field says otherwise.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::{
    Checkpoint, Config, Durability, IfExists, IfNotExists, ItemTtl, Metadata, MultitaskStrategy,
    OnCompletion, OnDisconnect, PruneStrategy, SortOrder, StreamMode, ThreadStatus, TtlSetting,
};

/// Deserializes a field that distinguishes "absent" (`None`) from "null" (`Some(None)`).
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// `"*"` (every node) or a list of node names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeSelection {
    /// Every node.
    All,
    /// These nodes.
    Nodes(Vec<String>),
}

impl<'de> Deserialize<'de> for NodeSelection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            Many(Vec<String>),
        }
        match Raw::deserialize(deserializer)? {
            Raw::One(text) if text == "*" => Ok(Self::All),
            Raw::One(text) => Err(serde::de::Error::custom(format!(
                "expected \"*\" or a list of node names, got {text:?}"
            ))),
            Raw::Many(nodes) => Ok(Self::Nodes(nodes)),
        }
    }
}

impl Serialize for NodeSelection {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::All => serializer.serialize_str("*"),
            Self::Nodes(nodes) => nodes.serialize(serializer),
        }
    }
}

impl NodeSelection {
    /// True when `node` is selected.
    pub fn contains(&self, node: &str) -> bool {
        match self {
            Self::All => true,
            Self::Nodes(nodes) => nodes.iter().any(|name| name == node),
        }
    }
}

/// One stream mode or a list of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum StreamModes {
    /// A single mode.
    One(StreamMode),
    /// Several modes.
    Many(Vec<StreamMode>),
}

impl StreamModes {
    /// The modes, de-duplicated in request order.
    pub fn to_vec(&self) -> Vec<StreamMode> {
        let modes: &[StreamMode] = match self {
            Self::One(mode) => std::slice::from_ref(mode),
            Self::Many(modes) => modes,
        };
        let mut unique = Vec::with_capacity(modes.len());
        for mode in modes {
            if !unique.contains(mode) {
                unique.push(*mode);
            }
        }
        unique
    }
}

/// The run-creation body of every run route (thread, stateless, batch items, cron
/// payloads). Keys that do not apply to a route are ignored, not rejected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunCreate {
    /// Assistant UUID or registered graph id.
    pub assistant_id: String,
    /// Graph input; null with no command continues from the current state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// `{resume, update, goto, ...}`, handed to the agent whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Value>,
    /// Run metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Run configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Config>,
    /// Run context.
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Metadata>,
    /// Start from this checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Start from this checkpoint (namespaced form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// Run-completion webhook URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// Pause before these nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_before: Option<NodeSelection>,
    /// Pause after these nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_after: Option<NodeSelection>,
    /// Modes to stream (and buffer for joins); `["values"]` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_mode: Option<StreamModes>,
    /// Stream frames of subgraphs too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_subgraphs: Option<bool>,
    /// Send frame ids so clients can resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_resumable: Option<bool>,
    /// Feedback keys (tracing only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_keys: Option<Vec<String>>,
    /// What to do when the thread is busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multitask_strategy: Option<MultitaskStrategy>,
    /// What to do when the thread does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_not_exists: Option<IfNotExists>,
    /// Keep or delete a stateless run's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_completion: Option<OnCompletion>,
    /// What closing the connection does (stream and wait routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_disconnect: Option<OnDisconnect>,
    /// Delay before the run may start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seconds: Option<f64>,
    /// Checkpoint durability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<Durability>,
    /// Deprecated alias of durability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_during: Option<bool>,
}

impl RunCreate {
    /// Requested stream modes, `["values"]` when none were given.
    pub fn stream_modes(&self) -> Vec<StreamMode> {
        match &self.stream_mode {
            Some(modes) => {
                let modes = modes.to_vec();
                if modes.is_empty() {
                    vec![StreamMode::Values]
                } else {
                    modes
                }
            }
            None => vec![StreamMode::Values],
        }
    }
}

/// `POST /assistants`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct AssistantCreate {
    /// Registered graph the assistant runs.
    pub graph_id: Option<String>,
    /// Caller-chosen id.
    #[serde(default)]
    pub assistant_id: Option<Uuid>,
    /// Run configuration.
    #[serde(default)]
    pub config: Option<Config>,
    /// Context.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub context: Option<Metadata>,
    /// Metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Conflict behaviour.
    #[serde(default)]
    pub if_exists: Option<IfExists>,
    /// Name (`Untitled` by default).
    #[serde(default)]
    pub name: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
}

/// `PATCH /assistants/{id}`: every present key is applied, minting a new version.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct AssistantPatch {
    /// New graph.
    #[serde(default)]
    pub graph_id: Option<String>,
    /// Replaces the config.
    #[serde(default)]
    pub config: Option<Config>,
    /// Replaces the context.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub context: Option<Metadata>,
    /// Shallow-merged into the metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// New description.
    #[serde(default)]
    pub description: Option<String>,
}

/// Sort keys of assistant search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AssistantSortBy {
    /// By id.
    AssistantId,
    /// By graph.
    GraphId,
    /// By name.
    Name,
    /// By creation (default).
    #[default]
    CreatedAt,
    /// By last update.
    UpdatedAt,
}

/// `POST /assistants/search` and `/count`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct AssistantSearch {
    /// Containment filter on metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Only this graph.
    #[serde(default)]
    pub graph_id: Option<String>,
    /// Case-insensitive substring of the name.
    #[serde(default)]
    pub name: Option<String>,
    /// Page size (1..=1000, default 10).
    #[serde(default)]
    pub limit: Option<i64>,
    /// Page start.
    #[serde(default)]
    pub offset: Option<i64>,
    /// Sort key.
    #[serde(default)]
    pub sort_by: Option<AssistantSortBy>,
    /// Sort direction.
    #[serde(default)]
    pub sort_order: Option<SortOrder>,
    /// Fields to return.
    #[serde(default)]
    pub select: Option<Vec<String>>,
}

/// `POST /assistants/{id}/versions`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct AssistantVersionsQuery {
    /// Containment filter on the version's metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Page size.
    #[serde(default)]
    pub limit: Option<i64>,
    /// Page start.
    #[serde(default)]
    pub offset: Option<i64>,
}

/// `POST /assistants/{id}/latest`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
pub struct SetLatest {
    /// Version to activate.
    pub version: i64,
}

/// One state update of a superstep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SuperstepUpdate {
    /// Values written.
    #[serde(default)]
    pub values: Option<Value>,
    /// Optional command.
    #[serde(default)]
    pub command: Option<Value>,
    /// Node the write is attributed to.
    pub as_node: String,
}

/// A superstep: updates applied together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Superstep {
    /// The updates.
    pub updates: Vec<SuperstepUpdate>,
}

/// `POST /threads`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct ThreadCreate {
    /// Caller-chosen id.
    #[serde(default)]
    pub thread_id: Option<Uuid>,
    /// Metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Conflict behaviour.
    #[serde(default)]
    pub if_exists: Option<IfExists>,
    /// Time to live; `null` pins the thread.
    #[serde(default)]
    pub ttl: Option<TtlSetting>,
    /// State updates applied in order at creation.
    #[serde(default)]
    pub supersteps: Option<Vec<Superstep>>,
}

/// `PATCH /threads/{id}`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct ThreadPatch {
    /// Shallow-merged into the metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Absent: unchanged; null: cleared (pinned); a value: restarts the clock.
    #[serde(default, deserialize_with = "nullable")]
    pub ttl: Option<Option<TtlSetting>>,
}

/// Sort keys of thread search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThreadSortBy {
    /// By id.
    ThreadId,
    /// By status.
    Status,
    /// By creation.
    CreatedAt,
    /// By last update (default).
    #[default]
    UpdatedAt,
    /// By last state change.
    StateUpdatedAt,
}

/// `POST /threads/search` and `/count`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct ThreadSearch {
    /// Only these ids.
    #[serde(default)]
    pub ids: Option<Vec<Uuid>>,
    /// Containment filter on metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Containment filter on values.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub values: Option<Metadata>,
    /// Only this status.
    #[serde(default)]
    pub status: Option<ThreadStatus>,
    /// Page size (1..=1000, default 10).
    #[serde(default)]
    pub limit: Option<i64>,
    /// Page start.
    #[serde(default)]
    pub offset: Option<i64>,
    /// Sort key.
    #[serde(default)]
    pub sort_by: Option<ThreadSortBy>,
    /// Sort direction.
    #[serde(default)]
    pub sort_order: Option<SortOrder>,
    /// Fields to return.
    #[serde(default)]
    pub select: Option<Vec<String>>,
    /// Alias to path extraction (Python SDK only).
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub extract: Option<Metadata>,
    /// Leaves out threads whose metadata contains it (or any of them).
    #[serde(default)]
    pub exclude_metadata: Option<ExcludeMetadata>,
}

/// `exclude_metadata` of a thread search or count: one object or a list of them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ExcludeMetadata {
    /// One object.
    One(Metadata),
    /// Several; a thread containing any of them is left out.
    Many(Vec<Metadata>),
}

impl ExcludeMetadata {
    /// The objects, as a list.
    pub fn into_list(self) -> Vec<Metadata> {
        match self {
            Self::One(metadata) => vec![metadata],
            Self::Many(list) => list,
        }
    }
}

/// `POST /threads/prune`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct ThreadPrune {
    /// Threads to prune.
    pub thread_ids: Vec<Uuid>,
    /// Delete them, or keep only their latest checkpoint.
    #[serde(default)]
    pub strategy: Option<PruneStrategy>,
}

/// `POST /threads/{id}/state`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct ThreadStateUpdate {
    /// Values written through the reducers.
    #[serde(default)]
    pub values: Option<Value>,
    /// Node the write is attributed to.
    #[serde(default)]
    pub as_node: Option<String>,
    /// Fork from this checkpoint.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    /// Fork from this checkpoint (namespaced form).
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
}

/// `PATCH /threads/{id}/state`: merge into the latest checkpoint's metadata.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct ThreadStatePatch {
    /// Metadata merged in.
    #[schema(value_type = Object)]
    pub metadata: Metadata,
}

/// `POST /threads/{id}/state/checkpoint`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct ThreadStateAtCheckpoint {
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Include subgraph states.
    #[serde(default)]
    pub subgraphs: Option<bool>,
}

/// `before` of a history query, in any of the three forms the SDKs send.
#[derive(Clone, Debug, PartialEq, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum HistoryBefore {
    /// A checkpoint id (Python).
    Id(String),
    /// `{"configurable": {"checkpoint_id": ...}}` (JS).
    Config {
        /// The configurable holding the checkpoint id.
        configurable: Checkpoint,
    },
    /// A flat checkpoint (Python).
    Checkpoint(Checkpoint),
}

impl HistoryBefore {
    /// The checkpoint id, whatever the form.
    pub fn checkpoint_id(&self) -> Option<&str> {
        match self {
            Self::Id(id) => Some(id),
            Self::Config { configurable } => configurable.checkpoint_id.as_deref(),
            Self::Checkpoint(checkpoint) => checkpoint.checkpoint_id.as_deref(),
        }
    }
}

/// `POST /threads/{id}/history`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct HistoryQuery {
    /// Page size (default 100, at most 1000).
    #[serde(default)]
    pub limit: Option<i64>,
    /// Only checkpoints older than this one.
    #[serde(default)]
    pub before: Option<HistoryBefore>,
    /// Containment filter on checkpoint metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Namespace / starting point.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// Only these fields of each entry ([`crate::HistorySelect`]).
    #[serde(default)]
    pub select: Option<Vec<String>>,
}

/// Status selector of a bulk cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BulkCancelStatus {
    /// Pending runs.
    Pending,
    /// Running runs.
    Running,
    /// Both.
    All,
}

/// `POST /runs/cancel`: exactly one of the two forms.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct BulkCancel {
    /// Form 1: every run with this status.
    #[serde(default)]
    pub status: Option<BulkCancelStatus>,
    /// Form 2: these runs of this thread.
    #[serde(default)]
    pub thread_id: Option<Uuid>,
    /// Form 2: the run ids.
    #[serde(default)]
    pub run_ids: Option<Vec<Uuid>>,
}

/// `POST /runs/crons` and `/threads/{id}/runs/crons`: a run body plus schedule fields.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct CronCreate {
    /// 5-field cron expression.
    pub schedule: String,
    /// No firings after this instant.
    #[serde(default)]
    pub end_time: Option<crate::Timestamp>,
    /// IANA time zone; UTC when absent.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Paused when false.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// What a stateless firing does with its thread.
    #[serde(default)]
    pub on_run_completed: Option<OnCompletion>,
    /// The run body of each firing.
    #[serde(flatten)]
    pub run: RunCreate,
}

/// `PATCH /runs/crons/{id}`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct CronPatch {
    /// New schedule.
    #[serde(default)]
    pub schedule: Option<String>,
    /// Absent: unchanged; null: cleared.
    #[serde(default, deserialize_with = "nullable")]
    pub end_time: Option<Option<crate::Timestamp>>,
    /// New time zone.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Pause or resume.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// New completion behaviour.
    #[serde(default)]
    pub on_run_completed: Option<OnCompletion>,
    /// Shallow-merged into the metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Payload keys replaced (input, config, context, webhook, ...).
    #[schema(ignore)]
    #[serde(flatten)]
    pub payload: Metadata,
}

/// Sort keys of cron search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CronSortBy {
    /// By id.
    CronId,
    /// By assistant.
    AssistantId,
    /// By thread.
    ThreadId,
    /// By next firing.
    NextRunDate,
    /// By end time.
    EndTime,
    /// By creation (default).
    #[default]
    CreatedAt,
    /// By last update.
    UpdatedAt,
}

/// `POST /runs/crons/search` and `/count`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct CronSearch {
    /// Only this assistant (UUID or graph id).
    #[serde(default)]
    pub assistant_id: Option<String>,
    /// Only this thread.
    #[serde(default)]
    pub thread_id: Option<Uuid>,
    /// Only enabled or disabled crons.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Containment filter on metadata.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Page size (1..=1000, default 10).
    #[serde(default)]
    pub limit: Option<i64>,
    /// Page start.
    #[serde(default)]
    pub offset: Option<i64>,
    /// Sort key.
    #[serde(default)]
    pub sort_by: Option<CronSortBy>,
    /// Sort direction.
    #[serde(default)]
    pub sort_order: Option<SortOrder>,
    /// Fields to return.
    #[serde(default)]
    pub select: Option<Vec<String>>,
}

/// `PUT /store/items`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct StorePut {
    /// Namespace path (non-empty, no `.` in labels).
    pub namespace: Vec<String>,
    /// Key.
    pub key: String,
    /// The object stored.
    pub value: Value,
    /// `false` or fields to embed.
    #[serde(default)]
    pub index: Option<Value>,
    /// Time to live in minutes; absent or `null` is the configured default.
    #[serde(default, deserialize_with = "crate::item::client_ttl")]
    #[schema(value_type = Option<f64>)]
    pub ttl: ItemTtl,
}

/// `DELETE /store/items`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct StoreDelete {
    /// Namespace path.
    pub namespace: Vec<String>,
    /// Key.
    pub key: String,
}

/// `POST /store/items/search`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct StoreSearch {
    /// Namespace prefix.
    #[serde(default)]
    pub namespace_prefix: Vec<String>,
    /// Filter on top-level value keys.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub filter: Option<Metadata>,
    /// Page size (default 10, at most 1000).
    #[serde(default)]
    pub limit: Option<i64>,
    /// Page start.
    #[serde(default)]
    pub offset: Option<i64>,
    /// Semantic query text.
    #[serde(default)]
    pub query: Option<String>,
    /// Extend the ttl of returned items.
    #[serde(default)]
    pub refresh_ttl: Option<bool>,
}

/// `POST /store/namespaces`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct StoreListNamespaces {
    /// Namespace prefix (`*` matches one segment).
    #[serde(default)]
    pub prefix: Option<Vec<String>>,
    /// Namespace suffix (`*` matches one segment).
    #[serde(default)]
    pub suffix: Option<Vec<String>>,
    /// Truncate matches to this depth.
    #[serde(default)]
    pub max_depth: Option<i64>,
    /// Page size (default 100; above 1000 clamped).
    #[serde(default)]
    pub limit: Option<i64>,
    /// Page start.
    #[serde(default)]
    pub offset: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_selection_accepts_star_and_lists_only() {
        let all: NodeSelection = serde_json::from_value(json!("*")).unwrap();
        assert_eq!(all, NodeSelection::All);
        let some: NodeSelection = serde_json::from_value(json!(["a"])).unwrap();
        assert!(some.contains("a") && !some.contains("b"));
        assert!(serde_json::from_value::<NodeSelection>(json!("a")).is_err());
        assert_eq!(
            serde_json::to_value(NodeSelection::All).unwrap(),
            json!("*")
        );
    }

    #[test]
    fn run_create_ignores_keys_meant_for_other_routes() {
        let body = json!({"assistant_id": "echo", "streamMode": ["values"], "on_completion": "keep", "command": null});
        let run: RunCreate = serde_json::from_value(body).unwrap();
        assert_eq!(run.assistant_id, "echo");
        assert_eq!(run.command, None);
        assert_eq!(run.stream_modes(), vec![StreamMode::Values]);
    }

    #[test]
    fn run_create_rejects_unknown_stream_modes() {
        let body = json!({"assistant_id": "echo", "stream_mode": ["lifecycle"]});
        assert!(serde_json::from_value::<RunCreate>(body).is_err());
    }

    #[test]
    fn history_before_accepts_all_three_forms() {
        for before in [
            json!("1f1-abc"),
            json!({"configurable": {"checkpoint_id": "1f1-abc"}}),
            json!({"checkpoint_id": "1f1-abc", "checkpoint_ns": ""}),
        ] {
            let query: HistoryQuery = serde_json::from_value(json!({"before": before})).unwrap();
            assert_eq!(query.before.unwrap().checkpoint_id(), Some("1f1-abc"));
        }
    }

    #[test]
    fn thread_patch_tells_null_ttl_from_absent() {
        let absent: ThreadPatch = serde_json::from_value(json!({})).unwrap();
        assert_eq!(absent.ttl, None);
        let cleared: ThreadPatch = serde_json::from_value(json!({"ttl": null})).unwrap();
        assert_eq!(cleared.ttl, Some(None));
        let object: ThreadPatch =
            serde_json::from_value(json!({"ttl": {"ttl": 5, "strategy": "delete"}})).unwrap();
        assert_eq!(object.ttl.unwrap().unwrap().minutes(), 5.0);
        let bare: ThreadPatch = serde_json::from_value(json!({"ttl": 7})).unwrap();
        assert_eq!(bare.ttl.unwrap().unwrap().minutes(), 7.0);
    }
}
