"""Python graphs through the bridge, on a server of their own started from
e2e/python-graphs/langgraph.json: LangGraph's prebuilt ReAct agent with a scripted chat
model (token streaming, tool calls, an interrupt inside a tool, a failing model), a
subgraph, a graph factory, the config's `env`, a Rust graph beside them, and a worker
killed mid-run.

These start their own server, so they run once, in the pass over the built-in graphs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command

from conftest import GRAPHS, SERVER_MODE, collect, collect_until, eventually, own_server

pytestmark = pytest.mark.skipif(
    GRAPHS != "rust", reason="starts a server of its own: runs once, in the built-in graphs' pass"
)

GRAPHS_DIR = Path(__file__).resolve().parent.parent / "python-graphs"


def own_database(suffix: str = "python_graphs") -> dict[str, str]:
    """In start mode, a database of its own: instances sharing one execute each
    other's runs, and the suite's main server has none of these graphs."""
    url = os.environ.get("DATABASE_URL")
    if SERVER_MODE != "start" or not url:
        return {}
    server_url, _, name = url.rpartition("/")
    own = f"{name}_{suffix}"
    subprocess.run(
        ["psql", f"{server_url}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{own}" WITH (FORCE)', "-c", f'CREATE DATABASE "{own}"'],
        check=True,
    )
    return {"DATABASE_URL": f"{server_url}/{own}"}


@pytest.fixture(scope="module")
def server():
    config = json.loads((GRAPHS_DIR / "langgraph.json").read_text())
    files = {"agent.py": (GRAPHS_DIR / "agent.py").read_bytes()}
    # Two workers: a killed one must not take the other's runs down.
    env = {"SERVICE_PYTHON_WORKERS": "2", **own_database()}
    with own_server(config, env=env, files=files) as url:
        yield url


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


async def test_the_tools_stream_mode_reports_the_agents_tool_call(graphs):
    thread = await graphs.threads.create()
    parts = await collect(
        graphs.runs.stream(thread["thread_id"], "agent", input=human("weather in Paris"), stream_mode=["tools"])
    )
    tools = [p.data for p in parts if p.event == "tools"]
    assert [t["event"] for t in tools] == ["tool-started", "tool-finished"], tools
    assert tools[0]["tool_call_id"] == tools[1]["tool_call_id"] == "call-weather-Paris"
    assert (tools[0]["tool_name"], tools[0]["input"]) == ("weather", {"city": "Paris"})
    assert "sunny in Paris" in json.dumps(tools[1]["output"])
    assert {p.event for p in parts} == {"metadata", "tools"}, "only the modes asked for"


async def test_protocol_v2_runs_carry_the_tools_channel(graphs):
    tid = (await graphs.threads.create())["thread_id"]
    start = {"id": 1, "method": "run.start",
             "params": {"assistant_id": "agent", "input": human("weather in Paris")}}
    answer = await graphs.http.post(f"/threads/{tid}/commands", json=start)
    assert answer["type"] == "success", answer

    def root_end(part) -> bool:
        data = part.data
        return (data["method"] == "lifecycle" and data["params"]["namespace"] == []
                and data["params"]["data"]["event"] in ("completed", "failed"))

    stream = graphs.http.stream(f"/threads/{tid}/stream/events", "POST", json={"channels": ["tools", "lifecycle"]})
    parts = await collect_until(stream, root_end)
    assert parts[-1].data["params"]["data"]["event"] == "completed"
    tools = [p.data["params"]["data"] for p in parts if p.event == "tools"]
    assert [t["event"] for t in tools] == ["tool-started", "tool-finished"], tools
    assert (tools[0]["tool_call_id"], tools[0]["tool_name"]) == ("call-weather-Paris", "weather")


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


async def test_a_run_whose_model_raises_fails_with_the_python_error(graphs):
    thread = await graphs.threads.create()
    parts = await collect(graphs.runs.stream(thread["thread_id"], "agent", input=human("explode")))
    assert parts[-1].event == "error"
    assert parts[-1].data["error"] == "ValueError"
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
    assert inner and inner[0].data == {"draft": {"draft": "draft for cats"}}
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
    assert {"review:draft", "review:review"} <= {node["id"] for node in drawing["nodes"]}


async def test_a_factory_graph_reads_the_runs_config_and_the_config_env(graphs):
    assistant = await graphs.assistants.create("made", config={"configurable": {"who": "ada"}})
    result = await graphs.runs.wait(None, assistant["assistant_id"], input={})
    assert result["greeting"] == "hello from env: hello ada"


async def test_the_assistants_context_reaches_the_graphs_runtime(graphs):
    assistant = await graphs.assistants.create("greeter", context={"name": "grace"})
    result = await graphs.runs.wait(None, assistant["assistant_id"], input={})
    assert result["greeting"] == "hi grace"
    schemas = await graphs.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["context_schema"]["properties"]["name"]["default"] == "nobody"
    # Without a context, the schema's defaults apply.
    plain = await graphs.runs.wait(None, "greeter", input={})
    assert plain["greeting"] == "hi nobody"


async def test_schemas_come_from_the_python_graph_and_a_rust_graph_serves_beside_it(graphs):
    agent = (await graphs.assistants.search(graph_id="agent"))[0]
    schemas = await graphs.assistants.get_schemas(agent["assistant_id"])
    assert "messages" in json.dumps(schemas["input_schema"])
    assert "messages" in json.dumps(schemas["state_schema"])
    result = await graphs.runs.wait(None, "echo", input=human("hi"))
    assert result["messages"][-1]["content"] == "echo: hi"


def workers_of(pid: int) -> list[int]:
    """Process ids whose parent is `pid` (the server's Python workers)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                children.append(int(entry.name))
    return children


async def test_a_worker_killed_mid_run_fails_that_run_only_and_the_server_keeps_serving(server, graphs):
    thread = await graphs.threads.create()
    tid = thread["thread_id"]
    run = await graphs.runs.create(tid, "sleepy", input={"seconds": 60})
    await eventually(lambda: graphs.runs.get(tid, run["run_id"]), lambda r: r["status"] == "running")
    before = workers_of(server.pid)
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
    assert "exited" in done["error"]["message"]
    # New workers take over; the next run on the same thread succeeds.
    result = await eventually(
        lambda: graphs.runs.wait(tid, "sleepy", input={"seconds": 0}, raise_error=False),
        lambda r: r.get("woke") is True,
        timeout=30,
        interval=0.5,
    )
    assert result["woke"] is True
    assert len(workers_of(server.pid)) == 2


def test_the_workers_stop_when_the_server_is_killed():
    """Killed with SIGKILL (no chance to stop them), the server leaves no workers
    behind: each exits once its stdin closes, even with a run in flight."""
    config = json.loads((GRAPHS_DIR / "langgraph.json").read_text())
    files = {"agent.py": (GRAPHS_DIR / "agent.py").read_bytes()}
    env = {"SERVICE_PYTHON_WORKERS": "2", **own_database("python_graphs_killed")}
    with own_server(config, env=env, files=files) as url:
        workers = workers_of(url.pid)
        assert len(workers) == 2, workers
        run = httpx.post(f"{url}/runs", json={"assistant_id": "sleepy", "input": {"seconds": 60}}).json()
        deadline = time.monotonic() + 20
        run_path = f"{url}/threads/{run['thread_id']}/runs/{run['run_id']}"
        while httpx.get(run_path).json().get("status") != "running":
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        os.kill(url.pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while any(Path(f"/proc/{pid}").exists() and not _zombie(pid) for pid in workers):
            assert time.monotonic() < deadline, f"workers still running: {workers}"
            time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
