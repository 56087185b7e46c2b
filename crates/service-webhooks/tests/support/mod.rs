//! A real HTTP receiver on loopback (an axum server) that records every delivery and
//! answers as a test plans, and an engine with the example graphs whose webhooks go
//! through an [`Outbox`].

#![allow(dead_code, unused_imports, unreachable_pub)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
pub use serde_json::{Value, json};
use service_engine::bus::MemoryBus;
use service_engine::views::View;
pub use service_engine::{Engine, EngineConfig, EngineParts, RunTarget};
use service_graph::InMemorySaver;
pub use service_store::{Clock, Store, SystemClock};
pub use service_types::{Delivery, DeliveryStatus, Run, RunCreate, RunStatus, ThreadCreate};
pub use service_webhooks::{Outbox, WebhookSettings};
pub use uuid::Uuid;

/// The secret the test outboxes sign with.
pub const SECRET: &str = "whsec-test";

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// How the receiver answers one request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    Status(u16),
    /// Answers 200 after this long (a timeout when longer than the outbox's).
    After(Duration),
}

#[derive(Default)]
struct ReceiverState {
    received: Mutex<Vec<Received>>,
    plan: Mutex<VecDeque<Answer>>,
    /// Requests being answered now, by delivery id: a second one at once is a bug.
    in_flight: Mutex<Vec<String>>,
    overlaps: Mutex<usize>,
}

/// A loopback receiver; requests beyond the plan get 200.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<ReceiverState>,
}

impl Receiver {
    pub async fn start() -> Self {
        let state = Arc::new(ReceiverState::default());
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, state }
    }

    /// The next requests get these answers, in order.
    pub fn plan(&self, answers: impl IntoIterator<Item = Answer>) {
        self.state.plan.lock().unwrap().extend(answers);
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Times two requests for one delivery were being answered at once.
    pub fn overlaps(&self) -> usize {
        *self.state.overlaps.lock().unwrap()
    }

    /// Waits until `count` requests arrived (at most 10 s) and returns them all.
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        eventually(|| async {
            let received = self.received();
            (received.len() >= count).then_some(received)
        })
        .await
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let delivery = headers
        .get("x-service-delivery-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    {
        let mut in_flight = state.in_flight.lock().unwrap();
        if !delivery.is_empty() && in_flight.contains(&delivery) {
            *state.overlaps.lock().unwrap() += 1;
        }
        in_flight.push(delivery.clone());
    }
    // Recorded on arrival: a request the sender gives up on still arrived.
    state
        .received
        .lock()
        .unwrap()
        .push(Received { headers, body });
    let answer = state.plan.lock().unwrap().pop_front();
    let status = match answer {
        Some(Answer::Status(code)) => StatusCode::from_u16(code).unwrap(),
        Some(Answer::After(delay)) => {
            tokio::time::sleep(delay).await;
            StatusCode::OK
        }
        None => StatusCode::OK,
    };
    {
        let mut in_flight = state.in_flight.lock().unwrap();
        if let Some(at) = in_flight.iter().position(|d| *d == delivery) {
            in_flight.remove(at);
        }
    }
    status
}

/// Settings for tests: millisecond retries, a short timeout, signed.
pub fn fast_settings() -> WebhookSettings {
    WebhookSettings {
        max_attempts: 3,
        initial_delay: Duration::from_millis(20),
        secrets: vec![SECRET.into()],
        timeout: Duration::from_millis(300),
        poll_interval: Duration::from_millis(50),
        ..WebhookSettings::default()
    }
}

/// An engine on `store` with the example graphs, sending webhooks with `settings`.
pub async fn engine_on(store: Store, settings: WebhookSettings, config: EngineConfig) -> Engine {
    engine_with_clock(store, settings, config, Arc::new(SystemClock)).await
}

/// [`engine_on`] with its clock.
pub async fn engine_with_clock(
    store: Store,
    settings: WebhookSettings,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
) -> Engine {
    let outbox = Outbox::new(settings, store.clone(), Arc::clone(&clock)).unwrap();
    let engine = Engine::new(EngineParts {
        store,
        graphs: Box::new(service_example_graphs::registry),
        checkpointer: Arc::new(InMemorySaver::new()),
        bus: MemoryBus::new(config.bus),
        clock,
        webhooks: Some(Arc::new(outbox)),
        config,
    })
    .unwrap();
    engine.system().ensure_system_assistants().await.unwrap();
    engine.start();
    engine
}

/// An engine on the in-memory store.
pub async fn memory_engine(settings: WebhookSettings) -> Engine {
    memory_engine_with(settings, EngineConfig::default()).await
}

pub async fn memory_engine_with(settings: WebhookSettings, config: EngineConfig) -> Engine {
    let store = service_store_memory::memory_store(service_store_memory::MemoryOptions::new(
        Arc::new(SystemClock),
    ));
    engine_on(store, settings, config).await
}

/// The engine's unscoped views, as the server's own work sees them.
pub fn unscoped(engine: &Engine) -> View<'_> {
    engine.system().view()
}

pub fn run_body(assistant: &str, input: Value, webhook: &str) -> RunCreate {
    RunCreate {
        assistant_id: assistant.into(),
        input: Some(input),
        webhook: Some(webhook.into()),
        ..RunCreate::default()
    }
}

pub async fn new_thread(engine: &Engine) -> Uuid {
    unscoped(engine)
        .threads()
        .create(ThreadCreate::default())
        .await
        .unwrap()
        .thread_id
}

/// Polls `check` until it returns `Some`, for at most 10 s.
pub async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The run's one delivery once it reached `status`.
pub async fn delivery_in(engine: &Engine, run: &Run, status: DeliveryStatus) -> Delivery {
    eventually(|| async {
        let listed = unscoped(engine)
            .deliveries()
            .list(run.thread_id, run.run_id, &Default::default())
            .await
            .unwrap();
        listed
            .into_iter()
            .find(|delivery| delivery.status == status)
    })
    .await
}
