//! What each route of the table reads and answers. Bodies are the wire types'
//! schemas; the few answers built in place (`{"ok": true}`, counts, `/info`) are
//! written here beside the route that builds them.

use axum::http::Method;
use serde_json::{Value, json};
use service_types::{
    Assistant, AssistantCreate, AssistantPatch, AssistantSearch, AssistantVersion,
    AssistantVersionsQuery, BulkCancel, CancelAction, Cron, CronCreate, CronPatch, CronSearch,
    Delivery, DeliveryStatus, EventStreamRequest, GraphSchema, HistoryQuery, Item, ProtocolCommand,
    ProtocolResponse, Run, RunCreate, RunStatus, SearchItem, SetLatest, StoreDelete,
    StoreListNamespaces, StorePut, StoreSearch, Thread, ThreadCreate, ThreadPatch, ThreadPrune,
    ThreadSearch, ThreadState, ThreadStateAtCheckpoint, ThreadStatePatch, ThreadStateUpdate,
};

use super::op::{Op, any, array, integer, json_content, object, op, string};
use super::{Operation, Schemas, reference};
use crate::error::ErrorBody;

/// Every operation of every route the table can serve.
pub(super) fn all(s: &mut Schemas) -> Vec<Operation> {
    use Method as M;
    let error = s.of::<ErrorBody>();
    let mut ops = Vec::new();
    ops.extend(meta(s));
    ops.extend(assistants(s));
    ops.extend(threads(s));
    ops.extend(runs(s));
    ops.extend(crons(s));
    ops.extend(store(s));
    let integrations = [
        op(
            M::POST,
            "/mcp",
            "mcp",
            "MCP endpoint (JSON-RPC 2.0, streamable HTTP)",
        )
        .body(s.named("JsonRpcRequest", json_rpc_request()), true)
        .ok(s.named("JsonRpcResponse", json_rpc_response()))
        .empty("202", "A notification, answered with nothing")
        .reply("default", "A JSON-RPC error", Some(json_content(any()))),
        op(
            M::POST,
            "/a2a/{assistant_id}",
            "a2a",
            "A2A endpoint (JSON-RPC 2.0)",
        )
        .body(s.named("JsonRpcRequest", json_rpc_request()), true)
        .reply(
            "200",
            "A JSON-RPC answer, or a stream of them for `message/stream`",
            Some(json!({
                "application/json": {"schema": reference("JsonRpcResponse")},
                "text/event-stream": {"schema": string()},
            })),
        )
        .empty("202", "A notification, answered with nothing")
        .reply("default", "A JSON-RPC error", Some(json_content(any()))),
        op(
            M::GET,
            "/a2a/{assistant_id}/.well-known/agent-card.json",
            "a2a",
            "The assistant's A2A agent card",
        )
        .ok(object()),
        op(
            M::GET,
            "/.well-known/agent-card.json",
            "a2a",
            "An A2A agent card (of `?assistant_id`, or the first assistant)",
        )
        .query("assistant_id", string(), "The assistant to describe.")
        .ok(object()),
        op(
            M::GET,
            "/channels",
            "channels",
            "The configured channel routes",
        )
        .ok(array(s.of::<service_channels::InventoryEntry>())),
        op(
            M::POST,
            "/channels/{route_name}",
            "channels",
            "An inbound provider event (signed by the provider)",
        )
        .body(object(), true)
        .ok(any())
        .reply(
            "default",
            "The provider check's answer",
            Some(json_content(any())),
        ),
        op(
            M::POST,
            "/ui/{assistant_id}",
            "ui",
            "The HTML that loads a graph's generative UI component (langgraph.json's `ui`)",
        )
        .body(
            s.named(
                "UiComponentRequest",
                json!({"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"},
                    "props": {},
                }}),
            ),
            true,
        )
        .reply(
            "200",
            "Script and stylesheet tags for the component",
            Some(json!({"text/html": {"schema": string()}})),
        ),
        op(
            M::GET,
            "/ui/{graph_id}/{file}",
            "ui",
            "A file of a graph's bundled UI components (public: a `<script src>` sends no credentials)",
        )
        .reply(
            "200",
            "The file",
            Some(json!({
                "text/javascript; charset=utf-8": {"schema": string()},
                "text/css; charset=utf-8": {"schema": string()},
                "application/octet-stream": {"schema": string()},
            })),
        ),
    ];
    ops.extend(integrations);
    ops.into_iter().map(|op| op.done(&error)).collect()
}

fn json_rpc_request() -> Value {
    json!({"type": "object", "required": ["jsonrpc", "method"], "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "method": {"type": "string"},
        "params": {},
    }})
}

fn json_rpc_response() -> Value {
    json!({"type": "object", "required": ["jsonrpc"], "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "result": {},
        "error": {"type": "object"},
    }})
}

fn meta(s: &mut Schemas) -> Vec<Op> {
    use Method as M;
    let ok = s.named(
        "Ok",
        json!({"type": "object", "required": ["ok"], "properties": {"ok": {"const": true}}}),
    );
    let info = s.named(
        "Info",
        json!({"type": "object", "required": ["version", "flags"], "properties": {
            "version": {"type": "string"},
            "langgraph_py_version": {"type": ["string", "null"]},
            "flags": {"type": "object", "additionalProperties": {"type": "boolean"}},
        }}),
    );
    vec![
        op(M::GET, "/", "meta", "Liveness").ok(ok.clone()),
        op(
            M::GET,
            "/ok",
            "meta",
            "Liveness, and the database with `check_db`",
        )
        .flag(
            "check_db",
            "Also make one round trip to the store (503 when it fails).",
        )
        .ok(ok),
        op(
            M::GET,
            "/info",
            "meta",
            "Server version and capability flags",
        )
        .ok(info),
        op(M::GET, super::OPENAPI_PATH, "meta", "This document").ok(object()),
        op(
            M::GET,
            super::DOCS_PATH,
            "meta",
            "A page that renders this document",
        )
        .reply(
            "200",
            "HTML",
            Some(json!({"text/html": {"schema": string()}})),
        ),
        op(
            M::GET,
            crate::metrics::METRICS_PATH,
            "meta",
            "Prometheus metrics",
        )
        .reply(
            "200",
            "The OpenMetrics text format",
            Some(json!({"application/openmetrics-text": {"schema": string()}})),
        ),
        op(
            M::POST,
            "/invoke/{graph_id}",
            "meta",
            "Run a graph once on an input, without a thread",
        )
        .body(any(), true)
        .ok(any()),
    ]
}

fn assistants(s: &mut Schemas) -> Vec<Op> {
    use Method as M;
    let assistant = s.of::<Assistant>();
    vec![
        op(M::POST, "/assistants", "assistants", "Create an assistant")
            .body(s.of::<AssistantCreate>(), true)
            .ok(assistant.clone()),
        op(
            M::POST,
            "/assistants/search",
            "assistants",
            "Search assistants",
        )
        .body(s.of::<AssistantSearch>(), false)
        .ok(array(s.selected::<Assistant>())),
        op(
            M::POST,
            "/assistants/count",
            "assistants",
            "Count assistants",
        )
        .body(s.of::<AssistantSearch>(), false)
        .ok(integer()),
        op(
            M::GET,
            "/assistants/{assistant_id}",
            "assistants",
            "Get an assistant",
        )
        .ok(assistant.clone()),
        op(
            M::PATCH,
            "/assistants/{assistant_id}",
            "assistants",
            "Update an assistant (a new version)",
        )
        .body(s.of::<AssistantPatch>(), false)
        .ok(assistant.clone()),
        op(
            M::DELETE,
            "/assistants/{assistant_id}",
            "assistants",
            "Delete an assistant",
        )
        .flag("delete_threads", "Also delete the threads it ran on.")
        .empty("204", "Deleted"),
        op(
            M::POST,
            "/assistants/{assistant_id}/versions",
            "assistants",
            "List an assistant's versions",
        )
        .body(s.of::<AssistantVersionsQuery>(), false)
        .ok(array(s.of::<AssistantVersion>())),
        op(
            M::POST,
            "/assistants/{assistant_id}/latest",
            "assistants",
            "Make a version current",
        )
        .body(s.of::<SetLatest>(), true)
        .ok(assistant),
        op(
            M::GET,
            "/assistants/{assistant_id}/graph",
            "assistants",
            "The assistant's graph",
        )
        .query(
            "xray",
            json!({"type": ["boolean", "integer"]}),
            "Subgraph levels to expand (`true` for all).",
        )
        .ok(object()),
        op(
            M::GET,
            "/assistants/{assistant_id}/subgraphs",
            "assistants",
            "The assistant's subgraphs' schemas",
        )
        .flag("recurse", "Include subgraphs of subgraphs.")
        .ok(json!({"type": "object", "additionalProperties": s.of::<GraphSchema>()})),
        op(
            M::GET,
            "/assistants/{assistant_id}/subgraphs/{namespace}",
            "assistants",
            "The schemas of the subgraphs under a namespace",
        )
        .flag("recurse", "Include subgraphs of subgraphs.")
        .ok(json!({"type": "object", "additionalProperties": s.of::<GraphSchema>()})),
        op(
            M::GET,
            "/assistants/{assistant_id}/schemas",
            "assistants",
            "The assistant's graph schemas",
        )
        .ok(s.of::<GraphSchema>()),
    ]
}

fn threads(s: &mut Schemas) -> Vec<Op> {
    use Method as M;
    let thread = s.of::<Thread>();
    let state = s.of::<ThreadState>();
    let checkpoint_answer = s.named(
        "ThreadStateUpdated",
        json!({"type": "object", "properties": {"checkpoint": {"type": "object"}},
            "description": "The checkpoint the update wrote."}),
    );
    let history = array(s.selected::<ThreadState>());
    let subgraphs = "Include the subgraphs' states in the tasks.";
    vec![
        op(M::POST, "/threads", "threads", "Create a thread")
            .body(s.of::<ThreadCreate>(), false)
            .ok(thread.clone()),
        op(M::POST, "/threads/search", "threads", "Search threads")
            .body(s.of::<ThreadSearch>(), false)
            .ok(array(s.selected::<Thread>())),
        op(M::POST, "/threads/count", "threads", "Count threads")
            .body(s.of::<ThreadSearch>(), false)
            .ok(integer()),
        op(
            M::POST,
            "/threads/prune",
            "threads",
            "Delete threads, or all but their latest checkpoint",
        )
        .body(s.of::<ThreadPrune>(), true)
        .ok(json!({"type": "object", "required": ["pruned_count"],
                "properties": {"pruned_count": {"type": "integer"}}})),
        op(M::GET, "/threads/{thread_id}", "threads", "Get a thread")
            .query(
                "include",
                string(),
                "`ttl` to include the thread's time to live.",
            )
            .ok(thread.clone()),
        op(
            M::PATCH,
            "/threads/{thread_id}",
            "threads",
            "Update a thread's metadata or ttl",
        )
        .body(s.of::<ThreadPatch>(), false)
        .ok(thread.clone())
        .empty("204", "Nothing to change"),
        op(
            M::DELETE,
            "/threads/{thread_id}",
            "threads",
            "Delete a thread and its runs",
        )
        .empty("204", "Deleted"),
        op(
            M::POST,
            "/threads/{thread_id}/copy",
            "threads",
            "Copy a thread with its checkpoints",
        )
        .ok(thread),
        op(
            M::GET,
            "/threads/{thread_id}/state",
            "threads",
            "The thread's current state",
        )
        .flag("subgraphs", subgraphs)
        .ok(state.clone()),
        op(
            M::POST,
            "/threads/{thread_id}/state",
            "threads",
            "Write the thread's state as a node",
        )
        .body(s.of::<ThreadStateUpdate>(), false)
        .ok(checkpoint_answer),
        op(
            M::PATCH,
            "/threads/{thread_id}/state",
            "threads",
            "Merge metadata into the latest checkpoint",
        )
        .body(s.of::<ThreadStatePatch>(), true)
        .empty("204", "Merged"),
        op(
            M::POST,
            "/threads/{thread_id}/state/checkpoint",
            "threads",
            "The thread's state at a checkpoint",
        )
        .body(s.of::<ThreadStateAtCheckpoint>(), true)
        .ok(state.clone()),
        op(
            M::GET,
            "/threads/{thread_id}/state/{checkpoint_id}",
            "threads",
            "The thread's state at a checkpoint",
        )
        .flag("subgraphs", subgraphs)
        .ok(state),
        op(
            M::GET,
            "/threads/{thread_id}/history",
            "threads",
            "The thread's checkpoints, newest first",
        )
        .query("limit", integer(), "At most this many.")
        .query(
            "before",
            string(),
            "Only checkpoints before this checkpoint id.",
        )
        .query(
            "select",
            string(),
            "Comma-separated fields to keep of each entry.",
        )
        .ok(history.clone()),
        op(
            M::POST,
            "/threads/{thread_id}/history",
            "threads",
            "The thread's checkpoints, newest first",
        )
        .body(s.of::<HistoryQuery>(), false)
        .ok(history),
        op(
            M::GET,
            "/threads/{thread_id}/stream",
            "threads",
            "Every run's frames on the thread, live",
        )
        .query(
            "stream_mode",
            string(),
            "`run_modes`, `lifecycle` or `state_update`.",
        )
        .header("last-event-id", "Resume after this event.")
        .stream("Server-sent events; the stream does not end by itself"),
        op(
            M::POST,
            "/threads/{thread_id}/commands",
            "protocol",
            "A protocol v2 command",
        )
        .body(s.of::<ProtocolCommand>(), true)
        .ok(s.of::<ProtocolResponse>())
        .reply(
            "400",
            "Not JSON (the error body), or JSON but not a command envelope (an error \
             answer)",
            Some(json_content(
                json!({"anyOf": [s.of::<ProtocolResponse>(), s.of::<ErrorBody>()]}),
            )),
        ),
        op(
            M::POST,
            "/threads/{thread_id}/stream/events",
            "protocol",
            "Protocol v2 events of the thread",
        )
        .body(s.of::<EventStreamRequest>(), false)
        .stream("Server-sent protocol events"),
        op(
            M::GET,
            "/threads/{thread_id}/stream/events",
            "protocol",
            "Protocol v2 over a WebSocket",
        )
        .empty("101", "Switching to the WebSocket protocol"),
    ]
}

fn runs(s: &mut Schemas) -> Vec<Op> {
    use Method as M;
    let run = s.of::<Run>();
    let create = s.of::<RunCreate>();
    let action = s.of::<CancelAction>();
    let wait = "The run's final values (or `{\"__error__\": …}` when it failed).";
    let resume = "Resume after this event id.";
    vec![
        op(
            M::GET,
            "/threads/{thread_id}/runs",
            "runs",
            "List the thread's runs",
        )
        .query("limit", integer(), "At most this many.")
        .query("offset", integer(), "Skip this many.")
        .query("status", s.of::<RunStatus>(), "Only runs in this status.")
        .query(
            "select",
            string(),
            "Comma-separated fields to keep of each run.",
        )
        .ok(array(s.selected::<Run>())),
        op(
            M::POST,
            "/threads/{thread_id}/runs",
            "runs",
            "Create a run on the thread",
        )
        .body(create.clone(), true)
        .ok(run.clone()),
        op(
            M::POST,
            "/threads/{thread_id}/runs/stream",
            "runs",
            "Create a run and stream it",
        )
        .body(create.clone(), true)
        .stream("Server-sent events of the run, ending with it"),
        op(
            M::POST,
            "/threads/{thread_id}/runs/wait",
            "runs",
            "Create a run and wait for it",
        )
        .body(create.clone(), true)
        .reply("200", wait, Some(json_content(any()))),
        op(
            M::GET,
            "/threads/{thread_id}/runs/{run_id}",
            "runs",
            "Get a run",
        )
        .ok(run.clone()),
        op(
            M::DELETE,
            "/threads/{thread_id}/runs/{run_id}",
            "runs",
            "Delete a finished run",
        )
        .empty("204", "Deleted"),
        op(
            M::POST,
            "/threads/{thread_id}/runs/{run_id}/cancel",
            "runs",
            "Cancel a run",
        )
        .flag("wait", "Answer when the run has settled, with its values.")
        .query(
            "action",
            action.clone(),
            "`interrupt` (default) or `rollback`.",
        )
        .empty("202", "Cancelling")
        .reply("200", wait, Some(json_content(any()))),
        op(
            M::GET,
            "/threads/{thread_id}/runs/{run_id}/join",
            "runs",
            "Wait for a run's result",
        )
        .flag(
            "cancel_on_disconnect",
            "Cancel the run if the client goes away.",
        )
        .reply("200", wait, Some(json_content(any()))),
        op(
            M::GET,
            "/threads/{thread_id}/runs/{run_id}/stream",
            "runs",
            "Join a run's stream",
        )
        .flag(
            "cancel_on_disconnect",
            "Cancel the run if the client goes away.",
        )
        .query("stream_mode", string(), "Only these modes' frames.")
        .header("last-event-id", resume)
        .stream("Server-sent events of the run, from the start or after Last-Event-ID"),
        op(
            M::GET,
            "/threads/{thread_id}/runs/{run_id}/deliveries",
            "runs",
            "The run's webhook deliveries",
        )
        .query(
            "status",
            s.of::<DeliveryStatus>(),
            "Only deliveries in this status.",
        )
        .query("limit", integer(), "At most this many.")
        .query("offset", integer(), "Skip this many.")
        .ok(array(s.of::<Delivery>())),
        op(
            M::POST,
            "/threads/{thread_id}/runs/{run_id}/deliveries/{delivery_id}/replay",
            "runs",
            "Send a webhook delivery again",
        )
        .ok(s.of::<Delivery>()),
        op(
            M::POST,
            "/runs",
            "runs",
            "Create a run (on a new thread unless one is named)",
        )
        .body(create.clone(), true)
        .ok(run.clone()),
        op(
            M::POST,
            "/runs/stream",
            "runs",
            "Create a run and stream it",
        )
        .body(create.clone(), true)
        .stream("Server-sent events of the run, ending with it"),
        op(
            M::POST,
            "/runs/wait",
            "runs",
            "Create a run and wait for it",
        )
        .body(create.clone(), true)
        .reply("200", wait, Some(json_content(any()))),
        op(M::POST, "/runs/batch", "runs", "Create several runs")
            .body(array(create), true)
            .ok(array(run)),
        op(
            M::POST,
            "/runs/cancel",
            "runs",
            "Cancel runs by id, thread or status",
        )
        .query("action", action, "`interrupt` (default) or `rollback`.")
        .body(s.of::<BulkCancel>(), true)
        .empty("204", "Cancelling"),
        op(
            M::GET,
            "/runs/{run_id}/stream",
            "runs",
            "Join a stateless run's stream",
        )
        .flag(
            "cancel_on_disconnect",
            "Cancel the run if the client goes away.",
        )
        .query("stream_mode", string(), "Only these modes' frames.")
        .header("last-event-id", resume)
        .stream("Server-sent events of the run"),
    ]
}

fn crons(s: &mut Schemas) -> Vec<Op> {
    use Method as M;
    let cron = s.of::<Cron>();
    let create = s.of::<CronCreate>();
    vec![
        op(
            M::POST,
            "/runs/crons",
            "crons",
            "Create a cron (a new thread per run)",
        )
        .body(create.clone(), true)
        .ok(cron.clone()),
        op(M::POST, "/runs/crons/search", "crons", "Search crons")
            .body(s.of::<CronSearch>(), false)
            .ok(array(s.selected::<Cron>())),
        op(M::POST, "/runs/crons/count", "crons", "Count crons")
            .body(s.of::<CronSearch>(), false)
            .ok(integer()),
        op(M::GET, "/runs/crons/{cron_id}", "crons", "Get a cron").ok(cron.clone()),
        op(M::PATCH, "/runs/crons/{cron_id}", "crons", "Update a cron")
            .body(s.of::<CronPatch>(), false)
            .ok(cron.clone()),
        op(M::DELETE, "/runs/crons/{cron_id}", "crons", "Delete a cron").empty("204", "Deleted"),
        op(
            M::POST,
            "/threads/{thread_id}/runs/crons",
            "crons",
            "Create a cron on a thread",
        )
        .body(create, true)
        .ok(cron),
    ]
}

fn store(s: &mut Schemas) -> Vec<Op> {
    use Method as M;
    let key_error = s.named(
        "StoreKeyError",
        json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}),
    );
    vec![
        op(M::PUT, "/store/items", "store", "Put an item")
            .body(s.of::<StorePut>(), true)
            .empty("204", "Stored"),
        op(
            M::GET,
            "/store/items",
            "store",
            "Get an item (null when absent)",
        )
        .query("key", string(), "The item's key (required).")
        .query("namespace", string(), "The namespace, `.`-separated.")
        .flag("refresh_ttl", "Restart the item's time to live.")
        .ok(json!({"oneOf": [s.of::<Item>(), {"type": "null"}]}))
        .reply("400", "No key", Some(json_content(key_error))),
        op(M::DELETE, "/store/items", "store", "Delete an item")
            .body(s.of::<StoreDelete>(), true)
            .empty("204", "Deleted"),
        op(M::POST, "/store/items/search", "store", "Search items")
            .body(s.of::<StoreSearch>(), false)
            .ok(json!({"type": "object", "required": ["items"],
                "properties": {"items": array(s.of::<SearchItem>())}})),
        op(M::POST, "/store/namespaces", "store", "List namespaces")
            .body(s.of::<StoreListNamespaces>(), false)
            .ok(json!({"type": "object", "required": ["namespaces"],
                "properties": {"namespaces": array(array(string()))}})),
    ]
}
