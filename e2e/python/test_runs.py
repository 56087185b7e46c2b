"""Runs: create / wait / stream on a thread and stateless, batch, list, get, delete, join."""

import pytest
from langgraph_sdk.errors import NotFoundError

from conftest import collect, events, marker, wait_run

HI = {"messages": [{"type": "human", "content": "hi"}]}


def contents(values: dict) -> list:
    return [m["content"] for m in values["messages"]]


async def test_wait_on_a_thread_returns_final_values(client, thread):
    result = await client.runs.wait(thread["thread_id"], "echo", input=HI)
    assert contents(result) == ["hi", "echo: hi"]


async def test_wait_accumulates_state_across_runs_on_a_thread(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "echo", input=HI)
    result = await client.runs.wait(tid, "echo", input={"messages": [{"type": "human", "content": "again"}]})
    assert contents(result) == ["hi", "echo: hi", "again", "echo: again"]


async def test_background_run_on_a_thread_reaches_success(client, thread):
    created = []
    run = await client.runs.create(thread["thread_id"], "echo", input=HI, on_run_created=created.append)
    assert run["thread_id"] == thread["thread_id"]
    assert run["status"] in ("pending", "running")
    assert created == [{"run_id": run["run_id"], "thread_id": thread["thread_id"]}]  # from Content-Location
    done = await wait_run(client, thread["thread_id"], run["run_id"])
    assert done["status"] == "success"


async def test_stream_on_a_thread_starts_with_metadata_and_ends_with_final_values(client, thread):
    created = []
    parts = await collect(
        client.runs.stream(thread["thread_id"], "echo", input=HI, on_run_created=created.append)
    )
    assert parts[0].event == "metadata"
    run_id = parts[0].data["run_id"]
    assert created and created[0]["run_id"] == run_id
    assert events(parts)[1:] == ["values", "values"]
    assert contents(parts[-1].data) == ["hi", "echo: hi"]
    assert "end" not in events(parts)


async def test_stateless_wait_returns_final_values(client):
    result = await client.runs.wait(None, "echo", input=HI)
    assert contents(result) == ["hi", "echo: hi"]


async def test_stateless_stream_yields_values(client):
    created = []
    parts = await collect(client.runs.stream(None, "echo", input=HI, on_run_created=created.append))
    assert parts[0].event == "metadata"
    assert created[0]["run_id"] == parts[0].data["run_id"]
    assert created[0]["thread_id"] is None  # Content-Location is /runs/{run_id}
    assert contents(parts[-1].data) == ["hi", "echo: hi"]


async def test_stateless_background_run_has_a_temporary_thread(client):
    created = []
    run = await client.runs.create(None, "echo", input=HI, on_run_created=created.append)
    assert run["thread_id"]
    assert created == [{"run_id": run["run_id"], "thread_id": None}]


async def test_stateless_run_with_on_completion_keep_keeps_its_thread(client):
    run = await client.runs.create(None, "echo", input=HI, on_completion="keep")
    await client.runs.join(run["thread_id"], run["run_id"])
    state = await client.threads.get_state(run["thread_id"])
    assert contents(state["values"]) == ["hi", "echo: hi"]


async def test_invoke_answers_the_graphs_final_values(client):
    # No SDK method: POST /invoke/{graph_id} is this server's (SPEC "single-graph invoke").
    result = await client.http.post("/invoke/echo", json=HI)
    assert contents(result) == ["hi", "echo: hi"]


async def test_batch_creates_runs_in_order(client):
    m = marker()
    runs = await client.runs.create_batch(
        [
            {"assistant_id": "echo", "input": {"messages": [{"type": "human", "content": "a"}]},
             "metadata": {"e2e": m, "i": 0}, "on_completion": "keep"},
            {"assistant_id": "steps", "input": {"n": 2}, "metadata": {"e2e": m, "i": 1}, "on_completion": "keep"},
        ]
    )
    assert len(runs) == 2
    assert [r["metadata"]["i"] for r in runs] == [0, 1]
    first = await client.runs.join(runs[0]["thread_id"], runs[0]["run_id"])
    second = await client.runs.join(runs[1]["thread_id"], runs[1]["run_id"])
    assert contents(first) == ["a", "echo: a"]
    assert second["count"] == 2


async def test_list_runs_newest_first_with_status_filter_and_select(client, thread):
    tid = thread["thread_id"]
    first = await client.runs.create(tid, "echo", input=HI)
    await client.runs.join(tid, first["run_id"])
    second = await client.runs.create(tid, "echo", input=HI)
    await client.runs.join(tid, second["run_id"])

    listed = await client.runs.list(tid)
    assert [r["run_id"] for r in listed] == [second["run_id"], first["run_id"]]
    assert all(r["assistant_id"] and r["created_at"] for r in listed)
    assert len(await client.runs.list(tid, limit=1)) == 1
    assert [r["run_id"] for r in await client.runs.list(tid, limit=1, offset=1)] == [first["run_id"]]
    assert len(await client.runs.list(tid, status="success")) == 2
    assert await client.runs.list(tid, status="running") == []

    selected = await client.runs.list(tid, select=["run_id", "status"])
    assert all(set(r) == {"run_id", "status"} for r in selected)


async def test_get_run_and_metadata_are_kept(client, thread):
    m = marker()
    run = await client.runs.create(thread["thread_id"], "echo", input=HI, metadata={"e2e": m})
    got = await client.runs.get(thread["thread_id"], run["run_id"])
    assert got["run_id"] == run["run_id"]
    assert got["metadata"]["e2e"] == m


async def test_delete_run_removes_it(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "echo", input=HI)
    await client.runs.join(tid, run["run_id"])
    await client.runs.delete(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, run["run_id"])
    assert await client.runs.list(tid) == []


async def test_join_blocks_until_done_and_returns_values(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "slow", input={"delay_ms": 300})
    result = await client.runs.join(tid, run["run_id"])
    assert result["done"] is True
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"
    # joining a finished run answers at once with the final values
    assert (await client.runs.join(tid, run["run_id"]))["done"] is True


async def test_join_stream_follows_a_live_run(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "slow", input={"delay_ms": 1000}, stream_mode=["values", "updates"])
    parts = await collect(client.runs.join_stream(tid, run["run_id"]))
    assert any(p.event == "updates" and p.data == {"sleep": {"done": True}} for p in parts)
    assert parts[-1].event == "values" and parts[-1].data["done"] is True


async def test_join_stream_with_stream_mode_filter(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "slow", input={"delay_ms": 1000}, stream_mode=["values", "updates"])
    parts = await collect(client.runs.join_stream(tid, run["run_id"], stream_mode="updates"))
    assert parts and set(events(parts)) == {"updates"}


async def test_unknown_assistant_is_rejected_on_run_creation(client, thread):
    from langgraph_sdk.errors import APIStatusError

    with pytest.raises(APIStatusError) as err:
        await client.runs.create(thread["thread_id"], "no-such-graph", input={})
    assert err.value.status_code in (404, 422)


async def test_run_on_missing_thread_is_not_found_unless_if_not_exists_create(client):
    import uuid

    tid = str(uuid.uuid4())
    with pytest.raises(NotFoundError):
        await client.runs.create(tid, "echo", input=HI)
    result = await client.runs.wait(tid, "echo", input=HI, if_not_exists="create")
    assert contents(result) == ["hi", "echo: hi"]
    assert (await client.threads.get(tid))["thread_id"] == tid


def test_sync_client_streams_and_waits(sync_client):
    t = sync_client.threads.create(metadata={"e2e": marker()})
    parts = list(sync_client.runs.stream(t["thread_id"], "steps", input={"n": 2}, stream_mode="updates"))
    assert [p.event for p in parts] == ["metadata", "updates", "updates"]
    result = sync_client.runs.wait(t["thread_id"], "echo", input=HI)
    assert contents(result) == ["hi", "echo: hi"]
