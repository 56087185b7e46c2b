//! `/threads` routes: CRUD, search, copy, prune, state, history, thread stream.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use service_engine::Engine;
use service_engine::auth::{Action, Resource};
use service_engine::bus::Replay;
use service_types::{
    Checkpoint, HistoryBefore, HistoryQuery, HistorySelect, PruneStrategy, Thread, ThreadCreate,
    ThreadPatch, ThreadPrune, ThreadSearch, ThreadStateAtCheckpoint, ThreadStatePatch,
    ThreadStateUpdate,
};

use crate::auth::CallerOf;
use crate::error::{ApiResult, unprocessable};
use crate::extract::{JsonBody, Path, QueryParams, uuid};
use crate::json::Json;
use crate::project;
use crate::routes::Table;
use crate::routes::headers;
use crate::sse::{ModeFilter, SseBody, sse_response};
use crate::streams::StreamSlot;

const SELECTABLE: [&str; 12] = [
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "config",
    "status",
    "values",
    "interrupts",
    "error",
    "context",
    "ttl",
];

pub(crate) fn routes() -> Table {
    use Action::{Create, Delete, Read, Search, Update};
    const T: Resource = Resource::Threads;
    Table::new()
        .post("/threads", (T, Create), create)
        .post("/threads/search", (T, Search), search)
        .post("/threads/count", (T, Search), count)
        .post("/threads/prune", (T, Delete), prune)
        .get("/threads/{thread_id}", (T, Read), read)
        .patch("/threads/{thread_id}", (T, Update), update)
        .delete("/threads/{thread_id}", (T, Delete), remove)
        .post("/threads/{thread_id}/copy", (T, Create), copy)
        .get("/threads/{thread_id}/state", (T, Read), state)
        .post("/threads/{thread_id}/state", (T, Update), update_state)
        .patch("/threads/{thread_id}/state", (T, Update), patch_state)
        .post(
            "/threads/{thread_id}/state/checkpoint",
            (T, Read),
            state_at_checkpoint_body,
        )
        .get(
            "/threads/{thread_id}/state/{checkpoint_id}",
            (T, Read),
            state_at_checkpoint,
        )
        .get("/threads/{thread_id}/history", (T, Read), history_get)
        .post("/threads/{thread_id}/history", (T, Read), history_post)
        .get("/threads/{thread_id}/stream", (T, Read), join_stream)
}

fn thread_id(text: &str) -> ApiResult<uuid::Uuid> {
    uuid("thread", text)
}

/// Thread JSON; the ttl only when asked for with `?include=ttl`.
fn thread_body(mut thread: Thread, include_ttl: bool) -> Response {
    if !include_ttl {
        thread.ttl = None;
    }
    Json(thread).into_response()
}

async fn create(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<ThreadCreate>,
) -> ApiResult<Response> {
    let thread = engine.as_caller(&caller).threads().create(body).await?;
    Ok(thread_body(thread, false))
}

async fn read(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let include_ttl = query.list("include").iter().any(|field| field == "ttl");
    let thread = engine
        .as_caller(&caller)
        .threads()
        .get(thread_id(&id)?)
        .await?;
    Ok(thread_body(thread, include_ttl))
}

async fn update(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    request_headers: HeaderMap,
    JsonBody(body): JsonBody<ThreadPatch>,
) -> ApiResult<Response> {
    let threads = engine.as_caller(&caller).threads();
    let thread = threads.update(thread_id(&id)?, body).await?;
    let minimal = request_headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.split(',').any(|part| part.trim() == "return=minimal"));
    if minimal {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(thread_body(thread, false))
}

async fn remove(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let threads = engine.as_caller(&caller).threads();
    threads.delete(thread_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn search(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<ThreadSearch>,
) -> ApiResult<Response> {
    let select = body.select.clone().unwrap_or_default();
    let extract = body.extract.clone();
    let page = engine.as_caller(&caller).threads().search(body).await?;
    let threads: Vec<Thread> = page
        .threads
        .into_iter()
        .map(|mut thread| {
            thread.ttl = None;
            thread
        })
        .collect();
    let mut items = project::select(&threads, &select, &SELECTABLE)?;
    if let Some(paths) = extract {
        project::extract(&mut items, &paths)?;
    }
    let mut pairs = Vec::new();
    if let Some(next) = page.next_offset {
        pairs.push(("x-pagination-next", next.to_string()));
    }
    Ok((headers(&pairs), Json(items)).into_response())
}

async fn count(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<ThreadSearch>,
) -> ApiResult<Json<u64>> {
    Ok(Json(engine.as_caller(&caller).threads().count(body).await?))
}

async fn copy(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let copy = engine.as_caller(&caller).threads().copy(thread_id(&id)?);
    Ok(thread_body(copy.await?, false))
}

async fn prune(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    JsonBody(body): JsonBody<ThreadPrune>,
) -> ApiResult<Response> {
    let strategy = body.strategy.unwrap_or(PruneStrategy::Delete);
    let threads = engine.as_caller(&caller).threads();
    let pruned = threads.prune(body.thread_ids, strategy).await?;
    Ok(Json(json!({ "pruned_count": pruned })).into_response())
}

async fn state(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let subgraphs = query.bool("subgraphs")?.unwrap_or(false);
    let threads = engine.as_caller(&caller).threads();
    Ok(Json(threads.state(thread_id(&id)?, None, subgraphs).await?).into_response())
}

async fn state_at_checkpoint(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path((id, checkpoint_id)): Path<(String, String)>,
    query: QueryParams,
) -> ApiResult<Response> {
    let subgraphs = query.bool("subgraphs")?.unwrap_or(false);
    let checkpoint = Checkpoint {
        checkpoint_id: Some(checkpoint_id),
        ..Checkpoint::default()
    };
    let threads = engine.as_caller(&caller).threads();
    let state = threads.state(thread_id(&id)?, Some(checkpoint), subgraphs);
    Ok(Json(state.await?).into_response())
}

async fn state_at_checkpoint_body(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ThreadStateAtCheckpoint>,
) -> ApiResult<Response> {
    let subgraphs = body.subgraphs.unwrap_or(false);
    let threads = engine.as_caller(&caller).threads();
    let state = threads.state(thread_id(&id)?, Some(body.checkpoint), subgraphs);
    Ok(Json(state.await?).into_response())
}

async fn update_state(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ThreadStateUpdate>,
) -> ApiResult<Response> {
    let threads = engine.as_caller(&caller).threads();
    Ok(Json(threads.update_state(thread_id(&id)?, body).await?).into_response())
}

async fn patch_state(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ThreadStatePatch>,
) -> ApiResult<StatusCode> {
    let threads = engine.as_caller(&caller).threads();
    threads.patch_state(thread_id(&id)?, body.metadata).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn history_post(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<HistoryQuery>,
) -> ApiResult<Response> {
    history(engine, caller, &id, body).await
}

/// The history, with only the `select`ed fields of each entry when it names any.
async fn history(
    engine: Engine,
    caller: service_engine::auth::Caller,
    id: &str,
    mut query: HistoryQuery,
) -> ApiResult<Response> {
    let select = match query.select.take().filter(|fields| !fields.is_empty()) {
        Some(fields) => Some(HistorySelect::new(fields).map_err(unprocessable)?),
        None => None,
    };
    let threads = engine.as_caller(&caller).threads();
    let states = threads.history(thread_id(id)?, query).await?;
    Ok(match select {
        Some(select) => Json(
            states
                .iter()
                .map(|state| select.project(state))
                .collect::<Vec<_>>(),
        )
        .into_response(),
        None => Json(states).into_response(),
    })
}

async fn history_get(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let body = HistoryQuery {
        limit: query.int("limit")?,
        before: query
            .get("before")
            .map(|id| HistoryBefore::Id(id.to_owned())),
        select: Some(query.list("select")),
        ..HistoryQuery::default()
    };
    history(engine, caller, &id, body).await
}

/// `GET /threads/{id}/stream`: every frame of every run on the thread, run-done
/// markers and state updates; never ends by itself. Modes: `run_modes` (default),
/// `lifecycle`, `state_update` (query `stream_mode` or `stream_modes`).
async fn join_stream(
    State(engine): State<Engine>,
    CallerOf(caller): CallerOf,
    Path(id): Path<String>,
    query: QueryParams,
    slot: StreamSlot,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    let thread_id = thread_id(&id)?;
    let mut modes = query.list("stream_mode");
    modes.extend(query.list("stream_modes"));
    let mut events = Vec::new();
    for mode in &modes {
        match mode.as_str() {
            "run_modes" => events.clear(),
            "lifecycle" => events.push("metadata".to_owned()),
            "state_update" => events.push("state_update".to_owned()),
            other => {
                return Err(unprocessable(format!(
                    "Invalid thread stream mode: '{other}'"
                )));
            }
        }
    }
    if modes.iter().any(|mode| mode == "run_modes") {
        events.clear();
    }
    let last_event_id = request_headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok());
    let replay = Replay::from_last_event_id(last_event_id)
        .ok_or_else(|| unprocessable("Invalid last-event-id"))?;
    let threads = engine.as_caller(&caller).threads();
    let subscription = threads.join_stream(thread_id, replay).await?;
    let body = SseBody {
        prelude: Vec::new(),
        subscription,
        with_ids: true,
        filter: ModeFilter::new(events),
        on_drop: None,
    };
    Ok(slot.held_by(sse_response(body, HeaderMap::new())))
}
