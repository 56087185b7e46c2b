//! Run routes: create (background, stream, wait; on a thread or stateless), batch,
//! list, get, delete, cancel, join and join-stream.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use service_engine::bus::{Replay, Subscription};
use service_engine::{Engine, RunStream, RunTarget, RunToJoin, run_not_found};
use service_types::{BulkCancel, CancelAction, OnDisconnect, Run, RunCreate, RunStatus};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult, unprocessable};
use crate::extract::{JsonBody, Path, QueryParams, uuid};
use crate::json::{self, Json};
use crate::project;
use crate::routes::{MountPrefix, headers};
use crate::sse::{ModeFilter, OnDrop, SseBody, encode, sse_response, waiting_json_response};

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

pub(crate) fn routes() -> Router<Engine> {
    Router::new()
        .route(
            "/threads/{thread_id}/runs",
            post(create_on_thread).get(list),
        )
        .route("/threads/{thread_id}/runs/stream", post(stream_on_thread))
        .route("/threads/{thread_id}/runs/wait", post(wait_on_thread))
        .route(
            "/threads/{thread_id}/runs/{run_id}",
            get(read).delete(remove),
        )
        .route("/threads/{thread_id}/runs/{run_id}/cancel", post(cancel))
        .route("/threads/{thread_id}/runs/{run_id}/join", get(join))
        .route(
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(join_stream_on_thread),
        )
        .route("/runs", post(create_stateless))
        .route("/runs/stream", post(stream_stateless))
        .route("/runs/wait", post(wait_stateless))
        .route("/runs/batch", post(batch))
        .route("/runs/cancel", post(cancel_many))
        .route("/runs/{run_id}/stream", get(join_stream_stateless))
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
fn cancel_on_drop(engine: &Engine, run: &Run, cancel: bool) -> Option<OnDrop> {
    if !cancel {
        return None;
    }
    let engine = engine.clone();
    let (thread_id, run_id) = (run.thread_id, run.run_id);
    Some(OnDrop::new(move || {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                // Finished runs answer "not found": nothing left to cancel.
                let _ = engine
                    .cancel_run(thread_id, run_id, CancelAction::Interrupt)
                    .await;
            });
        }
    }))
}

async fn create(
    engine: &Engine,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let run = engine.create_run(target, body).await?;
    let location = run_path(prefix, &run, target == RunTarget::Stateless);
    Ok((headers(&[("content-location", location)]), Json(run)).into_response())
}

async fn create_on_thread(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    create(
        &engine,
        &prefix,
        RunTarget::Thread(uuid("thread", &thread_id)?),
        body,
    )
    .await
}

async fn create_stateless(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    create(&engine, &prefix, RunTarget::Stateless, body).await
}

async fn stream(
    engine: &Engine,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let resumable = body.stream_resumable.unwrap_or(false);
    let cancel = body.on_disconnect == Some(OnDisconnect::Cancel);
    let (run, subscription) = engine.create_run_watched(target, body).await?;
    let stateless = target == RunTarget::Stateless;
    let location = run_path(prefix, &run, stateless);
    let extra = headers(&[
        ("location", format!("{location}/stream")),
        ("content-location", location),
    ]);
    let body = SseBody {
        prelude: Vec::new(),
        subscription: Some(subscription),
        with_ids: resumable,
        filter: ModeFilter::default(),
        on_drop: cancel_on_drop(engine, &run, cancel),
    };
    Ok(sse_response(body, extra))
}

async fn stream_on_thread(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    stream(
        &engine,
        &prefix,
        RunTarget::Thread(uuid("thread", &thread_id)?),
        body,
    )
    .await
}

async fn stream_stateless(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    stream(&engine, &prefix, RunTarget::Stateless, body).await
}

/// A streamed JSON body carrying the run's wait/join result.
async fn result_response(
    engine: &Engine,
    prefix: &MountPrefix,
    run: &Run,
    subscription: Option<Subscription>,
    on_drop: Option<OnDrop>,
) -> Response {
    let path = thread_path(prefix, run);
    let extra = headers(&[
        ("location", format!("{path}/join")),
        ("content-location", path),
    ]);
    let engine = engine.clone();
    let run_id = run.run_id;
    let result = async move {
        let body = engine.run_result_from(run_id, subscription).await;
        Bytes::from(json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec()))
    };
    waiting_json_response(result, extra, on_drop).await
}

async fn wait(
    engine: &Engine,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let cancel = body.on_disconnect == Some(OnDisconnect::Cancel);
    let (run, subscription) = engine.create_run_watched(target, body).await?;
    let on_drop = cancel_on_drop(engine, &run, cancel);
    Ok(result_response(engine, prefix, &run, Some(subscription), on_drop).await)
}

async fn wait_on_thread(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    wait(
        &engine,
        &prefix,
        RunTarget::Thread(uuid("thread", &thread_id)?),
        body,
    )
    .await
}

async fn wait_stateless(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    wait(&engine, &prefix, RunTarget::Stateless, body).await
}

async fn batch(
    State(engine): State<Engine>,
    JsonBody(items): JsonBody<Vec<Value>>,
) -> ApiResult<Response> {
    // Every item is checked before any run is created, so a bad item creates nothing.
    let bodies = items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            serde_json::from_value::<RunCreate>(item)
                .map_err(|error| unprocessable(format!("Invalid run at index {index}: {error}")))
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let mut runs = Vec::with_capacity(bodies.len());
    for body in bodies {
        runs.push(engine.create_run(RunTarget::Stateless, body).await?);
    }
    Ok(Json(runs).into_response())
}

async fn list(
    State(engine): State<Engine>,
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
    let runs = engine
        .list_runs(thread_id, query.int("limit")?, query.int("offset")?, status)
        .await?;
    let items = project::select(&runs, &query.list("select"), &SELECTABLE)?;
    Ok(Json(items).into_response())
}

async fn read(
    State(engine): State<Engine>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let run = engine
        .get_run(Some(uuid("thread", &thread_id)?), uuid("run", &run_id)?)
        .await?;
    Ok(Json(run).into_response())
}

async fn remove(
    State(engine): State<Engine>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    engine
        .delete_run(uuid("thread", &thread_id)?, uuid("run", &run_id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn cancel(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    let run = engine
        .cancel_run(thread_id, run_id, cancel_action(&query))
        .await?;
    if query.bool("wait")?.unwrap_or(false) {
        return Ok(result_response(&engine, &prefix, &run, None, None).await);
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn cancel_many(
    State(engine): State<Engine>,
    query: QueryParams,
    JsonBody(body): JsonBody<BulkCancel>,
) -> ApiResult<StatusCode> {
    engine.cancel_runs(body, cancel_action(&query)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn join(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    let cancel = query.bool("cancel_on_disconnect")?.unwrap_or(false);
    match engine.run_to_join(Some(thread_id), run_id).await {
        RunToJoin::Run(run) => {
            let on_drop = cancel_on_drop(&engine, &run, cancel && !run.status.is_terminal());
            Ok(result_response(&engine, &prefix, &run, None, on_drop).await)
        }
        RunToJoin::Forgotten => Ok(Json(engine.run_result(run_id).await).into_response()),
        RunToJoin::Unknown => Ok(Json(json!({ "__error__": run_not_found() })).into_response()),
    }
}

async fn join_stream_on_thread(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    join_stream(
        &engine,
        &prefix,
        Some(thread_id),
        uuid("run", &run_id)?,
        &query,
        &request_headers,
    )
    .await
}

async fn join_stream_stateless(
    State(engine): State<Engine>,
    prefix: MountPrefix,
    Path(run_id): Path<String>,
    query: QueryParams,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    join_stream(
        &engine,
        &prefix,
        None,
        uuid("run", &run_id)?,
        &query,
        &request_headers,
    )
    .await
}

/// Joins a run's stream: replays after `Last-Event-ID` (`-1` from the start), then
/// live frames; without the header, live frames only. An unknown run gets one error
/// frame, as on the reference server.
async fn join_stream(
    engine: &Engine,
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
    }) = engine.join_run_stream(thread_id, run_id, replay).await
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
            .and_then(|run| cancel_on_drop(engine, run, cancel)),
    };
    Ok(sse_response(body, extra))
}
