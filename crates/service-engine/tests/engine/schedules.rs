//! Crons and time to live.

use std::sync::Arc;

use service_engine::Caller;
use service_engine::auth::{Principal, Scope};
use service_store::containment::Enforced;
use service_types::{OnCompletion, ThreadSearch};

use crate::support::*;

#[tokio::test]
async fn a_due_cron_fires_one_run_per_occurrence() {
    let Harness { engine, clock } = harness(EngineConfig::default());
    engine.system().ensure_system_assistants().await.unwrap();
    let thread = new_thread(&engine).await;
    let body = CronCreate {
        schedule: "*/5 * * * *".into(),
        run: run_body(
            "echo",
            json!({"messages": [{"type": "human", "content": "tick"}]}),
        ),
        ..CronCreate::default()
    };
    let cron = unscoped(&engine)
        .crons()
        .create(Some(thread), body)
        .await
        .unwrap();
    let next = cron.next_run_date.expect("next occurrence");
    engine.system().fire_due_crons().await;
    assert!(
        unscoped(&engine)
            .runs()
            .list(thread, None, None, None)
            .await
            .unwrap()
            .is_empty()
    );

    clock.set(next);
    engine.system().fire_due_crons().await;
    engine.system().fire_due_crons().await;
    let runs = unscoped(&engine)
        .runs()
        .list(thread, None, None, None)
        .await
        .unwrap();
    assert_eq!(runs.len(), 1, "one occurrence fires exactly one run");
    let advanced = unscoped(&engine).crons().get(cron.cron_id).await.unwrap();
    assert!(advanced.next_run_date.unwrap() > next);
}

#[tokio::test]
async fn an_expired_thread_stays_readable_until_the_sweeper_collects_it() {
    let Harness { engine, clock } = harness(EngineConfig::default());
    let body = ThreadCreate {
        ttl: Some(TtlSetting::Minutes(10.0)),
        ..ThreadCreate::default()
    };
    let thread = unscoped(&engine)
        .threads()
        .create(body)
        .await
        .unwrap()
        .thread_id;
    clock.advance(Duration::from_secs(11 * 60));
    assert!(unscoped(&engine).threads().get(thread).await.is_ok());
    engine.system().sweep_once().await;
    assert!(unscoped(&engine).threads().get(thread).await.is_err());
}

/// A thread `if_not_exists: create` makes for its run gets the default thread ttl, as a
/// thread made by `POST /threads` does.
#[tokio::test]
async fn a_thread_made_for_its_run_gets_the_default_ttl() {
    let config = EngineConfig {
        thread_default_ttl_minutes: Some(10.0),
        ..EngineConfig::default()
    };
    let Harness { engine, clock } = started(config).await;
    let thread = Uuid::now_v7();
    let mut body = run_body("echo", json!({"messages": []}));
    body.if_not_exists = Some(IfNotExists::Create);
    unscoped(&engine)
        .runs()
        .create(RunTarget::Thread(thread), body)
        .await
        .unwrap();
    let ttl = unscoped(&engine)
        .threads()
        .get(thread)
        .await
        .unwrap()
        .ttl
        .expect("ttl");
    assert_eq!(
        (ttl.ttl_minutes, ttl.expires_at),
        (10.0, clock.now().plus_minutes(10.0))
    );
}

/// A cron's patched payload is what each firing creates its run from: it is held to
/// the bounds of a run body, so an endless delay is refused when patched, not later.
#[tokio::test]
async fn a_cron_patch_is_held_to_a_run_bodys_bounds() {
    let Harness { engine, .. } = harness(EngineConfig::default());
    engine.system().ensure_system_assistants().await.unwrap();
    let body = CronCreate {
        schedule: "*/5 * * * *".into(),
        run: run_body("echo", json!({"messages": []})),
        ..CronCreate::default()
    };
    let cron = unscoped(&engine).crons().create(None, body).await.unwrap();
    let patch: service_types::CronPatch =
        serde_json::from_value(json!({"after_seconds": 1e30})).unwrap();
    let error = unscoped(&engine)
        .crons()
        .update(cron.cron_id, patch)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("after_seconds"), "{error}");
    let fine: service_types::CronPatch =
        serde_json::from_value(json!({"after_seconds": 5})).unwrap();
    unscoped(&engine)
        .crons()
        .update(cron.cron_id, fine)
        .await
        .unwrap();
}

/// A cron fires within the scope of the principal that made it: its stateless runs,
/// and the threads made for them, carry that principal's stamp, also after a payload
/// patch that tries to drop it.
#[tokio::test]
async fn a_cron_fires_within_its_creators_scope() {
    let Harness { engine, clock } = harness(EngineConfig::default());
    engine.system().ensure_system_assistants().await.unwrap();
    let owner = json!({"owner": "alice"}).as_object().cloned().unwrap();
    let alice = Caller::new(
        Arc::new(Principal::new("alice")),
        None,
        Scope::Owned(Enforced::metadata(owner)),
    );
    let body = CronCreate {
        schedule: "*/5 * * * *".into(),
        on_run_completed: Some(OnCompletion::Keep),
        run: run_body("echo", json!({"messages": []})),
        ..CronCreate::default()
    };
    let cron = engine
        .as_caller(&alice)
        .crons()
        .create(None, body)
        .await
        .unwrap();
    assert_eq!(cron.metadata["owner"], json!("alice"));
    let patch = service_types::CronPatch {
        payload: json!({"metadata": {"owner": "mallory"}, "enforced_metadata": null})
            .as_object()
            .cloned()
            .unwrap(),
        ..Default::default()
    };
    engine
        .as_caller(&alice)
        .crons()
        .update(cron.cron_id, patch)
        .await
        .unwrap();
    clock.set(cron.next_run_date.expect("next occurrence"));
    engine.system().fire_due_crons().await;
    let search = ThreadSearch {
        metadata: json!({"owner": "alice"}).as_object().cloned(),
        ..ThreadSearch::default()
    };
    let threads = unscoped(&engine)
        .threads()
        .search(search)
        .await
        .unwrap()
        .threads;
    assert_eq!(threads.len(), 1, "the firing's thread is alice's");
    let runs = unscoped(&engine)
        .runs()
        .list(threads[0].thread_id, None, None, None)
        .await
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].metadata["owner"], json!("alice"));
    let bob = Caller::new(
        Arc::new(Principal::new("bob")),
        None,
        Scope::Owned(Enforced::metadata(
            json!({"owner": "bob"}).as_object().cloned().unwrap(),
        )),
    );
    let hidden = engine
        .as_caller(&bob)
        .crons()
        .update(
            cron.cron_id,
            service_types::CronPatch {
                enabled: Some(false),
                ..Default::default()
            },
        )
        .await;
    assert!(hidden.is_err(), "another principal's patch finds no cron");
}
