"""A2A at /a2a/{assistant_id} with the official A2A Python SDK (`a2a-sdk` 1.x) as a
real client.

The client fetches an agent's card, picks the card's 1.0 JSON-RPC interface and
speaks the 1.0 method names (`SendMessage`, `SendStreamingMessage`, `GetTask`,
`CancelTask`); given a card whose only interface is 0.3 it speaks the 0.3 names
(`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`) through its compat
transport, so both versions are driven by the same client. Raw JSON-RPC checks the
0.3 wire shapes themselves. A context is a thread, each message a run and a task.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_message, new_text_message
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from conftest import BASE_URL, eventually, marker, own_server

VERSIONS = ["1.0", "0.3"]


async def card_of(http: httpx.AsyncClient, assistant: str, base: str = BASE_URL) -> AgentCard:
    return await A2ACardResolver(http, f"{base}/a2a/{assistant}").get_agent_card()


async def agent(
    http: httpx.AsyncClient, assistant: str, version: str, streaming: bool = False, base: str = BASE_URL
) -> Client:
    """A client of `assistant` speaking `version`: the card as served, or with only its
    0.3 interface left."""
    card = await card_of(http, assistant, base)
    kept = [i for i in card.supported_interfaces if i.protocol_version.startswith(version)]
    assert kept, f"the card offers no {version} interface: {card.supported_interfaces}"
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(kept)
    return ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)


def text(text_: str, context_id: str | None = None, task_id: str | None = None):
    return new_text_message(text_, context_id=context_id, task_id=task_id, role=Role.ROLE_USER)


def data(value: dict, context_id: str | None = None):
    return new_data_message(value, context_id=context_id, role=Role.ROLE_USER)


async def send(client: Client, message, return_immediately: bool = False) -> Task:
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=return_immediately)
    )
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


async def stream(client: Client, message) -> list[StreamResponse]:
    async def read():
        return [event async for event in client.send_message(SendMessageRequest(message=message))]

    return await asyncio.wait_for(read(), 30)


def answer(task: Task) -> str:
    return "".join(get_text_parts(task.artifacts[-1].parts))


def history_texts(task: Task) -> list[tuple[int, str]]:
    return [(m.role, "".join(get_text_parts(m.parts))) for m in task.history]


async def test_the_card_names_the_assistant_and_offers_json_rpc_1_0_and_0_3():
    async with httpx.AsyncClient() as http:
        card = await card_of(http, "echo")
        assistant = (await http.get(f"{BASE_URL}/assistants/echo")).json()
        root = await http.get(f"{BASE_URL}/.well-known/agent-card.json", params={"assistant_id": "echo"})
    assert card.name == "echo"
    assert card.capabilities.streaming
    versions = {(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
    assert versions == {("JSONRPC", "1.0"), ("JSONRPC", "0.3.0")}, versions
    for interface in card.supported_interfaces:
        assert interface.url == f"{BASE_URL}/a2a/{assistant['assistant_id']}"
    assert root.status_code == 200 and root.json()["name"] == "echo"


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_message_to_echo_is_a_completed_task_with_its_answer(version):
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "echo", version)
        task = await send(client, text("hello"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(task) == "echo: hello"
    assert history_texts(task) == [(Role.ROLE_USER, "hello"), (Role.ROLE_AGENT, "echo: hello")]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_client_chosen_context_becomes_a_thread_and_history_covers_the_conversation(version):
    context = str(uuid.uuid4())
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "echo", version)
        first = await send(client, text("one", context_id=context))
        second = await send(client, text("two", context_id=context))
        thread = await http.get(f"{BASE_URL}/threads/{context}")
        runs = (await http.get(f"{BASE_URL}/threads/{context}/runs")).json()
    assert thread.status_code == 200
    assert first.context_id == second.context_id == context
    assert first.id != second.id, "each message is a task of its own"
    assert {first.id, second.id} == {f"{context}:{run['run_id']}" for run in runs}
    assert [t for _, t in history_texts(second)] == ["one", "echo: one", "two", "echo: two"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_streaming_steps_sends_the_task_then_wrapped_updates_and_ends_completed(version):
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "steps", version, streaming=True)
        events = await stream(client, data({"n": 2}))
    assert events[0].HasField("task"), events[0]
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    rest = events[1:]
    # Every event after the first is a status or artifact update (1.x wraps them).
    assert all(e.HasField("status_update") or e.HasField("artifact_update") for e in rest), rest
    states = [e.status_update.status.state for e in rest if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == TaskState.TASK_STATE_COMPLETED
    step_updates = [
        d for e in rest if e.HasField("status_update") for d in get_data_parts(e.status_update.status.message.parts)
    ]
    assert len(step_updates) >= 2, step_updates
    (artifact,) = [e.artifact_update.artifact for e in rest if e.HasField("artifact_update")]
    (values,) = get_data_parts(artifact.parts)
    # n arrived as 2.0 (a protobuf Struct holds doubles); the graph counted to 2.
    assert values["count"] == 2 and values["log"] == ["step 1", "step 2"], values


@pytest.mark.parametrize("version", VERSIONS)
async def test_cancelling_a_slow_task_makes_it_canceled_and_a_second_cancel_is_refused(version):
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "slow", version)
        task = await send(client, data({"delay_ms": 20000}), return_immediately=True)
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED

        await eventually(
            lambda: client.get_task(GetTaskRequest(id=task.id)),
            lambda read: read.status.state == TaskState.TASK_STATE_CANCELED,
        )
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_stream_of_a_cancelled_task_ends_canceled(version):
    async with httpx.AsyncClient(timeout=30) as http:
        streaming = await agent(http, "slow", version, streaming=True)
        blocking = await agent(http, "slow", version)
        events = streaming.send_message(SendMessageRequest(message=data({"delay_ms": 20000})))
        first = await asyncio.wait_for(events.__anext__(), 10)
        await blocking.cancel_task(CancelTaskRequest(id=first.task.id))
        rest = await asyncio.wait_for(_rest(events), 20)
    last = rest[-1]
    assert last.HasField("status_update"), last
    assert last.status_update.status.state == TaskState.TASK_STATE_CANCELED


async def _rest(events) -> list:
    return [event async for event in events]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_failed_run_is_a_failed_task_saying_why(version):
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "fail", version)
        task = await send(client, text("go"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "boom" in "".join(get_text_parts(task.status.message.parts))


@pytest.mark.parametrize("version", VERSIONS)
async def test_get_task_reads_a_task_and_an_unknown_one_is_task_not_found(version):
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "echo", version)
        task = await send(client, text("kept"))
        read = await client.get_task(GetTaskRequest(id=task.id))
        assert read.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer(read) == "echo: kept"
        for unknown in (f"{uuid.uuid4()}:{uuid.uuid4()}", "no-such-task", f"{task.context_id}:{uuid.uuid4()}"):
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=unknown))
            with pytest.raises(TaskNotFoundError):
                await client.cancel_task(CancelTaskRequest(id=unknown))


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_message_into_a_finished_task_is_unsupported(version):
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "echo", version)
        task = await send(client, text("once"))
        with pytest.raises(UnsupportedOperationError):
            await send(client, text("again", context_id=task.context_id, task_id=task.id))
        streaming = await agent(http, "echo", version, streaming=True)
        with pytest.raises(UnsupportedOperationError):
            await stream(streaming, text("again", context_id=task.context_id, task_id=task.id))


@pytest.mark.parametrize("version", VERSIONS)
async def test_an_interrupt_is_input_required_and_a_message_into_the_task_resumes_it(version):
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "approval", version)
        task = await send(client, data({"topic": f"a2a {marker()}"}))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        (interrupt,) = get_data_parts(task.artifacts[-1].parts)
        assert interrupt["value"]["question"] == "approve?", interrupt
        resumed = await send(client, text("no", context_id=task.context_id, task_id=task.id))
        assert resumed.id == task.id, "the resumption continues the task"
        assert resumed.status.state == TaskState.TASK_STATE_COMPLETED
        # The graph ends with an AI message, which is the task's answer.
        assert answer(resumed).startswith("rejected: draft for a2a"), answer(resumed)
        read = await client.get_task(GetTaskRequest(id=task.id))
        assert read.status.state == TaskState.TASK_STATE_COMPLETED
        streaming = await agent(http, "approval", version, streaming=True)
        events = await stream(streaming, data({"topic": f"a2a {marker()}"}))
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, events[-1]
    (artifact,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert get_data_parts(artifact.parts)[0]["value"]["question"] == "approve?"


async def test_bad_parts_and_contexts_are_invalid_params():
    async with httpx.AsyncClient(timeout=30) as http:
        client = await agent(http, "echo", "1.0")
        with pytest.raises(InvalidParamsError):
            await send(client, text("x", context_id="not-a-uuid"))


def rpc(method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}


async def test_0_3_answers_are_kind_tagged_with_lowercase_roles_and_states():
    message = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    async with httpx.AsyncClient(base_url=BASE_URL, timeout=30) as http:
        sent = (await http.post("/a2a/echo", json=rpc("message/send", {"message": message}))).json()
        task = sent["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed", sent
        assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "echo: hi"}]
        assert [m["role"] for m in task["history"]] == ["user", "agent"]
        read = (await http.post("/a2a/echo", json=rpc("tasks/get", {"id": task["id"], "historyLength": 1}))).json()
        assert read["result"]["status"]["state"] == "completed"
        assert len(read["result"]["history"]) == 1, "historyLength keeps the newest"
        async with http.stream(
            "POST", "/a2a/steps", json=rpc("message/stream", {"message": {**message, "parts": [{"kind": "data", "data": {"n": 1}}]}})
        ) as response:
            lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
        results = [json.loads(line[5:])["result"] for line in lines]
        assert results[0]["kind"] == "task"
        assert {r["kind"] for r in results[1:]} <= {"status-update", "artifact-update"}
        assert results[-1]["kind"] == "status-update" and results[-1]["final"] is True
        assert results[-1]["status"]["state"] == "completed"
        unknown = (await http.post("/a2a/echo", json=rpc("tasks/nothing", {}))).json()
        assert unknown["error"]["code"] == -32601


async def test_under_auth_a2a_without_a_key_is_401_and_with_one_it_answers():
    key = f"a2a-key-{marker()}"
    config = {"auth": {"api_keys": {f"a2a-{marker()}": key}}}
    with own_server(config) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(f"{url}/a2a/echo/.well-known/agent-card.json")).status_code == 401
            message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            assert (await http.post(f"{url}/a2a/echo", json=rpc("SendMessage", {"message": message}))).status_code == 401
        async with httpx.AsyncClient(timeout=30, headers={"x-api-key": key}) as http:
            client = await agent(http, "echo", "1.0", base=url)
            task = await send(client, text("hello"))
        assert answer(task) == "echo: hello"


async def test_a_quiet_stream_carries_heartbeats_until_the_task_ends():
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"data": {"delay_ms": 5600}}]}
    async with httpx.AsyncClient(base_url=BASE_URL, timeout=30) as http:
        async with http.stream("POST", "/a2a/slow", json=rpc("SendStreamingMessage", {"message": message})) as response:
            lines = [line async for line in response.aiter_lines() if line]
    assert ": heartbeat" in lines, lines
    last = json.loads([line for line in lines if line.startswith("data:")][-1][5:])
    assert last["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", last
