"""Threads: CRUD, search, count, copy, prune, state, history, supersteps, join stream."""

import asyncio
import json

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from conftest import collect_until, eventually, marker, spec_only, wait_run


async def test_create_get_update_delete_thread(client):
    m = marker()
    t = await client.threads.create(metadata={"e2e": m, "a": 1})
    tid = t["thread_id"]
    assert t["status"] == "idle"
    assert t["metadata"]["e2e"] == m

    got = await client.threads.get(tid)
    assert got["thread_id"] == tid and got["status"] == "idle"

    updated = await client.threads.update(tid, metadata={"b": 2})
    assert updated["metadata"]["a"] == 1 and updated["metadata"]["b"] == 2  # shallow merge

    await client.threads.delete(tid)
    with pytest.raises(NotFoundError):
        await client.threads.get(tid)


async def test_update_with_return_minimal_returns_nothing(client, thread):
    result = await client.threads.update(thread["thread_id"], metadata={"x": 1}, return_minimal=True)
    assert result is None
    assert (await client.threads.get(thread["thread_id"]))["metadata"]["x"] == 1


async def test_create_accepts_ttl_in_sdk_object_form(client):
    # Both SDKs send ttl as {"ttl": minutes, "strategy": "delete"}.
    t = await client.threads.create(metadata={"e2e": marker()}, ttl=60)
    assert t["status"] == "idle"
    updated = await client.threads.update(t["thread_id"], metadata={}, ttl={"ttl": 30, "strategy": "delete"})
    assert updated["thread_id"] == t["thread_id"]


async def test_create_with_if_exists_do_nothing_returns_existing(client, thread):
    again = await client.threads.create(thread_id=thread["thread_id"], if_exists="do_nothing", metadata={"other": 1})
    assert again["thread_id"] == thread["thread_id"]
    assert "other" not in again["metadata"]


async def test_search_and_count_filter_by_metadata_status_and_ids(client):
    m = marker()
    a = await client.threads.create(metadata={"e2e": m, "kind": "a"})
    b = await client.threads.create(metadata={"e2e": m, "kind": "b"})
    await client.runs.wait(b["thread_id"], "echo", input={"messages": [{"type": "human", "content": "hi"}]})

    found = await client.threads.search(metadata={"e2e": m}, limit=10)
    assert {t["thread_id"] for t in found} == {a["thread_id"], b["thread_id"]}
    assert [t["thread_id"] for t in await client.threads.search(metadata={"e2e": m, "kind": "a"})] == [a["thread_id"]]
    assert [t["thread_id"] for t in await client.threads.search(ids=[b["thread_id"]])] == [b["thread_id"]]
    assert await client.threads.count(metadata={"e2e": m}) == 2
    assert await client.threads.count(metadata={"e2e": m}, status="idle") == 2

    page = await client.threads.search(metadata={"e2e": m}, limit=1, offset=1)
    assert len(page) == 1


async def test_search_and_count_leave_out_exclude_metadata(client, http):
    m = marker()
    await client.threads.create(metadata={"e2e": m, "kind": "draft"})
    archived = await client.threads.create(metadata={"e2e": m, "archived": True})
    kept = await client.threads.create(metadata={"e2e": m, "kind": "final"})
    r = await http.post("/threads/search", json={"metadata": {"e2e": m}, "exclude_metadata": {"kind": "draft"}})
    assert r.status_code == 200
    assert {t["thread_id"] for t in r.json()} == {archived["thread_id"], kept["thread_id"]}
    both = [{"kind": "draft"}, {"archived": True}]
    r = await http.post("/threads/search", json={"metadata": {"e2e": m}, "exclude_metadata": both})
    assert [t["thread_id"] for t in r.json()] == [kept["thread_id"]]
    r = await http.post("/threads/count", json={"metadata": {"e2e": m}, "exclude_metadata": both})
    assert r.json() == 1


async def test_search_by_values_containment(client):
    m = marker()
    t = await client.threads.create(metadata={"e2e": m})
    await client.runs.wait(t["thread_id"], "steps", input={"n": 2})
    found = await client.threads.search(metadata={"e2e": m}, values={"count": 2})
    assert [x["thread_id"] for x in found] == [t["thread_id"]]
    assert await client.threads.search(metadata={"e2e": m}, values={"count": 99}) == []


async def test_thread_mirrors_values_after_a_run(client, thread):
    await client.runs.wait(thread["thread_id"], "echo", input={"messages": [{"type": "human", "content": "hi"}]})
    t = await client.threads.get(thread["thread_id"])
    assert t["status"] == "idle"
    assert [msg["content"] for msg in t["values"]["messages"]] == ["hi", "echo: hi"]


async def test_copy_creates_a_new_thread_with_the_same_state(client, thread):
    await client.runs.wait(thread["thread_id"], "steps", input={"n": 2})
    copy = await client.threads.copy(thread["thread_id"])
    assert copy["thread_id"] != thread["thread_id"]
    assert copy["metadata"]["e2e"] == thread["metadata"]["e2e"]
    state = await client.threads.get_state(copy["thread_id"])
    assert state["values"]["count"] == 2
    assert state["values"]["log"] == ["step 1", "step 2"]


async def test_prune_deletes_threads(client):
    a = await client.threads.create(metadata={"e2e": marker()})
    b = await client.threads.create(metadata={"e2e": marker()})
    result = await client.threads.prune([a["thread_id"], b["thread_id"]])
    assert result["pruned_count"] == 2
    for t in (a, b):
        with pytest.raises(NotFoundError):
            await client.threads.get(t["thread_id"])
    assert (await client.threads.prune([]))["pruned_count"] == 0


async def test_state_of_an_empty_thread_has_no_checkpoint(client, thread):
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"] in ({}, None)
    assert state["next"] == []
    assert state["tasks"] == []
    assert state["checkpoint"] is None


async def test_state_after_a_run_has_checkpoint_coordinates(client, thread):
    await client.runs.wait(thread["thread_id"], "steps", input={"n": 2})
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["count"] == 2
    assert state["next"] == []
    assert state["checkpoint"]["thread_id"] == thread["thread_id"]
    assert state["checkpoint"]["checkpoint_id"]
    assert state["parent_checkpoint"]["checkpoint_id"]
    assert state["created_at"]


async def test_update_state_appends_through_reducers_and_returns_checkpoint(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 1})
    res = await client.threads.update_state(tid, {"count": 10, "log": ["manual"]}, as_node="step")
    assert res["checkpoint"]["checkpoint_id"]
    state = await client.threads.get_state(tid)
    assert state["values"]["count"] == 10
    assert state["values"]["log"] == ["step 1", "manual"]  # appending channel appends
    assert state["checkpoint"]["checkpoint_id"] == res["checkpoint"]["checkpoint_id"]


async def test_update_state_response_has_configurable_too(http, client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 1})
    r = await http.post(f"/threads/{tid}/state", json={"values": {"count": 5}, "as_node": "step"})
    assert r.status_code == 200
    body = r.json()
    assert body["checkpoint"]["checkpoint_id"] == body["configurable"]["checkpoint_id"]


async def test_update_state_from_an_older_checkpoint_forks(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 3})
    history = await client.threads.get_history(tid, limit=10)
    older = next(h for h in history if h["values"].get("count") == 1)
    res = await client.threads.update_state(
        tid, {"log": ["fork"]}, as_node="step", checkpoint_id=older["checkpoint"]["checkpoint_id"]
    )
    state = await client.threads.get_state(tid)
    assert state["checkpoint"]["checkpoint_id"] == res["checkpoint"]["checkpoint_id"]
    assert state["values"]["count"] == 1
    assert state["values"]["log"] == ["step 1", "fork"]
    assert state["parent_checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]


async def test_run_from_a_checkpoint_replays_from_there(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 2})
    history = await client.threads.get_history(tid, limit=10)
    first = next(h for h in history if h["values"].get("count") == 1)
    result = await client.runs.wait(tid, "steps", input=None, checkpoint_id=first["checkpoint"]["checkpoint_id"])
    assert result["count"] == 2
    assert result["log"] == ["step 1", "step 2"]  # re-ran step 2 only, from the fork point


async def test_get_state_at_a_checkpoint(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 3})
    history = await client.threads.get_history(tid, limit=10)
    older = next(h for h in history if h["values"].get("count") == 1)

    by_id = await client.threads.get_state(tid, checkpoint_id=older["checkpoint"]["checkpoint_id"])
    assert by_id["values"]["count"] == 1
    by_checkpoint = await client.threads.get_state(tid, checkpoint=older["checkpoint"])
    assert by_checkpoint["values"]["count"] == 1
    assert by_checkpoint["checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]


async def test_history_is_newest_first_and_limited(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 3})
    history = await client.threads.get_history(tid, limit=10)
    counts = [h["values"].get("count") for h in history]
    assert counts[0] == 3
    assert counts[:3] == [3, 2, 1]
    assert len(await client.threads.get_history(tid, limit=2)) == 2


async def test_history_before_in_config_form(http, client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 3})
    history = await client.threads.get_history(tid, limit=10)
    before = {"configurable": {"checkpoint_id": history[0]["checkpoint"]["checkpoint_id"]}}
    r = await http.post(f"/threads/{tid}/history", json={"limit": 10, "before": before})
    assert r.status_code == 200
    assert [h["checkpoint"]["checkpoint_id"] for h in r.json()] == [
        h["checkpoint"]["checkpoint_id"] for h in history[1:]
    ]


async def test_history_before_in_python_sdk_form(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 3})
    history = await client.threads.get_history(tid, limit=10)
    with spec_only("contract B8: `before` as a flat checkpoint or an id string (the peer accepts only the config form)"):
        page = await client.threads.get_history(tid, limit=10, before=history[0]["checkpoint"])
        assert page[0]["checkpoint"]["checkpoint_id"] == history[1]["checkpoint"]["checkpoint_id"]
        page = await client.threads.get_history(tid, limit=1, before=history[1]["checkpoint"]["checkpoint_id"])
        assert page[0]["checkpoint"]["checkpoint_id"] == history[2]["checkpoint"]["checkpoint_id"]


async def test_history_filters_by_checkpoint_metadata(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 2})
    inputs = await client.threads.get_history(tid, limit=10, metadata={"source": "input"})
    assert len(inputs) == 1
    assert inputs[0]["metadata"]["source"] == "input"


async def test_history_select_keeps_the_named_fields_and_value_keys(http, client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 2})
    history = await client.threads.get_history(tid, limit=10, select=["values.count", "next", "metadata"])
    assert history and all(set(h) <= {"values", "next", "metadata"} for h in history), history
    assert history[0]["values"] == {"count": 2} and history[0]["next"] == []
    assert history[0]["metadata"]["step"] >= 1
    r = await http.get(f"/threads/{tid}/history", params=[("select", "checkpoint"), ("limit", "1")])
    assert r.status_code == 200 and list(r.json()[0]) == ["checkpoint"], r.text
    r = await http.post(f"/threads/{tid}/history", json={"select": ["config"]})
    assert r.status_code == 422 and "config" in r.json()["message"], r.text


async def test_create_with_supersteps_applies_updates(client):
    t = await client.threads.create(
        metadata={"e2e": marker()},
        graph_id="echo",
        supersteps=[
            {"updates": [{"values": {"messages": [{"type": "human", "content": "one"}]}, "as_node": "echo"}]},
            {"updates": [{"values": {"messages": [{"type": "ai", "content": "two"}]}, "as_node": "echo"}]},
        ],
    )
    state = await client.threads.get_state(t["thread_id"])
    assert [msg["content"] for msg in state["values"]["messages"]] == ["one", "two"]
    assert len(await client.threads.get_history(t["thread_id"], limit=10)) >= 2


async def test_supersteps_at_creation_publish_state_update_on_the_thread_stream(client, http):
    created = await client.threads.create(metadata={"e2e": marker()}, graph_id="echo")
    tid = created["thread_id"]
    # Over plain HTTP: the SDK's join_stream connects only when first read, and the
    # stream must listen before the supersteps are applied.
    async with http.stream("GET", f"/threads/{tid}/stream") as listening:
        assert listening.status_code == 200
        await client.threads.create(
            thread_id=tid,
            if_exists="do_nothing",
            supersteps=[{"updates": [{"values": {"messages": [{"type": "human", "content": "hi"}]}, "as_node": "echo"}]}],
        )

        async def first_state_update() -> dict:
            event = None
            async for line in listening.aiter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event == "state_update":
                    return json.loads(line.split(":", 1)[1])
            raise AssertionError("the stream ended without a state_update")

        update = await asyncio.wait_for(first_state_update(), 10)
    assert update["thread_id"] == tid
    assert [msg["content"] for msg in update["state"]["values"]["messages"]] == ["hi"]


async def test_state_edits_beside_an_active_run_are_refused_409(client, http, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "slow", input={"delay_ms": 1})
    run = await client.runs.create(tid, "slow", input={"delay_ms": 60000})
    await eventually(lambda: client.runs.get(tid, run["run_id"]), lambda r: r["status"] == "running")
    with pytest.raises(ConflictError) as err:
        await client.threads.update_state(tid, {"done": False})
    assert "Thread is busy with a running job. Cannot update state." in str(err.value)
    patched = await http.patch(f"/threads/{tid}/state", json={"metadata": {"note": "x"}})
    assert patched.status_code == 409
    await client.runs.cancel(tid, run["run_id"])
    await wait_run(client, tid, run["run_id"])
    await client.threads.update_state(tid, {"done": False})
    assert (await client.threads.get_state(tid))["values"]["done"] is False


async def test_join_stream_sees_a_run_on_the_thread(client, thread):
    tid = thread["thread_id"]
    stream = await client.threads.join_stream(tid)
    run = await client.runs.create(tid, "slow", input={"delay_ms": 1500}, stream_mode=["values"])
    parts = await collect_until(
        stream,
        lambda p: p.event == "metadata" and isinstance(p.data, dict) and p.data.get("status") == "run_done",
        timeout=15,
    )
    assert parts[-1].data["run_id"] == run["run_id"]
    assert any(p.event == "values" and p.data.get("done") is True for p in parts)
    assert all(p.id for p in parts)  # the thread stream always carries ids


async def test_unknown_thread_is_not_found(client):
    with pytest.raises(NotFoundError):
        await client.threads.get("00000000-0000-4000-8000-000000000000")
    with pytest.raises(NotFoundError):
        await client.threads.get_state("00000000-0000-4000-8000-000000000000")
