//! Run routes: create (background, stream, wait; on a thread or stateless), batch,
//! list, get, delete, cancel, join and join-stream.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use service_engine::auth::{Action, Resource};
use service_engine::bus::Replay;
use service_engine::views::Watched;
use service_engine::{Caller, Engine, RunStream, RunTarget, RunToJoin, run_not_found};
use service_types::{BulkCancel, CancelAction, OnDisconnect, Run, RunCreate, RunStatus};
use uuid::Uuid;

use std::sync::Arc;

use crate::auth::CallerOf;
use crate::error::{ApiError, ApiResult, unprocessable};
use crate::extract::{JsonBody, Path, QueryParams, uuid};
use crate::headers::{RunBody, apply_to};
use crate::json::{self, Json};
use crate::project;
use crate::routes::Table;
use crate::routes::{MountPrefix, headers};
use crate::sse::{ModeFilter, OnDrop, SseBody, encode, sse_response, waiting_json_response};
use crate::streams::StreamSlot;
use crate::{ClientLimits, ConfigurableHeaders};

const SELECTABLE: [&str; 12] = [
    "run_id",
    "thread_id",
    "assistant_id",
    "created_at",
    "updated_at",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
    "error",
    "langsmith_session_name",
    "cancel_reason",
];

pub(crate) fn routes() -> Table {
    use Action::{CreateRun, Delete, Read, Update};
    const T: Resource = Resource::Threads;
    Table::new()
        .post(
            "/threads/{thread_id}/runs",
            (T, CreateRun),
            create_on_thread,
        )
        .get("/threads/{thread_id}/runs", (T, Read), list)
        .post(
            "/threads/{thread_id}/runs/stream",
            (T, CreateRun),
            stream_on_thread,
        )
        .post(
            "/threads/{thread_id}/runs/wait",
            (T, CreateRun),
            wait_on_thread,
        )
        .get("/threads/{thread_id}/runs/{run_id}", (T, Read), read)
        .delete("/threads/{thread_id}/runs/{run_id}", (T, Delete), remove)
        .post(
            "/threads/{thread_id}/runs/{run_id}/cancel",
            (T, Update),
            cancel,
        )
        .get("/threads/{thread_id}/runs/{run_id}/join", (T, Read), join)
        .get(
            "/threads/{thread_id}/runs/{run_id}/stream",
            (T, Read),
            join_stream_on_thread,
        )
        .post("/runs", (T, CreateRun), create_stateless)
        .post("/runs/stream", (T, CreateRun), stream_stateless)
        .post("/runs/wait", (T, CreateRun), wait_stateless)
        .post("/runs/batch", (T, CreateRun), batch)
        .post("/runs/cancel", (T, Update), cancel_many)
        .get("/runs/{run_id}/stream", (T, Read), join_stream_stateless)
}

fn run_path(prefix: &MountPrefix, run: &Run, stateless: bool) -> String {
    if stateless {
        format!("{}/runs/{}", prefix.0, run.run_id)
    } else {
        thread_path(prefix, run)
    }
}

fn thread_path(prefix: &MountPrefix, run: &Run) -> String {
    format!("{}/threads/{}/runs/{}", prefix.0, run.thread_id, run.run_id)
}

fn cancel_action(query: &QueryParams) -> CancelAction {
    match query.get("action") {
        Some("rollback") => CancelAction::Rollback,
        _ => CancelAction::Interrupt,
    }
}

/// Cancels the run when dropped (the client went away), if the client asked for it.
pub(crate) fn cancel_on_drop(
    engine: &Engine,
    caller: &Caller,
    run: &Run,
    cancel: bool,
) -> Option<OnDrop> {
    if !cancel {
        return None;
    }
    let (engine, caller) = (engine.clone(), caller.clone());
    let (thread_id, run_id) = (run.thread_id, run.run_id);
    Some(OnDrop::new(move || {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                // Finished runs answer "not found": nothing left to cancel.
                let runs = engine.as_caller(&caller).runs();
                let _ = runs.cancel_on_disconnect(thread_id, run_id).await;
            });
        }
    }))
}

async fn create(
    engine: &Engine,
    caller: &Caller,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let run = engine.as_caller(caller).runs().create(target, body).await?;
    let location = run_path(prefix, &run, target == RunTarget::Stateless);
    Ok((headers(&[("content-location", location)]), Json(run)).into_response())
}

async fn create_on_thread(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    RunBody(body): RunBody,
) -> ApiResult<Response> {
    create(
        &engine,
        &caller,
        &prefix,
        RunTarget::Thread(uuid("thread", &thread_id)?),
        body,
    )
    .await
}

async fn create_stateless(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    RunBody(body): RunBody,
) -> ApiResult<Response> {
    create(&engine, &caller, &prefix, RunTarget::Stateless, body).await
}

async fn stream(
    engine: &Engine,
    caller: &Caller,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let resumable = body.stream_resumable.unwrap_or(false);
    let cancel = body.on_disconnect == Some(OnDisconnect::Cancel);
    let runs = engine.as_caller(caller).runs();
    let (run, watched) = runs.create_watched(target, body).await?;
    let stateless = target == RunTarget::Stateless;
    let location = run_path(prefix, &run, stateless);
    let extra = headers(&[
        ("location", format!("{location}/stream")),
        ("content-location", location),
    ]);
    let body = SseBody {
        prelude: Vec::new(),
        subscription: Some(watched.into_frames()),
        with_ids: resumable,
        filter: ModeFilter::default(),
        on_drop: cancel_on_drop(engine, caller, &run, cancel),
    };
    Ok(sse_response(body, extra))
}

async fn stream_on_thread(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    slot: StreamSlot,
    RunBody(body): RunBody,
) -> ApiResult<Response> {
    let target = RunTarget::Thread(uuid("thread", &thread_id)?);
    let response = stream(&engine, &caller, &prefix, target, body).await?;
    Ok(slot.held_by(response))
}

async fn stream_stateless(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    slot: StreamSlot,
    RunBody(body): RunBody,
) -> ApiResult<Response> {
    let response = stream(&engine, &caller, &prefix, RunTarget::Stateless, body).await?;
    Ok(slot.held_by(response))
}

/// A streamed JSON body carrying the run's wait/join result.
async fn result_response(
    engine: &Engine,
    caller: &Caller,
    prefix: &MountPrefix,
    run: &Run,
    watched: Option<Watched>,
    on_drop: Option<OnDrop>,
) -> Response {
    let path = thread_path(prefix, run);
    let extra = headers(&[
        ("location", format!("{path}/join")),
        ("content-location", path),
    ]);
    let (engine, caller, run_id) = (engine.clone(), caller.clone(), run.run_id);
    let result = async move {
        let runs = engine.as_caller(&caller).runs();
        let body = match watched {
            Some(watched) => runs.wait(watched).await,
            // Found by this caller, so the check cannot refuse it.
            None => runs
                .result(run_id)
                .await
                .unwrap_or_else(|_| json!({ "__error__": run_not_found() })),
        };
        Bytes::from(json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec()))
    };
    waiting_json_response(result, extra, on_drop).await
}

async fn wait(
    engine: &Engine,
    caller: &Caller,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let cancel = body.on_disconnect == Some(OnDisconnect::Cancel);
    let runs = engine.as_caller(caller).runs();
    let (run, watched) = runs.create_watched(target, body).await?;
    let on_drop = cancel_on_drop(engine, caller, &run, cancel);
    Ok(result_response(engine, caller, prefix, &run, Some(watched), on_drop).await)
}

async fn wait_on_thread(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    slot: StreamSlot,
    RunBody(body): RunBody,
) -> ApiResult<Response> {
    let target = RunTarget::Thread(uuid("thread", &thread_id)?);
    let response = wait(&engine, &caller, &prefix, target, body).await?;
    Ok(slot.held_by(response))
}

async fn wait_stateless(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    slot: StreamSlot,
    RunBody(body): RunBody,
) -> ApiResult<Response> {
    let response = wait(&engine, &caller, &prefix, RunTarget::Stateless, body).await?;
    Ok(slot.held_by(response))
}

async fn batch(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Extension(limits): Extension<ClientLimits>,
    copied: Option<Extension<Arc<ConfigurableHeaders>>>,
    headers: HeaderMap,
    JsonBody(items): JsonBody<Vec<Value>>,
) -> ApiResult<Response> {
    if items.len() > limits.max_batch_runs {
        return Err(unprocessable(format!(
            "A batch creates at most {} runs (SERVICE_MAX_BATCH_RUNS); this one has {}",
            limits.max_batch_runs,
            items.len()
        )));
    }
    // Every item is checked before any run is created, so a bad item creates nothing.
    let bodies = items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let mut body = serde_json::from_value::<RunCreate>(item)
                .map_err(|error| unprocessable(format!("Invalid run at index {index}: {error}")))?;
            apply_to(
                copied.as_ref().map(|policy| policy.as_ref()),
                &headers,
                &mut body,
            );
            Ok(body)
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let mut runs = Vec::with_capacity(bodies.len());
    for body in bodies {
        let created = engine
            .as_caller(&caller)
            .runs()
            .create(RunTarget::Stateless, body);
        runs.push(created.await?);
    }
    Ok(Json(runs).into_response())
}

async fn list(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(thread_id): Path<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    let status = query
        .get("status")
        .map(|status| {
            serde_json::from_value::<RunStatus>(json!(status))
                .map_err(|_| unprocessable(format!("Invalid run status: '{status}'")))
        })
        .transpose()?;
    let (limit, offset) = (query.int("limit")?, query.int("offset")?);
    let runs = engine.as_caller(&caller).runs();
    let runs = runs.list(thread_id, limit, offset, status).await?;
    let items = project::select(&runs, &query.list("select"), &SELECTABLE)?;
    Ok(Json(items).into_response())
}

async fn read(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    let run = engine
        .as_caller(&caller)
        .runs()
        .get(thread_id, run_id)
        .await?;
    Ok(Json(run).into_response())
}

async fn remove(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    engine
        .as_caller(&caller)
        .runs()
        .delete(thread_id, run_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn cancel(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    let runs = engine.as_caller(&caller).runs();
    let run = runs
        .cancel(thread_id, run_id, cancel_action(&query))
        .await?;
    if query.bool("wait")?.unwrap_or(false) {
        return Ok(result_response(&engine, &caller, &prefix, &run, None, None).await);
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn cancel_many(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    query: QueryParams,
    JsonBody(body): JsonBody<BulkCancel>,
) -> ApiResult<StatusCode> {
    let runs = engine.as_caller(&caller).runs();
    runs.cancel_many(body, cancel_action(&query)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn join(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
    slot: StreamSlot,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    let cancel = query.bool("cancel_on_disconnect")?.unwrap_or(false);
    let runs = engine.as_caller(&caller).runs();
    match runs.join(Some(thread_id), run_id).await? {
        RunToJoin::Run(run) => {
            let cancel = cancel && !run.status.is_terminal();
            let on_drop = cancel_on_drop(&engine, &caller, &run, cancel);
            let response = result_response(&engine, &caller, &prefix, &run, None, on_drop).await;
            Ok(slot.held_by(response))
        }
        RunToJoin::Forgotten => Ok(Json(runs.result(run_id).await?).into_response()),
        RunToJoin::Unknown => Ok(Json(json!({ "__error__": run_not_found() })).into_response()),
    }
}

async fn join_stream_on_thread(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
    slot: StreamSlot,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    let response = join_stream(
        &engine,
        &caller,
        &prefix,
        Some(thread_id),
        uuid("run", &run_id)?,
        &query,
        &request_headers,
    )
    .await?;
    Ok(slot.held_by(response))
}

async fn join_stream_stateless(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    prefix: MountPrefix,
    Path(run_id): Path<String>,
    query: QueryParams,
    slot: StreamSlot,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    let run_id = uuid("run", &run_id)?;
    let headers = &request_headers;
    let response = join_stream(&engine, &caller, &prefix, None, run_id, &query, headers).await?;
    Ok(slot.held_by(response))
}

/// Joins a run's stream: replays after `Last-Event-ID` (`-1` from the start), then
/// live frames; without the header, live frames only. An unknown run gets one error
/// frame, as on the reference server.
async fn join_stream(
    engine: &Engine,
    caller: &Caller,
    prefix: &MountPrefix,
    thread_id: Option<Uuid>,
    run_id: Uuid,
    query: &QueryParams,
    request_headers: &HeaderMap,
) -> ApiResult<Response> {
    let last_event_id = request_headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok());
    let replay = Replay::from_last_event_id(last_event_id)
        .ok_or_else(|| unprocessable("Invalid last-event-id"))?;
    let Some(RunStream {
        run,
        subscription,
        resumable,
    }) = engine
        .as_caller(caller)
        .runs()
        .join_stream(thread_id, run_id, replay)
        .await?
    else {
        let frame = encode("error", run_not_found().to_string().as_bytes(), None);
        let body = SseBody {
            prelude: vec![frame],
            subscription: None,
            with_ids: false,
            filter: ModeFilter::default(),
            on_drop: None,
        };
        return Ok(sse_response(body, HeaderMap::new()));
    };
    let active = run.as_ref().is_some_and(|run| !run.status.is_terminal());
    let cancel = query.bool("cancel_on_disconnect")?.unwrap_or(false) && active;
    let path = match thread_id {
        Some(thread_id) => format!("{}/threads/{thread_id}/runs/{run_id}", prefix.0),
        None => format!("{}/runs/{run_id}", prefix.0),
    };
    let extra = headers(&[
        ("location", format!("{path}/stream")),
        ("content-location", path),
    ]);
    let body = SseBody {
        prelude: Vec::new(),
        subscription,
        with_ids: resumable || last_event_id.is_some(),
        filter: ModeFilter::new(query.list("stream_mode")),
        on_drop: run
            .as_ref()
            .and_then(|run| cancel_on_drop(engine, caller, run, cancel)),
    };
    Ok(sse_response(body, extra))
}
