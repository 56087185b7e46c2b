use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::Utc;
use serde_json::Value;
use service_types::{JsonText, Metadata, PruneStrategy, Timestamp};

use super::{
    CheckpointListOptions, CheckpointTuple, Checkpointer, PendingWrite, metadata_matches,
    new_checkpoint_id,
};
use crate::{CheckpointConfig, GraphError};

/// A checkpoint kept as JSON text (see [`JsonText`]): an idle thread's history is read
/// rarely.
#[derive(Clone, Debug)]
struct Stored {
    parent: Option<String>,
    checkpoint: JsonText,
    metadata: JsonText,
    /// The `run_id` of the metadata, for [`Checkpointer::delete_run`].
    run_id: Option<Box<str>>,
    created_at: Timestamp,
    writes: Vec<StoredWrite>,
}

#[derive(Clone, Debug)]
struct StoredWrite {
    task_id: String,
    channel: String,
    value: JsonText,
}

fn parse<T: serde::de::DeserializeOwned>(text: &JsonText) -> Result<T, GraphError> {
    text.parse().map_err(|error| {
        GraphError::checkpointer_caused_by(format!("stored checkpoint unreadable: {error}"), error)
    })
}

/// Checkpoints of one thread sorted by (namespace, id); id order is write order, so a
/// new checkpoint is almost always pushed at the end. A sorted `Vec` rather than a
/// `BTreeMap`, whose smallest node holds room for eleven entries: most threads have a
/// handful of checkpoints.
#[derive(Clone, Debug, Default)]
struct ThreadCheckpoints(Vec<((String, String), Stored)>);

impl ThreadCheckpoints {
    fn position(&self, key: &(String, String)) -> Result<usize, usize> {
        self.0.binary_search_by(|(probe, _)| probe.cmp(key))
    }

    fn get(&self, key: &(String, String)) -> Option<&Stored> {
        self.position(key).ok().map(|at| &self.0[at].1)
    }

    fn get_mut(&mut self, key: &(String, String)) -> Option<&mut Stored> {
        self.position(key).ok().map(|at| &mut self.0[at].1)
    }

    fn insert(&mut self, key: (String, String), stored: Stored) {
        match self.position(&key) {
            Ok(at) => self.0[at].1 = stored,
            Err(at) => self.0.insert(at, (key, stored)),
        }
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = (&(String, String), &Stored)> {
        self.0.iter().map(|(key, stored)| (key, stored))
    }

    fn retain(&mut self, mut keep: impl FnMut(&(String, String), &Stored) -> bool) {
        self.0.retain(|(key, stored)| keep(key, stored));
    }
}

/// A [`Checkpointer`] in process memory: the development default. Nothing survives
/// a restart.
#[derive(Debug, Default)]
pub struct InMemorySaver {
    threads: Mutex<HashMap<String, ThreadCheckpoints>>,
}

impl InMemorySaver {
    /// An empty saver.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when `thread_id` has any checkpoint: the memory store's claim asks, under
    /// its own lock (this lock is taken inside it, never the other way round).
    pub fn has_checkpoints(&self, thread_id: &str) -> bool {
        self.lock()
            .get(thread_id)
            .is_some_and(|checkpoints| !checkpoints.0.is_empty())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ThreadCheckpoints>> {
        // A poisoned lock only means a panic elsewhere; every update below is atomic.
        self.threads
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn tuple(
    thread_id: &str,
    ns: &str,
    id: &str,
    stored: &Stored,
) -> Result<CheckpointTuple, GraphError> {
    let at = |checkpoint_id: &str| CheckpointConfig {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: ns.to_owned(),
        checkpoint_id: Some(checkpoint_id.to_owned()),
    };
    Ok(CheckpointTuple {
        config: at(id),
        parent_config: stored.parent.as_deref().map(at),
        checkpoint: parse(&stored.checkpoint)?,
        metadata: parse(&stored.metadata)?,
        created_at: stored.created_at,
        pending_writes: stored
            .writes
            .iter()
            .map(|write| {
                Ok(PendingWrite {
                    task_id: write.task_id.clone(),
                    channel: write.channel.clone(),
                    value: parse(&write.value)?,
                })
            })
            .collect::<Result<_, GraphError>>()?,
    })
}

fn in_namespace<'a>(
    checkpoints: &'a ThreadCheckpoints,
    ns: &'a str,
) -> impl DoubleEndedIterator<Item = (&'a String, &'a Stored)> + 'a {
    checkpoints
        .iter()
        .filter(move |((namespace, _), _)| namespace == ns)
        .map(|((_, id), stored)| (id, stored))
}

/// The stored checkpoint `config` names, to update it; `NotFound` when there is none.
fn named_mut<'a>(
    threads: &'a mut HashMap<String, ThreadCheckpoints>,
    config: &CheckpointConfig,
) -> Result<&'a mut Stored, GraphError> {
    config
        .checkpoint_id
        .as_ref()
        .and_then(|id| {
            threads
                .get_mut(&config.thread_id)?
                .get_mut(&(config.checkpoint_ns.clone(), id.clone()))
        })
        .ok_or_else(|| GraphError::NotFound(format!("Checkpoint {config:?} not found")))
}

#[async_trait]
impl Checkpointer for InMemorySaver {
    async fn get_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, GraphError> {
        let threads = self.lock();
        let Some(checkpoints) = threads.get(&config.thread_id) else {
            return Ok(None);
        };
        let ns = config.checkpoint_ns.as_str();
        let found = match &config.checkpoint_id {
            Some(id) => checkpoints
                .get(&(ns.to_owned(), id.clone()))
                .map(|stored| (id, stored)),
            None => in_namespace(checkpoints, ns).next_back(),
        };
        found
            .map(|(id, stored)| tuple(&config.thread_id, ns, id, stored))
            .transpose()
    }

    async fn list(
        &self,
        config: &CheckpointConfig,
        options: CheckpointListOptions,
    ) -> Result<Vec<CheckpointTuple>, GraphError> {
        let threads = self.lock();
        let Some(checkpoints) = threads.get(&config.thread_id) else {
            return Ok(Vec::new());
        };
        let ns = config.checkpoint_ns.as_str();
        let mut found = Vec::new();
        let candidates = in_namespace(checkpoints, ns)
            .rev()
            .filter(|(id, _)| {
                config
                    .checkpoint_id
                    .as_ref()
                    .is_none_or(|wanted| wanted == *id)
            })
            .filter(|(id, _)| {
                options
                    .before
                    .as_ref()
                    .is_none_or(|before| id.as_str() < before.as_str())
            });
        for (id, stored) in candidates {
            if found.len() == options.limit.unwrap_or(usize::MAX) {
                break;
            }
            // The metadata alone decides; the body is parsed only for a match.
            if let Some(filter) = &options.filter
                && !metadata_matches(&parse(&stored.metadata)?, filter)
            {
                continue;
            }
            found.push(tuple(&config.thread_id, ns, id, stored)?);
        }
        Ok(found)
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        self.put_named(config, &new_checkpoint_id(), checkpoint, metadata)
            .await
    }

    async fn put_named(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        checkpoint: JsonText,
        metadata: Metadata,
    ) -> Result<CheckpointConfig, GraphError> {
        let id = checkpoint_id.to_owned();
        let mut stored = Stored {
            parent: config.checkpoint_id.clone(),
            checkpoint,
            run_id: metadata
                .get("run_id")
                .and_then(Value::as_str)
                .map(Box::from),
            metadata: JsonText::new(&metadata),
            created_at: Timestamp::new(Utc::now()),
            writes: Vec::new(),
        };
        let mut threads = self.lock();
        let checkpoints = threads.entry(config.thread_id.clone()).or_default();
        let key = (config.checkpoint_ns.clone(), id.clone());
        if let Some(replaced) = checkpoints.get_mut(&key) {
            stored.writes = std::mem::take(&mut replaced.writes);
        }
        checkpoints.insert(key, stored);
        Ok(CheckpointConfig {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: Some(id),
        })
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        task_id: &str,
        writes: Vec<(String, Value)>,
    ) -> Result<(), GraphError> {
        let mut threads = self.lock();
        let stored = named_mut(&mut threads, config)?;
        for (channel, value) in writes {
            stored
                .writes
                .retain(|write| !(write.task_id == task_id && write.channel == channel));
            stored.writes.push(StoredWrite {
                task_id: task_id.to_owned(),
                channel,
                value: JsonText::new(&value),
            });
        }
        Ok(())
    }

    async fn merge_metadata(
        &self,
        config: &CheckpointConfig,
        metadata: Metadata,
    ) -> Result<(), GraphError> {
        let mut threads = self.lock();
        let stored = named_mut(&mut threads, config)?;
        let mut merged: Metadata = parse(&stored.metadata)?;
        merged.extend(metadata);
        stored.run_id = merged.get("run_id").and_then(Value::as_str).map(Box::from);
        stored.metadata = JsonText::new(&merged);
        Ok(())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), GraphError> {
        self.lock().remove(thread_id);
        Ok(())
    }

    async fn copy_thread(&self, from: &str, to: &str) -> Result<(), GraphError> {
        let mut threads = self.lock();
        let copy = threads.get(from).cloned().unwrap_or_default();
        threads.insert(to.to_owned(), copy);
        Ok(())
    }

    async fn prune(&self, thread_id: &str, strategy: PruneStrategy) -> Result<(), GraphError> {
        let mut threads = self.lock();
        match strategy {
            PruneStrategy::Delete => {
                threads.remove(thread_id);
            }
            PruneStrategy::KeepLatest => {
                if let Some(checkpoints) = threads.get_mut(thread_id) {
                    let mut latest: HashMap<String, String> = HashMap::new();
                    for ((ns, id), _) in checkpoints.iter() {
                        latest.insert(ns.clone(), id.clone());
                    }
                    checkpoints.retain(|(ns, id), _| latest.get(ns) == Some(id));
                }
            }
        }
        Ok(())
    }

    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<(), GraphError> {
        if let Some(checkpoints) = self.lock().get_mut(thread_id) {
            checkpoints.retain(|_, stored| stored.run_id.as_deref() != Some(run_id));
        }
        Ok(())
    }
}
