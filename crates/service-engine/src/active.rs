//! The runs executing on this instance, by id, with what stops them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A run executing here: how to stop it, and whether its stop is a rollback.
#[derive(Clone, Debug, Default)]
pub(crate) struct ActiveRun {
    pub(crate) cancel: CancellationToken,
    rollback: Arc<AtomicBool>,
}

impl ActiveRun {
    /// Stops the run; a rollback also deletes what it wrote.
    pub(crate) fn stop(&self, rollback: bool) {
        if rollback {
            self.rollback.store(true, Ordering::Relaxed);
        }
        self.cancel.cancel();
    }

    /// Whether the run was stopped as a rollback.
    pub(crate) fn rolled_back(&self) -> bool {
        self.rollback.load(Ordering::Relaxed)
    }
}

/// Registered before a run's claim where possible, so a cancel reaches it from the
/// start.
#[derive(Debug, Default)]
pub(crate) struct ActiveRuns(Mutex<HashMap<Uuid, ActiveRun>>);

impl ActiveRuns {
    fn map(&self) -> MutexGuard<'_, HashMap<Uuid, ActiveRun>> {
        // The map only holds handles; a panic elsewhere cannot corrupt it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a run's stop handles.
    pub(crate) fn register(&self, run_id: Uuid) -> ActiveRun {
        let handles = ActiveRun::default();
        self.map().insert(run_id, handles.clone());
        handles
    }

    /// Forgets a run that ended or was not claimed.
    pub(crate) fn remove(&self, run_id: Uuid) {
        self.map().remove(&run_id);
    }

    /// Whether the run executes here.
    pub(crate) fn contains(&self, run_id: Uuid) -> bool {
        self.map().contains_key(&run_id)
    }

    /// Stops a run if it executes here; true when it does.
    pub(crate) fn stop(&self, run_id: Uuid, rollback: bool) -> bool {
        match self.map().get(&run_id) {
            Some(run) => {
                run.stop(rollback);
                true
            }
            None => false,
        }
    }

    /// Stops every run executing here; returns how many there were.
    pub(crate) fn stop_all(&self) -> usize {
        let map = self.map();
        for run in map.values() {
            run.stop(false);
        }
        map.len()
    }
}
