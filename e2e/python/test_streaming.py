"""Stream modes, SSE framing, reconnect with Last-Event-ID, response headers."""

import json

from conftest import collect, events, marker, spec_only, wait_run

HI = {"messages": [{"type": "human", "content": "hi"}]}


async def stream(client, thread_id, assistant, input, **kw):
    return await collect(client.runs.stream(thread_id, assistant, input=input, **kw))


async def test_values_mode_emits_input_state_then_each_step(client, thread):
    parts = await stream(client, thread["thread_id"], "steps", {"n": 2}, stream_mode="values")
    values = [p.data for p in parts if p.event == "values"]
    assert [v.get("count") for v in values] == [None, 1, 2]
    assert values[-1]["log"] == ["step 1", "step 2"]


async def test_updates_mode_emits_one_update_per_node(client, thread):
    parts = await stream(client, thread["thread_id"], "steps", {"n": 2}, stream_mode="updates")
    assert events(parts) == ["metadata", "updates", "updates"]
    assert [p.data for p in parts[1:]] == [
        {"step": {"count": 1, "log": ["step 1"]}},
        {"step": {"count": 2, "log": ["step 2"]}},
    ]


async def test_custom_mode_carries_stream_writer_payloads_verbatim(client, thread):
    parts = await stream(client, thread["thread_id"], "steps", {"n": 3}, stream_mode="custom")
    assert [p.data for p in parts if p.event == "custom"] == [{"step": 1}, {"step": 2}, {"step": 3}]


async def test_several_modes_interleave_and_only_requested_modes_appear(client, thread):
    parts = await stream(client, thread["thread_id"], "steps", {"n": 1}, stream_mode=["updates", "custom"])
    assert set(events(parts)) == {"metadata", "updates", "custom"}
    assert events(parts).index("custom") < events(parts).index("updates")


async def test_tasks_mode_reports_task_start_and_result(client, thread):
    parts = await stream(client, thread["thread_id"], "echo", HI, stream_mode="tasks")
    tasks = [p.data for p in parts if p.event == "tasks"]
    assert len(tasks) == 2
    start, end = tasks
    assert start["name"] == "echo" and "input" in start and "triggers" in start
    assert end["id"] == start["id"] and end["name"] == "echo"
    assert end["error"] is None
    assert end["interrupts"] == []
    assert end["result"]["messages"][0]["content"] == "echo: hi"


async def test_checkpoints_mode_reports_each_checkpoint(client, thread):
    parts = await stream(client, thread["thread_id"], "echo", HI, stream_mode="checkpoints")
    cps = [p.data for p in parts if p.event == "checkpoints"]
    assert len(cps) >= 2
    for cp in cps:
        assert cp["config"]["configurable"]["checkpoint_id"]
        assert {"values", "metadata", "next", "tasks", "parent_config"} <= set(cp)
    assert cps[-1]["next"] == []
    assert [m["content"] for m in cps[-1]["values"]["messages"]] == ["hi", "echo: hi"]


async def test_debug_mode_wraps_checkpoints_and_tasks(client, thread):
    parts = await stream(client, thread["thread_id"], "echo", HI, stream_mode="debug")
    debug = [p.data for p in parts if p.event == "debug"]
    kinds = {d["type"] for d in debug}
    assert {"checkpoint", "task", "task_result"} <= kinds
    assert all("step" in d and "timestamp" in d and "payload" in d for d in debug)


async def test_events_mode_emits_runtime_events(client, thread):
    parts = await stream(client, thread["thread_id"], "echo", HI, stream_mode="events")
    evs = [p.data for p in parts if p.event == "events"]
    assert evs
    assert all("event" in e for e in evs)
    assert all("|" not in p.event for p in parts)  # events frames are never namespaced


async def test_messages_tuple_is_relabelled_messages(client, thread):
    parts = await stream(client, thread["thread_id"], "echo", HI, stream_mode=["messages-tuple", "values"])
    assert "messages-tuple" not in events(parts)
    for p in parts:
        if p.event == "messages":
            assert isinstance(p.data, list) and len(p.data) == 2  # [message, metadata]


async def test_default_stream_mode_is_values(client, thread):
    # The Python SDK always sends stream_mode; JS-like callers may omit it.
    parts = await stream(client, thread["thread_id"], "echo", HI)
    assert set(events(parts)) == {"metadata", "values"}


async def test_stream_response_headers_name_the_run(http, thread):
    tid = thread["thread_id"]
    async with http.stream("POST", f"/threads/{tid}/runs/stream",
                           json={"assistant_id": "echo", "input": HI, "stream_mode": ["values"]}) as r:
        assert r.status_code == 200
        assert "text/event-stream" in r.headers["content-type"]
        body = "".join([chunk async for chunk in r.aiter_text()])
    run_id = r.headers["content-location"].rsplit("/runs/", 1)[1]
    assert r.headers["content-location"] == f"/threads/{tid}/runs/{run_id}"
    assert r.headers["location"].endswith(f"/threads/{tid}/runs/{run_id}/stream")
    # one-line JSON data; first frame is metadata
    first = body.replace("\r\n", "\n").split("\n\n")[0].split("\n")
    assert first[0] == "event: metadata"
    assert json.loads(first[1][len("data: "):])["run_id"] == run_id


async def test_stateless_stream_headers(http):
    async with http.stream("POST", "/runs/stream", json={"assistant_id": "echo", "input": HI}) as r:
        assert r.status_code == 200
        [chunk async for chunk in r.aiter_bytes()]
    run_id = r.headers["content-location"].rsplit("/runs/", 1)[1]
    assert r.headers["content-location"] == f"/runs/{run_id}"
    assert r.headers["location"].endswith(f"/runs/{run_id}/stream")


async def test_background_and_wait_runs_carry_content_location(http, thread):
    tid = thread["thread_id"]
    r = await http.post(f"/threads/{tid}/runs", json={"assistant_id": "echo", "input": HI})
    assert r.status_code == 200
    assert r.headers["content-location"] == f"/threads/{tid}/runs/{r.json()['run_id']}"
    r = await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "echo", "input": HI})
    assert r.status_code == 200
    run_path = r.headers["content-location"]
    assert run_path.startswith(f"/threads/{tid}/runs/")
    assert r.headers["location"].endswith(run_path + "/join")
    r = await http.post("/runs", json={"assistant_id": "echo", "input": HI})
    assert r.headers["content-location"] == f"/runs/{r.json()['run_id']}"


async def test_resumable_stream_carries_event_ids(client, thread):
    parts = await stream(client, thread["thread_id"], "steps", {"n": 2},
                         stream_mode=["values", "updates"], stream_resumable=True)
    assert all(p.id for p in parts)
    with spec_only("contract REC (B12): event ids are unique and increase in emission order; the peer repeats ids"):
        ids = [p.id for p in parts]
        assert len(set(ids)) == len(ids)


async def test_join_stream_with_last_event_id_minus_one_replays_from_the_start(client, thread):
    tid = thread["thread_id"]
    original = await stream(client, tid, "steps", {"n": 2}, stream_mode=["values", "updates", "custom"],
                            stream_resumable=True)
    run_id = original[0].data["run_id"]
    replay = await collect(client.runs.join_stream(tid, run_id, last_event_id="-1"))
    assert [(p.event, p.data) for p in replay] == [(p.event, p.data) for p in original]
    assert replay[0].event == "metadata"


async def test_join_stream_with_last_event_id_replays_only_later_frames(client, thread):
    tid = thread["thread_id"]
    original = await stream(client, tid, "steps", {"n": 3}, stream_mode=["updates"], stream_resumable=True)
    run_id = original[0].data["run_id"]
    replay = await collect(client.runs.join_stream(tid, run_id, last_event_id=original[1].id))
    with spec_only("contract REC (B12): unique ids make 'after id X' exact; the peer repeats ids"):
        assert [p.data for p in replay] == [p.data for p in original[2:]]


async def test_join_stream_reconnect_while_running_replays_then_follows_live(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "slow", input={"delay_ms": 1000},
                                   stream_mode=["values", "updates"], stream_resumable=True)
    parts = await collect(client.runs.join_stream(tid, run["run_id"], last_event_id="-1"))
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"]
    assert parts[-1].event == "values" and parts[-1].data["done"] is True


async def test_join_stream_of_a_finished_run_without_last_event_id_is_empty(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "echo", input=HI, stream_resumable=True)
    await wait_run(client, tid, run["run_id"])
    assert await collect(client.runs.join_stream(tid, run["run_id"]), timeout=10) == []


async def test_stream_subgraphs_flag_is_accepted_for_flat_graphs(client, thread):
    parts = await stream(client, thread["thread_id"], "echo", HI, stream_mode="updates", stream_subgraphs=True)
    assert events(parts) == ["metadata", "updates"]


async def test_stream_v2_format_splits_type_and_namespace(client, thread):
    parts = await collect(client.runs.stream(thread["thread_id"], "steps", input={"n": 1},
                                             stream_mode=["updates"], version="v2"))
    updates = [p for p in parts if p["type"] == "updates"]
    assert updates and updates[0]["ns"] == []
    assert updates[0]["data"] == {"step": {"count": 1, "log": ["step 1"]}}
