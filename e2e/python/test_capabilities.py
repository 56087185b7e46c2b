"""Capability gaps answer 422 `agent_capability_missing` (SPEC Errors).

The server's `reply` example graph implements neither getStateHistory nor
updateState. The reference server's `reply` is a full StateGraph, so it has
both: these tests are SPEC-only by construction.
"""

import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from conftest import rust_examples_only, spec_only


async def reply_thread(client, thread):
    await client.runs.wait(thread["thread_id"], "reply", input={"text": "hi"})
    return thread["thread_id"]


async def test_reply_graph_runs(client, thread):
    result = await client.runs.wait(thread["thread_id"], "reply", input={"text": "hi"})
    assert result["replied"] is True


@rust_examples_only
async def test_history_without_get_state_history_is_422_capability_missing(client, http, thread):
    tid = await reply_thread(client, thread)
    with spec_only("SPEC: reply lacks getStateHistory -> 422 agent_capability_missing"):
        with pytest.raises(UnprocessableEntityError) as err:
            await client.threads.get_history(tid)
        assert err.value.code == "agent_capability_missing"
        r = await http.post(f"/threads/{tid}/history", json={"limit": 10})
        assert r.status_code == 422
        body = r.json()
        assert body["code"] == "agent_capability_missing"
        assert body["details"]["capability"] == "getStateHistory"
        assert body["message"] and body["detail"]


@rust_examples_only
async def test_update_state_without_update_state_is_422_capability_missing(client, http, thread):
    tid = await reply_thread(client, thread)
    with spec_only("SPEC: reply lacks updateState -> 422 agent_capability_missing"):
        r = await http.post(f"/threads/{tid}/state", json={"values": {"text": "x"}})
        assert r.status_code == 422
        body = r.json()
        assert body["code"] == "agent_capability_missing"
        assert body["details"]["capability"] == "updateState"


async def test_state_read_falls_back_to_get_state_without_history(client, thread):
    tid = await reply_thread(client, thread)
    state = await client.threads.get_state(tid)
    assert state["values"]["replied"] is True
    assert state["next"] == []
