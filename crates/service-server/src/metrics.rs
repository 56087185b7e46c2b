//! The boot's own parts on `/metrics`, read at each scrape: PostgreSQL's three pools
//! and the Python and Node bridges' workers.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use service_python::WorkerHealth;
use service_store_postgres::PgPools;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LanguageLabels {
    language: &'static str,
}

/// What the collector reads; empty parts report nothing.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    pub pools: Option<PgPools>,
    pub workers: Vec<WorkerHealth>,
}

fn encode(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn set<S: Clone + std::hash::Hash + Eq>(family: &Family<S, Gauge>, labels: &S, value: usize) {
    family
        .get_or_create(labels)
        .set(i64::try_from(value).unwrap_or(i64::MAX));
}

impl Collector for Parts {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(pools) = &self.pools {
            let (in_use, idle, waiting) = (Family::default(), Family::default(), Family::default());
            for (pool, handle) in [
                ("store", &pools.store),
                ("checkpointer", &pools.checkpointer),
                ("claim", &pools.claim),
            ] {
                let status = handle.status();
                let labels = PoolLabels { pool };
                set(
                    &in_use,
                    &labels,
                    status.size.saturating_sub(status.available),
                );
                set(&idle, &labels, status.available);
                set(&waiting, &labels, status.waiting);
            }
            encode(
                &mut encoder,
                "service_db_pool_in_use",
                "PostgreSQL connections handed out, by pool",
                &in_use,
            )?;
            encode(
                &mut encoder,
                "service_db_pool_idle",
                "PostgreSQL connections open and free, by pool",
                &idle,
            )?;
            encode(
                &mut encoder,
                "service_db_pool_waiting",
                "Callers waiting for a PostgreSQL connection, by pool",
                &waiting,
            )?;
        }
        if !self.workers.is_empty() {
            let alive = Family::default();
            let restarted = Family::<LanguageLabels, Counter>::default();
            for health in &self.workers {
                let Some(language) = health.language() else {
                    continue;
                };
                let labels = LanguageLabels { language };
                set(&alive, &labels, health.alive());
                restarted.get_or_create(&labels).inc_by(health.restarts());
            }
            encode(
                &mut encoder,
                "service_graph_workers_alive",
                "Graph worker processes alive, by language",
                &alive,
            )?;
            encode(
                &mut encoder,
                "service_graph_workers_restarted",
                "Graph workers started in place of ones that exited, by language",
                &restarted,
            )?;
        }
        Ok(())
    }
}
