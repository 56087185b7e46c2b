//! System assistants: the server's own mark, which no client can write.

use service_types::{Assistant, AssistantCreate};

use crate::support::*;

/// An assistant a client made at a graph's system id before the graph's system
/// assistant existed (a graph added later) is replaced by the system assistant at
/// boot: the graph id never runs a squatter's configuration.
#[tokio::test]
async fn a_squatter_at_a_graphs_system_id_is_replaced_by_the_system_assistant() {
    let harness = harness(EngineConfig::default());
    let engine = &harness.engine;
    let system_id = Assistant::system_id("echo");
    let squatter = AssistantCreate {
        assistant_id: Some(system_id),
        graph_id: Some("steps".into()),
        name: Some("squatter".into()),
        ..AssistantCreate::default()
    };
    unscoped(engine)
        .assistants()
        .create(squatter)
        .await
        .unwrap();
    engine.system().ensure_system_assistants().await.unwrap();
    let echo = unscoped(engine).assistants().get("echo").await.unwrap();
    assert_eq!(echo.assistant_id, system_id);
    assert_eq!(
        (echo.graph_id.as_str(), echo.name.as_str()),
        ("echo", "echo")
    );
    assert_eq!(echo.metadata["created_by"], json!("system"));
    // A second boot keeps the system assistant as it is.
    engine.system().ensure_system_assistants().await.unwrap();
    let again = unscoped(engine).assistants().get("echo").await.unwrap();
    assert_eq!(again.updated_at, echo.updated_at);
}

/// Clients cannot write the system mark, whoever they are.
#[tokio::test]
async fn the_system_mark_is_refused_on_create_and_patch() {
    let harness = harness(EngineConfig::default());
    let engine = &harness.engine;
    let marked = json!({"created_by": "system"}).as_object().cloned();
    let create = AssistantCreate {
        graph_id: Some("echo".into()),
        metadata: marked.clone(),
        ..AssistantCreate::default()
    };
    let refused = unscoped(engine)
        .assistants()
        .create(create)
        .await
        .unwrap_err();
    assert_eq!(refused.kind, service_engine::ErrorKind::Unprocessable);
    let own = AssistantCreate {
        graph_id: Some("echo".into()),
        ..AssistantCreate::default()
    };
    let own = unscoped(engine).assistants().create(own).await.unwrap();
    let patch = service_types::AssistantPatch {
        metadata: marked,
        ..Default::default()
    };
    let id = own.assistant_id.to_string();
    let refused = unscoped(engine)
        .assistants()
        .update(&id, patch)
        .await
        .unwrap_err();
    assert_eq!(refused.kind, service_engine::ErrorKind::Unprocessable);
}
