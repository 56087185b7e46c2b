//! How to serve your own agent from your own axum app: implement [`AgentGraph`]
//! (only `stream` and `get_state` are required), register it in a
//! [`GraphRegistry`] from a function the engine calls with the checkpointer it owns
//! ([`graphs`]), build an [`Engine`] and nest [`service_axum::router_with`] wherever
//! you like, with API keys from `service-auth` ([`api_keys`]) and your own
//! authorization ([`PerUser`]). Run it with `cargo run -p service-example-embedding`.

use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use service_auth::{ApiKeys, AuthConfigError, Identities};
use service_axum::RouterOptions;
use service_axum::auth::Auth;
use service_engine::auth::{Action, AuthRequest, Authorizer, Decision, Principal, Resource};
use service_engine::bus::MemoryBus;
use service_engine::{Engine, EngineConfig, EngineParts};
use service_graph::{
    AgentGraph, CheckpointConfig, Checkpointer, Chunk, ChunkStream, GraphError, GraphRegistry,
    InMemorySaver, RunContext, RunInput, RunnableConfig, StateOptions, StateSnapshot,
    StreamOptions,
};
use service_store::{Clock, SystemClock};
use service_store_memory::{MemoryOptions, memory_store};
use service_types::{GraphSchema, JsonText, Metadata};

/// A hand-written agent: greets `name` and keeps the greeting as its thread's state.
/// The state lives in the checkpointer the engine hands over, so the engine's thread
/// copy, prune and rollback act on it.
pub struct Greeter {
    checkpointer: Arc<dyn Checkpointer>,
}

impl std::fmt::Debug for Greeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Greeter").finish_non_exhaustive()
    }
}

impl Greeter {
    /// A greeter keeping its threads' state in `checkpointer`.
    pub fn new(checkpointer: Arc<dyn Checkpointer>) -> Self {
        Self { checkpointer }
    }

    /// Stores `values` as the thread's next checkpoint, after its latest one. The
    /// run id in the metadata is what a rollback deletes by.
    async fn save(&self, config: &RunnableConfig, values: &Value) -> Result<(), GraphError> {
        let Some(thread) = config.thread_id() else {
            return Ok(()); // a run without a thread keeps nothing
        };
        let latest = CheckpointConfig::new(thread, None);
        let parent = match self.checkpointer.get_tuple(&latest).await? {
            Some(tuple) => tuple.config,
            None => latest,
        };
        let mut metadata = Metadata::new();
        metadata.insert("source".into(), json!("loop"));
        if let Some(run_id) = config.configurable.get("run_id") {
            metadata.insert("run_id".into(), run_id.clone());
        }
        self.checkpointer
            .put(&parent, JsonText::new(values), metadata)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl AgentGraph for Greeter {
    async fn stream(
        &self,
        input: RunInput,
        options: StreamOptions,
        _ctx: RunContext,
    ) -> Result<ChunkStream, GraphError> {
        let name = match &input {
            RunInput::Values(values) => values
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("stranger")
                .to_owned(),
            _ => "stranger".to_owned(),
        };
        let values = json!({ "name": name, "greeting": format!("hello {name}") });
        self.save(&options.config, &values).await?;
        let chunks = vec![
            Ok(Chunk::new("updates", json!({ "greet": values.clone() }))),
            Ok(Chunk::new("values", values)),
        ];
        Ok(Box::pin(futures::stream::iter(chunks)))
    }

    async fn get_state(
        &self,
        config: &RunnableConfig,
        _options: StateOptions,
    ) -> Result<StateSnapshot, GraphError> {
        let Some(checkpoint) = config.checkpoint_config() else {
            return Ok(StateSnapshot::empty());
        };
        let Some(tuple) = self.checkpointer.get_tuple(&checkpoint).await? else {
            return Ok(StateSnapshot::empty());
        };
        Ok(StateSnapshot {
            config: Some(tuple.config),
            parent_config: tuple.parent_config,
            metadata: Some(Value::Object(tuple.metadata)),
            created_at: Some(tuple.created_at),
            ..StateSnapshot::from_values(tuple.checkpoint)
        })
    }
}

/// The graphs this app serves; the engine calls it with the checkpointer it owns.
pub fn graphs(checkpointer: Arc<dyn Checkpointer>) -> Result<GraphRegistry, GraphError> {
    let mut registry = GraphRegistry::new();
    let schema = GraphSchema {
        graph_id: Some("greeter".into()),
        input_schema: Some(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
        ..GraphSchema::default()
    };
    registry.insert("greeter", schema, Arc::new(Greeter::new(checkpointer)));
    Ok(registry)
}

/// Ada's API key. Your app reads its keys from its secrets, never from the source.
pub const ADA_KEY: &str = "ada-key-for-the-example-only";
/// Alan's API key.
pub const ALAN_KEY: &str = "alan-key-for-the-example-only";

/// Who is calling: `service-auth`'s API keys (sent as `x-api-key`), whose principals
/// are `key:ada` and `key:alan`. Implement `service_axum::auth::Authenticator` to
/// check your own sessions or signatures instead, or use `service_auth::Jwt` for
/// your identity provider's tokens.
pub fn api_keys() -> Result<ApiKeys, AuthConfigError> {
    ApiKeys::new(Identities::Qualified)
        .with_key("ada", ADA_KEY, Vec::new())?
        .with_key("alan", ALAN_KEY, Vec::new())
}

/// What each user may do: their own threads, runs and crons; the app's assistants,
/// read-only; a store of their own.
#[derive(Debug)]
pub struct PerUser;

#[async_trait]
impl Authorizer for PerUser {
    async fn authorize(&self, principal: &Principal, request: AuthRequest<'_>) -> Decision {
        let mut owner = Metadata::new();
        owner.insert("user".into(), json!(principal.identity));
        match (request.resource, request.action) {
            (Resource::Threads | Resource::Crons, _) => Decision::Filter(owner),
            (Resource::Store, _) => Decision::Namespace(vec![principal.identity.clone()]),
            (Resource::Assistants, Action::Read | Action::Search) => Decision::Allow,
            (Resource::Assistants, _) => Decision::Deny("Assistants are the app's".into()),
        }
    }
}

/// Your app: its own routes, plus the agent service under `/agents`.
pub async fn app() -> Router {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let config = EngineConfig::default();
    let engine = Engine::new(EngineParts {
        webhooks: None,
        store: memory_store(MemoryOptions::new(clock.clone())),
        graphs: Box::new(graphs),
        checkpointer: Arc::new(InMemorySaver::new()),
        bus: MemoryBus::new(config.bus),
        clock,
        config,
    })
    .expect("building the greeter cannot fail");
    engine
        .system()
        .ensure_system_assistants()
        .await
        .expect("registering an in-memory graph cannot fail");
    engine.start();

    Router::new().route("/health", get(|| async { "ok" })).nest(
        "/agents",
        service_axum::router_with(
            engine,
            RouterOptions {
                auth: Auth {
                    authenticator: Some(Arc::new(
                        api_keys().expect("the example's keys are long and distinct"),
                    )),
                    authorizer: Some(Arc::new(PerUser)),
                },
                ..RouterOptions::default()
            },
        ),
    )
}
