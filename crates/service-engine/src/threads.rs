//! Threads: CRUD, search, copy, prune, and state/history through the thread's graph.

use serde_json::{Value, json};
use service_graph::{
    AgentGraph, CheckpointConfig, HistoryOptions, RunnableConfig, StateOptions, StateSnapshot,
    StateUpdate,
};
use service_store::containment::Enforced;
use service_store::{NewThread, ThreadFilter, ThreadQuery, TtlChange};
use service_types::{
    Checkpoint, ExcludeMetadata, HistoryQuery, IfExists, Metadata, PruneStrategy, Thread,
    ThreadCreate, ThreadPatch, ThreadSearch, ThreadState, ThreadStateUpdate, ThreadStatus,
    TtlSetting,
};
use uuid::Uuid;

use crate::auth::Scope;
use crate::bus::Topic;
use crate::limits::{offset, search_limit};
use crate::outcome::snapshot_mirror;
use crate::{Engine, EngineError, EngineResult};

/// Default and largest page of a history query.
const HISTORY_DEFAULT_LIMIT: usize = 100;

/// One page of a thread search.
#[derive(Clone, Debug)]
pub struct ThreadSearchPage {
    /// The matches on this page.
    pub threads: Vec<Thread>,
    /// Offset of the next page, when this page was full.
    pub next_offset: Option<usize>,
}

pub(crate) fn thread_not_found(thread_id: Uuid) -> EngineError {
    EngineError::not_found(format!("Thread with ID {thread_id} not found"))
}

impl Engine {
    fn default_ttl(&self, ttl: Option<TtlSetting>) -> Option<TtlSetting> {
        ttl.or_else(|| {
            self.config()
                .thread_default_ttl_minutes
                .map(TtlSetting::Minutes)
        })
    }

    /// Creates a thread stamped with `scope`, applying `supersteps` through its graph
    /// when given. An existing thread outside `scope` is a conflict before anything is
    /// applied to it (`if_exists: do_nothing` would otherwise hand it over).
    pub(crate) async fn create_thread(
        &self,
        mut body: ThreadCreate,
        scope: &Scope,
    ) -> EngineResult<Thread> {
        crate::limits::check_ttl_minutes(body.ttl.map(TtlSetting::minutes))?;
        scope.stamp_option(&mut body.metadata);
        let thread_id = body.thread_id.unwrap_or_else(Uuid::now_v7);
        let new = NewThread {
            thread_id,
            metadata: body.metadata.unwrap_or_default(),
            status: ThreadStatus::Idle,
            ttl: self.default_ttl(body.ttl),
        };
        let if_exists = body.if_exists.unwrap_or_default();
        let thread = self.store().threads().create(new, if_exists).await?;
        if !scope.admits(&thread.metadata) {
            return Err(EngineError::conflict(format!(
                "Thread {thread_id} already exists"
            )));
        }
        let Some(supersteps) = body.supersteps.filter(|steps| !steps.is_empty()) else {
            return Ok(thread);
        };
        if if_exists == IfExists::DoNothing && thread.values.is_some() {
            return Ok(thread);
        }
        let applied = self
            .editing_state(thread_id, self.apply_supersteps(&thread, supersteps))
            .await;
        if let Err(error) = applied {
            if error.kind == crate::ErrorKind::Conflict {
                // Refused for a run on the thread: the thread is that run's now.
                return Err(error);
            }
            // A thread whose creation failed halfway is not left behind.
            let _ = self.store().threads().delete(thread_id).await;
            let _ = self
                .inner
                .checkpointer
                .delete_thread(&thread_id.to_string())
                .await;
            return Err(error);
        }
        self.get_thread(thread_id).await
    }

    async fn apply_supersteps(
        &self,
        thread: &Thread,
        supersteps: Vec<service_types::Superstep>,
    ) -> EngineResult<()> {
        let graph = self.thread_graph(thread).await?;
        let steps = supersteps
            .into_iter()
            .map(|step| {
                step.updates
                    .into_iter()
                    .map(|update| StateUpdate {
                        values: update.values,
                        command: update.command,
                        as_node: Some(update.as_node),
                    })
                    .collect()
            })
            .collect();
        let config = RunnableConfig::for_thread(thread.thread_id.to_string());
        graph.bulk_update_state(&config, steps).await?;
        let state = self
            .mirror_from_graph(thread.thread_id, graph.as_ref(), None)
            .await?;
        self.publish_state_update(thread.thread_id, &state).await;
        Ok(())
    }

    /// Reads a thread.
    pub(crate) async fn get_thread(&self, thread_id: Uuid) -> EngineResult<Thread> {
        self.store()
            .threads()
            .get(thread_id)
            .await?
            .ok_or_else(|| thread_not_found(thread_id))
    }

    /// Merges metadata and changes the ttl.
    pub(crate) async fn patch_thread(
        &self,
        thread_id: Uuid,
        body: ThreadPatch,
    ) -> EngineResult<Thread> {
        let ttl = match body.ttl {
            None => TtlChange::Keep,
            Some(None) => TtlChange::Clear,
            Some(Some(ttl)) => {
                crate::limits::check_ttl_minutes(Some(ttl.minutes()))?;
                TtlChange::Set(ttl)
            }
        };
        let patch = service_store::ThreadPatch {
            metadata: body.metadata,
            ttl,
        };
        self.store()
            .threads()
            .patch(thread_id, patch)
            .await
            .map_err(|error| match error.kind {
                service_store::ErrorKind::NotFound => EngineError::not_found("Not Found"),
                _ => error.into(),
            })
    }

    /// Deletes a thread with its runs, checkpoints and thread-scoped crons; an in-flight
    /// run is aborted.
    pub(crate) async fn delete_thread(&self, thread_id: Uuid) -> EngineResult<()> {
        if self.store().threads().get(thread_id).await?.is_none() {
            return Err(thread_not_found(thread_id));
        }
        self.abort_thread_runs(thread_id).await?;
        self.store().threads().delete(thread_id).await?;
        self.inner
            .checkpointer
            .delete_thread(&thread_id.to_string())
            .await
            .map_err(EngineError::internal)?;
        self.inner.bus.discard(Topic::Thread(thread_id)).await;
        Ok(())
    }

    pub(crate) async fn delete_threads_of_assistant(
        &self,
        assistant_id: Uuid,
        enforced: Option<Enforced>,
    ) -> EngineResult<()> {
        let mut metadata = Metadata::new();
        metadata.insert(
            "assistant_id".into(),
            Value::String(assistant_id.to_string()),
        );
        loop {
            let query = ThreadQuery {
                filter: ThreadFilter {
                    metadata: Some(metadata.clone()),
                    enforced: enforced.clone(),
                    ..ThreadFilter::default()
                },
                limit: Some(100),
                ..ThreadQuery::default()
            };
            let page = self.store().threads().search(&query).await?;
            if page.is_empty() {
                return Ok(());
            }
            for thread in page {
                self.delete_thread(thread.thread_id).await?;
            }
        }
    }

    /// Searches threads. `enforced` is the server-set ownership filter.
    pub(crate) async fn search_threads(
        &self,
        body: ThreadSearch,
        enforced: Option<Enforced>,
    ) -> EngineResult<ThreadSearchPage> {
        let limit = search_limit(body.limit)?;
        let offset = offset(body.offset)?;
        let query = ThreadQuery {
            filter: ThreadFilter {
                exclude_metadata: body
                    .exclude_metadata
                    .map(ExcludeMetadata::into_list)
                    .unwrap_or_default(),
                ids: body.ids,
                metadata: body.metadata,
                enforced,
                status: body.status,
                values: body.values,
            },
            sort_by: body.sort_by.unwrap_or_default(),
            sort_order: body.sort_order.unwrap_or_default(),
            limit,
            offset,
        };
        let threads = self.store().threads().search(&query).await?;
        let limit = limit.unwrap_or(self.config().max_page_size);
        let next_offset = (threads.len() == limit).then_some(offset + limit);
        Ok(ThreadSearchPage {
            threads,
            next_offset,
        })
    }

    /// Counts threads within `enforced`.
    pub(crate) async fn count_threads(
        &self,
        body: ThreadSearch,
        enforced: Option<Enforced>,
    ) -> EngineResult<u64> {
        let filter = ThreadFilter {
            exclude_metadata: body
                .exclude_metadata
                .map(ExcludeMetadata::into_list)
                .unwrap_or_default(),
            ids: body.ids,
            metadata: body.metadata,
            enforced,
            status: body.status,
            values: body.values,
        };
        Ok(self.store().threads().count(&filter).await?)
    }

    /// Copies a thread with its checkpoints into a new thread.
    pub(crate) async fn copy_thread(&self, thread_id: Uuid) -> EngineResult<Thread> {
        let new_id = Uuid::new_v4();
        let thread = self.store().threads().copy(thread_id, new_id).await?;
        self.inner
            .checkpointer
            .copy_thread(&thread_id.to_string(), &new_id.to_string())
            .await
            .map_err(EngineError::internal)?;
        Ok(thread)
    }

    /// Prunes threads: deletes them, or keeps only their latest checkpoint. Returns how
    /// many existing threads were pruned.
    pub(crate) async fn prune_threads(
        &self,
        ids: Vec<Uuid>,
        strategy: PruneStrategy,
    ) -> EngineResult<u64> {
        let mut pruned = 0;
        for thread_id in ids {
            if self.store().threads().get(thread_id).await?.is_none() {
                continue;
            }
            match strategy {
                PruneStrategy::Delete => self.delete_thread(thread_id).await?,
                PruneStrategy::KeepLatest => self
                    .inner
                    .checkpointer
                    .prune(&thread_id.to_string(), PruneStrategy::KeepLatest)
                    .await
                    .map_err(EngineError::internal)?,
            }
            pruned += 1;
        }
        Ok(pruned)
    }

    /// The graph a thread's state belongs to (`metadata.graph_id`, set by its runs).
    async fn thread_graph(&self, thread: &Thread) -> EngineResult<std::sync::Arc<dyn AgentGraph>> {
        let graph_id = thread
            .metadata
            .get("graph_id")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                EngineError::bad_request(format!(
                    "Thread '{}' has no assigned graph ID. This usually occurs when no runs have been made on this thread. Please create a run first.",
                    thread.thread_id
                ))
            })?;
        self.load_graph(graph_id).await
    }

    /// The thread's state, at a checkpoint when one is given.
    pub(crate) async fn thread_state(
        &self,
        thread_id: Uuid,
        checkpoint: Option<Checkpoint>,
        subgraphs: bool,
    ) -> EngineResult<ThreadState> {
        let thread = self.get_thread(thread_id).await?;
        if !thread.metadata.contains_key("graph_id") {
            return Ok(ThreadState::empty());
        }
        let graph = self.thread_graph(&thread).await?;
        let config = checkpoint_config(thread_id, checkpoint.as_ref());
        let snapshot = graph.get_state(&config, StateOptions { subgraphs }).await?;
        Ok(snapshot.to_thread_state())
    }

    /// Writes values through the graph's reducers as if `as_node` wrote them.
    pub(crate) async fn update_thread_state(
        &self,
        thread_id: Uuid,
        body: ThreadStateUpdate,
    ) -> EngineResult<Value> {
        let thread = self.get_thread(thread_id).await?;
        let graph = self.thread_graph(&thread).await?;
        let checkpoint = body.checkpoint.or_else(|| {
            body.checkpoint_id.map(|id| Checkpoint {
                checkpoint_id: Some(id),
                ..Checkpoint::default()
            })
        });
        let config = checkpoint_config(thread_id, checkpoint.as_ref());
        let values = body.values.unwrap_or(Value::Null);
        let written = self
            .editing_state(thread_id, async {
                let written = graph.update_state(&config, values, body.as_node).await?;
                let state = self
                    .mirror_from_graph(thread_id, graph.as_ref(), None)
                    .await?;
                self.publish_state_update(thread_id, &state).await;
                Ok(written)
            })
            .await?;
        let wire = written.to_wire();
        Ok(json!({
            "checkpoint": wire,
            "configurable": wire,
            "checkpoint_id": written.checkpoint_id,
        }))
    }

    /// Merges metadata into the metadata of the thread's latest checkpoint (JS
    /// `threads.patchState`). A thread without a checkpoint has nothing to patch: 404.
    pub(crate) async fn patch_thread_state(
        &self,
        thread_id: Uuid,
        metadata: Metadata,
    ) -> EngineResult<()> {
        self.get_thread(thread_id).await?;
        let checkpointer = &self.inner.checkpointer;
        self.editing_state(thread_id, async {
            let latest = checkpointer
                .get_tuple(&CheckpointConfig::new(thread_id.to_string(), None))
                .await?
                .ok_or_else(|| {
                    EngineError::not_found(format!("Thread {thread_id} has no state to patch"))
                })?;
            checkpointer
                .merge_metadata(&latest.config, metadata)
                .await?;
            Ok(())
        })
        .await
    }

    /// Checkpoints of a thread, newest first.
    pub(crate) async fn thread_history(
        &self,
        thread_id: Uuid,
        query: HistoryQuery,
    ) -> EngineResult<Vec<ThreadState>> {
        let thread = self.get_thread(thread_id).await?;
        if !thread.metadata.contains_key("graph_id") {
            return Ok(Vec::new());
        }
        let limit = search_limit(query.limit)?.unwrap_or(HISTORY_DEFAULT_LIMIT);
        let graph = self.thread_graph(&thread).await?;
        let config = checkpoint_config(thread_id, query.checkpoint.as_ref());
        let options = HistoryOptions {
            limit: Some(limit),
            before: query
                .before
                .as_ref()
                .and_then(|before| before.checkpoint_id().map(str::to_owned)),
            filter: query.metadata,
        };
        let history = graph.get_state_history(&config, options).await?;
        Ok(history.iter().map(StateSnapshot::to_thread_state).collect())
    }

    /// Reads the graph's current state and mirrors it onto the thread row. `status`
    /// overrides the status derived from the state (idle, or interrupted when paused).
    pub(crate) async fn mirror_from_graph(
        &self,
        thread_id: Uuid,
        graph: &dyn AgentGraph,
        status: Option<(ThreadStatus, Option<String>)>,
    ) -> EngineResult<StateSnapshot> {
        let config = RunnableConfig::for_thread(thread_id.to_string());
        let snapshot = graph.get_state(&config, StateOptions::default()).await?;
        self.mirror_snapshot(thread_id, &snapshot, status).await?;
        Ok(snapshot)
    }

    /// Mirrors an already-read state onto the thread row.
    pub(crate) async fn mirror_snapshot(
        &self,
        thread_id: Uuid,
        snapshot: &StateSnapshot,
        status: Option<(ThreadStatus, Option<String>)>,
    ) -> EngineResult<()> {
        let mirror = snapshot_mirror(snapshot, status);
        self.store().threads().mirror(thread_id, mirror).await?;
        Ok(())
    }

    async fn publish_state_update(&self, thread_id: Uuid, state: &StateSnapshot) {
        let data = json!({"state": state.to_thread_state(), "thread_id": thread_id});
        if let Err(error) = self
            .inner
            .frames
            .publish_thread_event(thread_id, "state_update", &data)
            .await
        {
            tracing::error!(%thread_id, %error, "publishing a state update failed");
        }
    }
}

fn checkpoint_config(thread_id: Uuid, checkpoint: Option<&Checkpoint>) -> RunnableConfig {
    let mut config = RunnableConfig::from(CheckpointConfig {
        thread_id: thread_id.to_string(),
        checkpoint_ns: checkpoint
            .map(|c| c.checkpoint_ns.clone())
            .unwrap_or_default(),
        checkpoint_id: checkpoint.and_then(|c| c.checkpoint_id.clone()),
    });
    if let Some(map) = checkpoint.and_then(|c| c.checkpoint_map.clone()) {
        config
            .configurable
            .insert("checkpoint_map".into(), Value::Object(map));
    }
    config
}
