//! The shared coordinator suite, run against the coordinator of one process.

use std::sync::Arc;

use async_trait::async_trait;
use service_conformance::coordinator::{Cluster, Instance};
use service_engine::coordination::{CoordinationTuning, LocalCoordinator};

/// Instances that share nothing: each is a process of its own.
struct OneProcess;

#[async_trait]
impl Cluster for OneProcess {
    async fn start(&self, _tuning: CoordinationTuning) -> Instance {
        Instance::new(Arc::new(LocalCoordinator))
    }
}

service_conformance::coordinator_tests!(OneProcess, single_process);
