//! Webhooks on PostgreSQL: the delivery row is written with the run's terminal status,
//! and two outboxes on one database never send one attempt twice at the same time.

mod support;

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;

use service_engine::Webhooks;
use service_store_postgres::{PgOptions, PostgresStore};
use service_webhooks::{Attempt, AttemptError, Dispatcher, HttpDispatcher};
use support::*;
use tokio_util::sync::CancellationToken;

/// A store in a schema of its own, dropped by [`Schema::drop`].
struct Schema {
    name: String,
}

fn database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

async fn postgres_store(label: &str) -> (Store, Schema) {
    let name = format!("svc_webhooks_{label}_{}", std::process::id());
    let options = PgOptions {
        pool_max: 6,
        schema: Some(name.clone()),
        ..PgOptions::new(database_url())
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let backend = PostgresStore::connect(options, clock)
        .await
        .expect("PostgreSQL reachable");
    (backend.store(), Schema { name })
}

impl Schema {
    async fn drop(self) {
        let (client, connection) = tokio_postgres::connect(&database_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_settles_with_its_delivery_and_is_delivered_signed() {
    let (store, schema) = postgres_store("settle").await;
    let receiver = Receiver::start().await;
    let engine = engine_on(store, fast_settings(), EngineConfig::default()).await;
    let thread = new_thread(&engine).await;
    let run = unscoped(&engine)
        .runs()
        .create(
            RunTarget::Thread(thread),
            run_body("approval", json!({"topic": "x"}), &receiver.url),
        )
        .await
        .unwrap();
    let hook = &receiver.wait_for(1).await[0];
    assert_eq!(hook.json()["status"], "interrupted");
    assert_eq!(
        service_webhooks::verify(
            &hook.headers,
            &hook.body,
            &[SECRET],
            service_webhooks::DEFAULT_TOLERANCE
        ),
        Ok(())
    );
    let delivered = delivery_in(&engine, &run, DeliveryStatus::Delivered).await;
    assert_eq!(delivered.attempt, 1);
    engine.shutdown().await;
    schema.drop().await;
}

/// The HTTP dispatcher, counting what it sends.
#[derive(Debug)]
struct Counting {
    inner: HttpDispatcher,
    sent: AtomicUsize,
}

#[async_trait::async_trait]
impl Dispatcher for Counting {
    async fn post(&self, attempt: Attempt) -> Result<(), AttemptError> {
        self.sent.fetch_add(1, SeqCst);
        self.inner.post(attempt).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_outboxes_on_one_database_never_send_one_attempt_twice_at_once() {
    let (store, schema) = postgres_store("rivals").await;
    let receiver = Receiver::start().await;
    // Slow failures first, so retries pile up where both outboxes search.
    receiver.plan((0..24).map(|_| Answer::Status(500)));
    let settings = WebhookSettings {
        max_attempts: 6,
        initial_delay: Duration::from_millis(10),
        poll_interval: Duration::from_millis(5),
        ..fast_settings()
    };
    let engine = engine_on(store.clone(), settings.clone(), EngineConfig::default()).await;
    let counted = Arc::new(Counting {
        inner: HttpDispatcher::new(&settings).unwrap(),
        sent: AtomicUsize::new(0),
    });
    let rival = Outbox::with_dispatcher(settings, store, Arc::new(SystemClock), counted.clone());
    let stop = CancellationToken::new();
    let searching = tokio::spawn({
        let rival = rival.clone();
        let stop = stop.clone();
        async move { rival.run(stop).await }
    });

    let runs = 12;
    let mut created = Vec::new();
    for _ in 0..runs {
        let run = unscoped(&engine)
            .runs()
            .create(
                RunTarget::Stateless,
                run_body("echo", json!({}), &receiver.url),
            )
            .await
            .unwrap();
        created.push(run);
    }
    let received = eventually(|| async {
        let received = receiver.received();
        let delivered: std::collections::BTreeSet<_> = received
            .iter()
            .skip(24)
            .map(|r| r.header("x-service-delivery-id").unwrap().to_owned())
            .collect();
        (delivered.len() == runs).then_some(received)
    })
    .await;
    assert_eq!(
        receiver.overlaps(),
        0,
        "an attempt was sent while another was in flight"
    );
    let mut attempts: Vec<(String, String)> = received
        .iter()
        .map(|r| {
            (
                r.header("x-service-delivery-id").unwrap().to_owned(),
                r.header("x-service-attempt").unwrap().to_owned(),
            )
        })
        .collect();
    let sent = attempts.len();
    attempts.sort();
    attempts.dedup();
    assert_eq!(attempts.len(), sent, "an attempt number was sent twice");
    assert!(
        counted.sent.load(SeqCst) > 0,
        "the rival outbox took part in the retries"
    );
    stop.cancel();
    searching.await.unwrap();
    engine.shutdown().await;
    schema.drop().await;
}
