//! The JSON bodies of the main routes, decoded as the router decodes every JSON body
//! (`service_axum::decode_json_body`), then checked as the engine checks them before
//! it reads or writes anything. The first byte picks the body type, the rest is the
//! body. Every refusal must be a 4xx: a panic or a 5xx is a finding.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde_json::Value;
use service_axum::{ApiError, decode_json_body, status_of};
use service_engine::limits::{
    check_run_numbers, check_ttl_minutes, clamped_limit, offset, search_limit,
};
use service_engine::{EngineError, RunTarget, validate_namespace, validate_run_body};
use service_store::schedule::Schedule;
use service_store::semantic::{IndexFields, texts_at_path};
use service_store::{NamespaceQuery, PageLimits, StoreFilter};
use service_types::{
    AssistantCreate, AssistantSearch, CronCreate, CronSearch, RunCreate, StoreListNamespaces,
    StorePut, StoreSearch, ThreadCreate, ThreadPatch, ThreadSearch, ThreadStateUpdate, Timestamp,
    TtlSetting,
};

fuzz_target!(|data: &[u8]| {
    let Some((&route, body)) = data.split_first() else {
        return;
    };
    match route % 13 {
        0 => run_create(body),
        1 => run_batch(body),
        2 => thread_create(body),
        3 => thread_search(body),
        4 => store_put(body),
        5 => store_search(body),
        6 => store_namespaces(body),
        7 => cron_create(body),
        8 => decoded::<AssistantCreate>(body).map(drop),
        9 => decoded::<AssistantSearch>(body).map(drop),
        10 => decoded::<ThreadPatch>(body).map(drop),
        11 => decoded::<ThreadStateUpdate>(body).map(drop),
        _ => decoded::<CronSearch>(body).map(drop),
    }
    .unwrap_or_else(|error| refused(&error));
});

/// A refusal must be the client's fault, with a message.
fn refused(error: &EngineError) {
    let status = status_of(error.kind);
    assert!(status.is_client_error(), "{status} for {error:?}");
    assert!(!error.message.is_empty(), "a refusal without a message");
}

fn decoded<T: DeserializeOwned>(body: &[u8]) -> Result<T, EngineError> {
    decode_json_body(body).map_err(|ApiError(error)| error)
}

fn run_create(body: &[u8]) -> Result<(), EngineError> {
    let body: RunCreate = decoded(body)?;
    validate_run_body(&body, RunTarget::Stateless)?;
    validate_run_body(&body, RunTarget::Thread(uuid::Uuid::nil()))
}

/// `POST /runs/batch`: a list of values, each read as a run body.
fn run_batch(body: &[u8]) -> Result<(), EngineError> {
    let items: Vec<Value> = decoded(body)?;
    for item in items {
        let Ok(body) = serde_json::from_value::<RunCreate>(item) else {
            continue;
        };
        validate_run_body(&body, RunTarget::Stateless)?;
    }
    Ok(())
}

fn thread_create(body: &[u8]) -> Result<(), EngineError> {
    let body: ThreadCreate = decoded(body)?;
    check_ttl_minutes(body.ttl.map(TtlSetting::minutes))
}

fn thread_search(body: &[u8]) -> Result<(), EngineError> {
    let body: ThreadSearch = decoded(body)?;
    search_limit(body.limit)?;
    offset(body.offset)?;
    Ok(())
}

fn store_put(body: &[u8]) -> Result<(), EngineError> {
    let body: StorePut = decoded(body)?;
    validate_namespace(&body.namespace)?;
    let Value::Object(_) = &body.value else {
        return Ok(());
    };
    let fields = IndexFields::from_request(body.index.as_ref())?;
    check_ttl_minutes(body.ttl)?;
    if let IndexFields::Paths(paths) = fields {
        for path in &paths {
            texts_at_path(&body.value, path);
        }
    }
    Ok(())
}

fn store_search(body: &[u8]) -> Result<(), EngineError> {
    let body: StoreSearch = decoded(body)?;
    let filter = match &body.filter {
        Some(filter) => StoreFilter::from_object(filter)?,
        None => StoreFilter::default(),
    };
    search_limit(body.limit)?;
    offset(body.offset)?;
    // The filter against the request itself: any object will do.
    if let Some(object) = &body.filter {
        filter.matches(object);
    }
    Ok(())
}

fn store_namespaces(body: &[u8]) -> Result<(), EngineError> {
    let body: StoreListNamespaces = decoded(body)?;
    let max_depth = match body.max_depth {
        Some(depth) if depth < 1 => return Ok(()),
        depth => depth.map(|depth| depth as usize),
    };
    let query = NamespaceQuery {
        prefix: body.prefix,
        suffix: body.suffix,
        max_depth,
        limit: Some(clamped_limit(body.limit, 100)?),
        offset: offset(body.offset)?,
    };
    let stored = [vec!["a".to_owned(), "b".to_owned()], vec!["a".to_owned()]];
    query.collect(stored.iter().map(Vec::as_slice), PageLimits::default())?;
    Ok(())
}

fn cron_create(body: &[u8]) -> Result<(), EngineError> {
    let body: CronCreate = decoded(body)?;
    let schedule = Schedule::parse(&body.schedule, body.timezone.as_deref())?;
    check_run_numbers(&body.run)?;
    let now = Timestamp::parse("2026-01-01T00:00:00Z").expect("a timestamp");
    schedule.next_after(now, body.end_time);
    Ok(())
}
