"""JS graphs through the Node bridge, on a server of their own started from
e2e/js-graphs/langgraph.json, which mixes them with a Python graph and a Rust one:
LangGraph.js's prebuilt ReAct agent with a scripted chat model (token streaming, tool
calls, an interrupt inside a tool, a failing model), a subgraph, a graph factory with
the config's `env`, and a worker killed mid-run.

These start their own server, so they run once, in the pass over the built-in graphs.
The server runs in e2e/js-graphs itself: the workers load @langchain/langgraph and tsx
from its node_modules (scripts/test installs them from its lock file).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command

from conftest import GRAPHS, SERVER_BIN, SERVER_MODE, ServerUrl, _wait_listening, collect, eventually
from test_python_graphs import own_database, workers_of

pytestmark = pytest.mark.skipif(
    GRAPHS != "rust", reason="starts a server of its own: runs once, in the built-in graphs' pass"
)

CONFIG = Path(__file__).resolve().parent.parent / "js-graphs" / "langgraph.json"


@pytest.fixture(scope="module")
def server():
    if not SERVER_BIN:
        pytest.skip("needs a server of its own: set E2E_SERVER_BIN")
    if not (CONFIG.parent / "node_modules" / "@langchain" / "langgraph").is_dir():
        pytest.fail("run `npm ci` in e2e/js-graphs first (scripts/test does)")
    # Two Node workers (a killed one must not take the other's runs down), one Python.
    env = {
        **os.environ,
        "SERVICE_NODE_WORKERS": "2",
        "SERVICE_PYTHON_WORKERS": "1",
        **own_database("js_graphs"),
    }
    with tempfile.TemporaryDirectory(prefix="e2e-js-graphs-") as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [SERVER_BIN, SERVER_MODE, "--port", "0", "--config", str(CONFIG)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        try:
            yield ServerUrl(_wait_listening(proc, log_path, timeout=60), proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
async def graphs(server):
    client = get_client(url=server)
    yield client
    await client.http.client.aclose()


def human(text: str) -> dict:
    return {"messages": [{"type": "human", "content": text}]}


async def test_the_agent_streams_its_answer_token_by_token_as_messages_tuples(graphs):
    thread = await graphs.threads.create()
    parts = await collect(
        graphs.runs.stream(thread["thread_id"], "agent", input=human("weather in Paris"), stream_mode="messages-tuple")
    )
    messages = [p.data for p in parts if p.event == "messages"]
    tokens = [m for m, meta in messages if m["type"] == "AIMessageChunk" and meta.get("langgraph_node") == "agent"]
    # The answer after the tool came as several token chunks.
    answer = [m["content"] for m in tokens if m["content"]]
    assert len(answer) == 4 and "".join(answer) == "Done: sunny in Paris", answer
    # The tool call was streamed too, then the tool's own message.
    assert any(c["name"] == "weather" for m in tokens for c in m.get("tool_call_chunks", []))
    assert any(m["type"] == "tool" and m["content"] == "sunny in Paris" for m, _ in messages)
    state = await graphs.threads.get_state(thread["thread_id"])
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["values"]["messages"][1]["tool_calls"][0]["args"] == {"city": "Paris"}


async def test_an_interrupt_inside_a_tool_is_resumed_with_a_command(graphs):
    thread = await graphs.threads.create()
    tid = thread["thread_id"]
    await graphs.runs.wait(tid, "agent", input=human("book Rome"))
    paused = await graphs.threads.get(tid)
    assert paused["status"] == "interrupted"
    state = await graphs.threads.get_state(tid)
    assert state["next"] == ["tools"]
    [pending] = state["interrupts"]
    assert pending["value"] == {"confirm": "book a trip to Rome?"}
    result = await graphs.runs.wait(tid, "agent", command=Command(resume=True))
    assert result["messages"][-1]["content"] == "Done: booked Rome"
    assert (await graphs.threads.get(tid))["status"] == "idle"
    history = await graphs.threads.get_history(tid, limit=100)
    assert len(history) >= 5 and history[0]["values"] == (await graphs.threads.get_state(tid))["values"]


async def test_a_run_whose_model_throws_fails_with_the_js_error_and_its_stack(graphs):
    thread = await graphs.threads.create()
    parts = await collect(graphs.runs.stream(thread["thread_id"], "agent", input=human("explode")))
    assert parts[-1].event == "error"
    assert parts[-1].data["error"] == "Error"
    assert parts[-1].data["message"] == "the model exploded"
    [run] = await graphs.runs.list(thread["thread_id"])
    assert run["status"] == "error"


async def test_a_subgraphs_events_state_and_interrupt(graphs):
    thread = await graphs.threads.create()
    tid = thread["thread_id"]
    parts = await collect(
        graphs.runs.stream(tid, "nested", input={"topic": "cats"}, stream_mode=["updates"], stream_subgraphs=True)
    )
    inner = [p for p in parts if p.event.startswith("updates|review:")]
    assert inner and inner[0].data == {"drafting": {"draft": "draft for cats"}}
    state = await graphs.threads.get_state(tid, subgraphs=True)
    assert state["next"] == ["review"]
    [task] = state["tasks"]
    assert task["state"]["values"]["draft"] == "draft for cats"
    assert task["state"]["next"] == ["review"]
    [pending] = state["interrupts"]
    assert pending["value"]["question"] == "approve?"
    result = await graphs.runs.wait(tid, "nested", command=Command(resume=True))
    assert result["log"] == ["plan", "publish approved"]
    assistant = (await graphs.assistants.search(graph_id="nested"))[0]
    subgraphs = await graphs.assistants.get_subgraphs(assistant["assistant_id"])
    assert list(subgraphs) == ["review"]
    drawing = await graphs.assistants.get_graph(assistant["assistant_id"], xray=1)
    assert {"review:drafting", "review:review"} <= {node["id"] for node in drawing["nodes"]}


async def test_a_factory_graph_reads_the_runs_config_and_the_config_env(graphs):
    assistant = await graphs.assistants.create("made", config={"configurable": {"who": "ada"}})
    result = await graphs.runs.wait(None, assistant["assistant_id"], input={})
    assert result["greeting"] == "hello from env: hello ada"


async def test_the_context_reaches_the_graph_and_zod_schemas_are_served(graphs):
    assistant = await graphs.assistants.create("welcomer", context={"name": "grace"})
    result = await graphs.runs.wait(None, assistant["assistant_id"], input={})
    assert result["greeting"] == "hi grace"
    schemas = await graphs.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["context_schema"]["properties"]["name"]["default"] == "nobody"
    assert "greeting" in schemas["state_schema"]["properties"]
    # Without a context, the schema's defaults apply.
    plain = await graphs.runs.wait(None, "welcomer", input={})
    assert plain["greeting"] == "hi nobody"


async def test_python_and_rust_graphs_serve_beside_the_js_ones(graphs):
    assistant = await graphs.assistants.create("greeter", context={"name": "grace"})
    result = await graphs.runs.wait(None, assistant["assistant_id"], input={})
    assert result["greeting"] == "hi grace"
    result = await graphs.runs.wait(None, "echo", input=human("hi"))
    assert result["messages"][-1]["content"] == "echo: hi"
    ids = {a["graph_id"] for a in await graphs.assistants.search(limit=100)}
    assert {"agent", "made", "sleepy", "greeter", "echo"} <= ids


def node_workers_of(pid: int) -> list[int]:
    """The server's Node workers (its Python one left out)."""
    return [child for child in workers_of(pid) if "node" in Path(f"/proc/{child}/comm").read_text()]


async def test_a_node_worker_killed_mid_run_fails_that_run_only_and_the_server_keeps_serving(server, graphs):
    thread = await graphs.threads.create()
    tid = thread["thread_id"]
    run = await graphs.runs.create(tid, "sleepy", input={"seconds": 60})
    await eventually(lambda: graphs.runs.get(tid, run["run_id"]), lambda r: r["status"] == "running")
    before = node_workers_of(server.pid)
    assert len(before) == 2, before
    # The run's worker is the one the sleep is in; kill each until the run fails.
    for pid in before:
        os.kill(pid, signal.SIGKILL)
        try:
            done = await eventually(
                lambda: graphs.runs.get(tid, run["run_id"]), lambda r: r["status"] != "running", timeout=3
            )
            break
        except AssertionError:
            continue  # that worker was not running it
    assert done["status"] == "error"
    assert done["error"]["error"] == "WorkerExited"
    assert "Node worker" in done["error"]["message"]
    # New workers take over; the next run on the same thread succeeds.
    result = await eventually(
        lambda: graphs.runs.wait(tid, "sleepy", input={"seconds": 0}, raise_error=False),
        lambda r: r.get("woke") is True,
        timeout=30,
        interval=0.5,
    )
    assert result["woke"] is True
    assert len(node_workers_of(server.pid)) == 2
