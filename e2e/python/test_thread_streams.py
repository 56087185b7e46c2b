"""Protocol v2: `client.threads.stream()` (thread commands plus the thread's events),
over server-sent events and over a WebSocket (contract/protocol-v2.md)."""

import asyncio
import json
import uuid

import pytest
import websockets

from conftest import BASE_URL, eventually, review_request, rust_examples_only

HI = {"messages": [{"type": "human", "content": "hi"}]}
BOUND = 20.0

pytestmark = pytest.mark.parametrize("transport", ["sse", "websocket"])


async def until_interrupted(thread):
    """Waits (bounded) until the stream has announced an interrupt."""
    await eventually(lambda: _now(thread.interrupted), lambda interrupted: interrupted, timeout=BOUND)


async def _now(value):
    return value


async def test_a_chat_turn_streams_its_message_values_and_output(client, transport):
    async with client.threads.stream(assistant_id="echo", transport=transport) as thread:
        started = await thread.run.start(input=HI)
        assert uuid.UUID(started["run_id"])

        async def messages():
            # The projection feeds each message as it iterates: read them all first.
            return [message async for message in thread.messages]

        messages = await asyncio.wait_for(messages(), BOUND)
        assert [await message.text for message in messages] == ["echo: hi"]
        output = await asyncio.wait_for(thread.output, BOUND)
        assert [m["content"] for m in output["messages"]] == ["hi", "echo: hi"]
        # The thread was made by the first run.start, under the id the SDK chose.
        assert (await client.threads.get(thread.thread_id))["status"] == "idle"


async def test_values_are_the_state_after_each_step(client, transport):
    async with client.threads.stream(assistant_id="echo", transport=transport) as thread:
        await thread.run.start(input=HI)

        async def values():
            return [snapshot async for snapshot in thread.values]

        snapshots = await asyncio.wait_for(values(), BOUND)
        assert snapshots[-1]["messages"][-1]["content"] == "echo: hi"


async def test_an_interrupt_is_answered_with_run_respond(client, transport):
    async with client.threads.stream(assistant_id="approval", transport=transport) as thread:
        await thread.run.start(input={"topic": "cats"})
        await until_interrupted(thread)
        [interrupt] = thread.interrupts
        assert interrupt["value"] == review_request("draft for cats")
        assert interrupt["namespace"] == []
        state = await client.threads.get_state(thread.thread_id)
        assert interrupt["interrupt_id"] == state["interrupts"][0]["id"]

        assert await thread.run.respond(True) == {}
        output = await asyncio.wait_for(thread.output, BOUND)
        assert (output["draft"], output["status"]) == ("draft for cats", "approved")
        assert thread.interrupts == []


@rust_examples_only
async def test_a_subgraphs_events_carry_its_namespace(client, transport):
    async with client.threads.stream(assistant_id="nested", transport=transport) as thread:
        await thread.run.start(input={"topic": "cats"})
        # The subgraph's interrupt pauses the parent (and ends the projections).
        await until_interrupted(thread)
        inner = []

        async def until_inner_update():
            # A stream of every channel, replayed from the thread's first event (on a
            # WebSocket, the subscription's answer comes first).
            async for event in thread.events:
                namespace = (event.get("params") or {}).get("namespace") or [""]
                if namespace[0].startswith("review:"):
                    inner.append(event)
                    if event["method"] == "updates":
                        return

        await asyncio.wait_for(until_inner_update(), BOUND)
        started = inner[0]
        assert started["method"] == "lifecycle"
        assert started["params"]["data"] == {"event": "started", "graph_name": "review"}
        [namespace] = started["params"]["namespace"]
        update = inner[-1]["params"]
        assert update["namespace"] == [namespace]
        assert update["data"] == {"node": "draft", "values": {"draft": "draft for cats"}}

        [interrupt] = thread.interrupts
        assert interrupt["value"] == review_request("draft for cats")
        await thread.run.respond(True)
        output = await asyncio.wait_for(thread.output, BOUND)
        assert output["log"] == ["plan cats", "publish approved"]
        tree = await thread.agent.get_tree()
        assert any(node["id"] == "review" for node in tree["nodes"])


async def test_an_unknown_assistant_is_a_protocol_error(client, transport):
    async with client.threads.stream(assistant_id="no-such-graph", transport=transport) as thread:
        with pytest.raises(RuntimeError, match=r"Protocol error \["):
            await thread.run.start(input=HI)


async def test_unknown_commands_and_malformed_envelopes_get_error_envelopes(client, http, transport):
    async with client.threads.stream(assistant_id="echo", transport=transport) as thread:
        await thread.run.start(input=HI)
        await asyncio.wait_for(thread.output, BOUND)
        tid = thread.thread_id

    if transport == "sse":
        unknown = await http.post(f"/threads/{tid}/commands", json={"id": 5, "method": "state.get", "params": {}})
        assert unknown.status_code == 200
        assert unknown.json() == {
            "type": "error", "id": 5, "error": "unknown_command",
            "message": "Unknown protocol command: state.get",
        }
        malformed = await http.post(f"/threads/{tid}/commands", json={"id": "5", "method": "run.start"})
        assert malformed.status_code == 400
        assert (malformed.json()["type"], malformed.json()["error"]) == ("error", "invalid_argument")
        not_json = await http.post(f"/threads/{tid}/commands", content=b"{nope",
                                   headers={"content-type": "application/json"})
        assert (not_json.status_code, not_json.json()["detail"]) == (400, "Invalid JSON body")
        no_channels = await http.post(f"/threads/{tid}/stream/events", json={"channels": []})
        assert no_channels.status_code == 400
        return

    url = BASE_URL.replace("http://", "ws://", 1) + f"/threads/{tid}/stream/events"
    async with websockets.connect(url) as socket:
        await socket.send(json.dumps({"id": 5, "method": "state.get", "params": {}}))
        answer = json.loads(await asyncio.wait_for(socket.recv(), BOUND))
        assert (answer["type"], answer["id"], answer["error"]) == ("error", 5, "unknown_command")
        await socket.send(json.dumps({"id": "5", "method": "run.start"}))
        answer = json.loads(await asyncio.wait_for(socket.recv(), BOUND))
        assert (answer["type"], answer["error"]) == ("error", "invalid_argument")
        await socket.send("{nope")
        answer = json.loads(await asyncio.wait_for(socket.recv(), BOUND))
        assert (answer["id"], answer["error"]) == (None, "invalid_argument")
