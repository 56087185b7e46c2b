//! Run routes: create (background, stream, wait; on a thread or stateless), batch,
//! list, get, delete, cancel, join and join-stream.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use service_engine::auth::Scope;
use service_engine::auth::{Action, Resource};
use service_engine::bus::{Replay, Subscription};
use service_engine::{Engine, RunStream, RunTarget, RunToJoin, run_not_found};
use service_types::{BulkCancel, CancelAction, OnDisconnect, Run, RunCreate, RunStatus};
use uuid::Uuid;

use crate::auth::{Asker, Scoped};
use crate::error::{ApiError, ApiResult, unprocessable};
use crate::extract::{JsonBody, Path, QueryParams, uuid};
use crate::json::{self, Json};
use crate::project;
use crate::routes::Table;
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

/// The caller's view of a run creation: the scope it runs within, and the check that
/// the run's assistant is readable by the caller.
struct Creator {
    scope: Scope,
    asker: Asker,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Creator {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        let Scoped(scope) = Scoped::from_request_parts(parts, state).await?;
        let Ok(asker) = Asker::from_request_parts(parts, state).await;
        Ok(Self { scope, asker })
    }
}

impl Creator {
    async fn create(&self, engine: &Engine, target: RunTarget, body: RunCreate) -> ApiResult<Run> {
        self.asker
            .assistant_readable(engine, &body.assistant_id)
            .await?;
        Ok(engine.create_run_within(target, body, &self.scope).await?)
    }

    async fn create_watched(
        &self,
        engine: &Engine,
        target: RunTarget,
        body: RunCreate,
    ) -> ApiResult<(Run, Subscription)> {
        self.asker
            .assistant_readable(engine, &body.assistant_id)
            .await?;
        Ok(engine
            .create_run_watched_within(target, body, &self.scope)
            .await?)
    }
}

async fn create(
    engine: &Engine,
    creator: &Creator,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let run = creator.create(engine, target, body).await?;
    let location = run_path(prefix, &run, target == RunTarget::Stateless);
    Ok((headers(&[("content-location", location)]), Json(run)).into_response())
}

async fn create_on_thread(
    State(engine): State<Engine>,
    creator: Creator,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    create(
        &engine,
        &creator,
        &prefix,
        RunTarget::Thread(uuid("thread", &thread_id)?),
        body,
    )
    .await
}

async fn create_stateless(
    State(engine): State<Engine>,
    creator: Creator,
    prefix: MountPrefix,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    create(&engine, &creator, &prefix, RunTarget::Stateless, body).await
}

async fn stream(
    engine: &Engine,
    creator: &Creator,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let resumable = body.stream_resumable.unwrap_or(false);
    let cancel = body.on_disconnect == Some(OnDisconnect::Cancel);
    let (run, subscription) = creator.create_watched(engine, target, body).await?;
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
    creator: Creator,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    stream(
        &engine,
        &creator,
        &prefix,
        RunTarget::Thread(uuid("thread", &thread_id)?),
        body,
    )
    .await
}

async fn stream_stateless(
    State(engine): State<Engine>,
    creator: Creator,
    prefix: MountPrefix,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    stream(&engine, &creator, &prefix, RunTarget::Stateless, body).await
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
    creator: &Creator,
    prefix: &MountPrefix,
    target: RunTarget,
    body: RunCreate,
) -> ApiResult<Response> {
    let cancel = body.on_disconnect == Some(OnDisconnect::Cancel);
    let (run, subscription) = creator.create_watched(engine, target, body).await?;
    let on_drop = cancel_on_drop(engine, &run, cancel);
    Ok(result_response(engine, prefix, &run, Some(subscription), on_drop).await)
}

async fn wait_on_thread(
    State(engine): State<Engine>,
    creator: Creator,
    prefix: MountPrefix,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    wait(
        &engine,
        &creator,
        &prefix,
        RunTarget::Thread(uuid("thread", &thread_id)?),
        body,
    )
    .await
}

async fn wait_stateless(
    State(engine): State<Engine>,
    creator: Creator,
    prefix: MountPrefix,
    JsonBody(body): JsonBody<RunCreate>,
) -> ApiResult<Response> {
    wait(&engine, &creator, &prefix, RunTarget::Stateless, body).await
}

async fn batch(
    State(engine): State<Engine>,
    creator: Creator,
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
        runs.push(creator.create(&engine, RunTarget::Stateless, body).await?);
    }
    Ok(Json(runs).into_response())
}

async fn list(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    Path(thread_id): Path<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    engine.thread_within(thread_id, &scope).await?;
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
    Scoped(scope): Scoped,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    engine.thread_within(thread_id, &scope).await?;
    let run = engine
        .get_run(Some(thread_id), uuid("run", &run_id)?)
        .await?;
    Ok(Json(run).into_response())
}

async fn remove(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let thread_id = uuid("thread", &thread_id)?;
    engine.thread_within(thread_id, &scope).await?;
    engine.delete_run(thread_id, uuid("run", &run_id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn cancel(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    engine.thread_within(thread_id, &scope).await?;
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
    Scoped(scope): Scoped,
    query: QueryParams,
    JsonBody(body): JsonBody<BulkCancel>,
) -> ApiResult<StatusCode> {
    engine
        .cancel_runs(body, cancel_action(&query), &scope)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn join(
    State(engine): State<Engine>,
    Scoped(scope): Scoped,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let (thread_id, run_id) = (uuid("thread", &thread_id)?, uuid("run", &run_id)?);
    engine.thread_within(thread_id, &scope).await?;
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
    Scoped(scope): Scoped,
    prefix: MountPrefix,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: QueryParams,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    let thread_id = uuid("thread", &thread_id)?;
    engine.thread_within(thread_id, &scope).await?;
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
    Scoped(scope): Scoped,
    prefix: MountPrefix,
    Path(run_id): Path<String>,
    query: QueryParams,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    let run_id = uuid("run", &run_id)?;
    engine.run_within(run_id, &scope).await?;
    join_stream(&engine, &prefix, None, run_id, &query, &request_headers).await
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
