//! The shared coordinator suite against a real PostgreSQL server, plus what only this
//! coordinator has: a LISTEN connection that shutdown closes.

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use service_conformance::coordinator::{Cluster, Instance, eventually, quick, run};
use service_coordinator_postgres::{PgCoordinator, PgCoordinatorOptions};
use service_engine::coordination::{CoordinationTuning, Coordinator};
use tokio_postgres::{Client, Config, NoTls};
use uuid::Uuid;

fn database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Instances on the test database, announcing on a channel of this test's own so
/// tests running alongside do not wake each other.
struct TestDatabase {
    channel: String,
}

impl TestDatabase {
    fn new() -> Self {
        Self {
            channel: format!("coordinator_test_{}", Uuid::new_v4().simple()),
        }
    }
}

/// A configuration whose sessions show up as `application_name`.
fn config(application_name: &str) -> Config {
    let mut config: Config = database_url().parse().expect("TEST_DATABASE_URL");
    config.application_name(application_name);
    config
}

fn pool(config: &Config) -> Pool {
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager).max_size(2).build().expect("pool")
}

/// A coordinator whose every session is named `application_name`.
fn start(channel: &str, application_name: &str, tuning: CoordinationTuning) -> PgCoordinator {
    let config = config(application_name);
    let mut options = PgCoordinatorOptions::new(config.clone(), pool(&config), pool(&config));
    options.channel = channel.to_owned();
    options.tuning = tuning;
    PgCoordinator::start(options).expect("coordinator")
}

async fn admin() -> Client {
    let (client, connection) = tokio_postgres::connect(&database_url(), NoTls)
        .await
        .expect("PostgreSQL reachable");
    tokio::spawn(connection);
    client
}

/// Ends every session named `application_name`, as the death of its process would.
async fn terminate(application_name: String) {
    // With a timeout, pg_terminate_backend returns once the backend has exited (and
    // so released its locks), not as soon as the signal is sent.
    admin()
        .await
        .execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&application_name],
        )
        .await
        .expect("terminate");
}

#[async_trait]
impl Cluster for TestDatabase {
    async fn start(&self, tuning: CoordinationTuning) -> Instance {
        let name = format!("coordinator-test-{}", Uuid::new_v4().simple());
        let coordinator = start(&self.channel, &name, tuning);
        Instance::with_crash(Arc::new(coordinator), move || terminate(name))
    }
}

service_conformance::coordinator_tests!(TestDatabase::new());

/// How many LISTEN sessions named `application_name` the server has.
async fn listening(client: &Client, application_name: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            &[&application_name],
        )
        .await
        .expect("pg_stat_activity")
        .try_get(0)
        .expect("count")
}

#[test]
fn shutdown_closes_the_listen_connection() {
    run(async {
        let name = format!("coordinator-test-{}", Uuid::new_v4().simple());
        let channel = TestDatabase::new().channel;
        let instance = start(&channel, &name, quick());
        let client = admin().await;
        eventually("the LISTEN session opens", || async {
            listening(&client, &name).await == 1
        })
        .await;
        instance.shutdown().await;
        eventually("the LISTEN session is gone", || async {
            listening(&client, &name).await == 0
        })
        .await;
    });
}
