"""Cancellation and multitask strategies, driven by the `slow` graph."""

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from conftest import collect, eventually, events, spec_only, wait_run, wait_thread_idle

CANCELLED = "cancelled"  # SPEC A2; the reference server (and the SDK's RunStatus) says "interrupted"


async def running_slow(client, tid, delay_ms=3000, **kw):
    run = await client.runs.create(tid, "slow", input={"delay_ms": delay_ms}, **kw)
    await eventually(lambda: client.runs.get(tid, run["run_id"]), lambda r: r["status"] == "running")
    return run


# The peer's (langgraph-api 0.18) wording: a route's path keeps its {placeholders}.
REQUESTED = "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel"
REQUESTED_IN_BULK = "interrupt requested via POST /runs/cancel"
DISCONNECTED = "client disconnected from the run stream (on_disconnect=cancel)"


def assert_cancelled(run):
    assert run["status"] not in ("success", "pending", "running", "error")
    with spec_only("SPEC A2: a cancelled run's status is `cancelled` (peer: `interrupted`)"):
        assert run["status"] == CANCELLED


async def test_cancel_a_running_run(client, thread):
    tid = thread["thread_id"]
    run = await running_slow(client, tid, stream_resumable=True, stream_mode=["values"])
    await client.runs.cancel(tid, run["run_id"])
    done = await wait_run(client, tid, run["run_id"])
    t = await wait_thread_idle(client, tid)
    assert t["status"] != "busy"  # the unfinished node may leave it interrupted
    # the stream of a cancelled run just closes: no error frame
    replay = await collect(client.runs.join_stream(tid, run["run_id"], last_event_id="-1"))
    assert "error" not in events(replay)
    assert_cancelled(done)
    assert done["cancel_reason"] == REQUESTED


async def test_a_cancelled_run_reads_back_with_its_cancel_reason_and_others_with_none(client, thread):
    tid = thread["thread_id"]
    finished = await client.runs.create(tid, "slow", input={"delay_ms": 10})
    finished = await wait_run(client, tid, finished["run_id"])
    assert finished["status"] == "success"
    assert "cancel_reason" in finished and finished["cancel_reason"] is None
    run = await running_slow(client, tid)
    await client.runs.cancel(tid, run["run_id"], wait=True)
    assert (await client.runs.get(tid, run["run_id"]))["cancel_reason"] == REQUESTED
    listed = await client.runs.list(tid, select=["run_id", "cancel_reason"])
    assert listed == [
        {"run_id": run["run_id"], "cancel_reason": REQUESTED},
        {"run_id": finished["run_id"], "cancel_reason": None},
    ]


async def test_cancel_with_wait_returns_after_the_run_stopped(client, thread):
    tid = thread["thread_id"]
    run = await running_slow(client, tid)
    await client.runs.cancel(tid, run["run_id"], wait=True)
    got = await client.runs.get(tid, run["run_id"])
    assert got["status"] not in ("pending", "running")
    assert_cancelled(got)


async def test_cancel_with_rollback_deletes_the_run(client, thread):
    tid = thread["thread_id"]
    run = await running_slow(client, tid)
    await client.runs.cancel(tid, run["run_id"], action="rollback")
    await eventually(lambda: client.runs.list(tid), lambda runs: runs == [])


async def test_cancel_a_pending_run(client, thread):
    tid = thread["thread_id"]
    first = await running_slow(client, tid, delay_ms=1500)
    second = await client.runs.create(tid, "slow", input={"delay_ms": 10}, multitask_strategy="enqueue")
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "pending"
    await client.runs.cancel(tid, second["run_id"])
    cancelled = await wait_run(client, tid, second["run_id"])
    assert (await wait_run(client, tid, first["run_id"]))["status"] == "success"
    assert_cancelled(cancelled)
    assert cancelled["cancel_reason"] == REQUESTED


async def test_cancel_of_a_finished_run_is_not_found(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "slow", input={"delay_ms": 10})
    await client.runs.join(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.cancel(tid, run["run_id"])


async def test_cancel_many_by_thread_and_run_ids(client, thread):
    tid = thread["thread_id"]
    first = await running_slow(client, tid)
    second = await client.runs.create(tid, "slow", input={"delay_ms": 10}, multitask_strategy="enqueue")
    await client.runs.cancel_many(thread_id=tid, run_ids=[first["run_id"], second["run_id"]])
    for run in (first, second):
        cancelled = await wait_run(client, tid, run["run_id"])
        assert_cancelled(cancelled)
        assert cancelled["cancel_reason"] == REQUESTED_IN_BULK


async def test_cancel_many_by_status_pending(client, thread):
    tid = thread["thread_id"]
    first = await running_slow(client, tid, delay_ms=1500)
    second = await client.runs.create(tid, "slow", input={"delay_ms": 10}, multitask_strategy="enqueue")
    await client.runs.cancel_many(status="pending")
    assert (await wait_run(client, tid, first["run_id"]))["status"] == "success"  # running runs untouched
    assert_cancelled(await wait_run(client, tid, second["run_id"]))


async def test_multitask_reject_answers_409_while_busy(client, thread):
    tid = thread["thread_id"]
    first = await running_slow(client, tid, delay_ms=1500)
    with pytest.raises(ConflictError):
        await client.runs.create(tid, "echo", input={"messages": []}, multitask_strategy="reject")
    assert (await wait_run(client, tid, first["run_id"]))["status"] == "success"


async def test_multitask_interrupt_stops_the_running_run_and_runs_the_new_one(client, thread):
    tid = thread["thread_id"]
    first = await running_slow(client, tid)
    second = await client.runs.create(tid, "slow", input={"delay_ms": 10}, multitask_strategy="interrupt")
    assert (await wait_run(client, tid, second["run_id"]))["status"] == "success"
    assert (await client.threads.get_state(tid))["values"] == {"delay_ms": 10, "done": True}
    displaced = await wait_run(client, tid, first["run_id"])
    assert_cancelled(displaced)
    assert displaced["cancel_reason"] == f"superseded by run {second['run_id']} (multitask_strategy=interrupt)"


async def test_multitask_rollback_deletes_the_running_run(client, thread):
    tid = thread["thread_id"]
    first = await running_slow(client, tid)
    second = await client.runs.create(tid, "slow", input={"delay_ms": 10}, multitask_strategy="rollback")
    assert (await wait_run(client, tid, second["run_id"]))["status"] == "success"
    await eventually(lambda: client.runs.list(tid), lambda runs: [r["run_id"] for r in runs] == [second["run_id"]])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, first["run_id"])


async def test_multitask_enqueue_runs_one_after_the_other(client, thread):
    tid = thread["thread_id"]
    first = await running_slow(client, tid, delay_ms=1000)
    assert (await client.threads.get(tid))["status"] == "busy"
    second = await client.runs.create(tid, "slow", input={"delay_ms": 20}, multitask_strategy="enqueue")
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "pending"
    assert (await wait_run(client, tid, first["run_id"]))["status"] == "success"
    assert (await wait_run(client, tid, second["run_id"]))["status"] == "success"
    assert (await client.threads.get_state(tid))["values"]["delay_ms"] == 20


async def test_stream_with_on_disconnect_cancel_cancels_when_the_client_leaves(client, thread):
    tid = thread["thread_id"]
    stream = client.runs.stream(tid, "slow", input={"delay_ms": 3000}, on_disconnect="cancel")
    first = await stream.__anext__()
    assert first.event == "metadata"
    await stream.aclose()
    run = await wait_run(client, tid, first.data["run_id"])
    assert_cancelled(run)
    assert run["cancel_reason"] == DISCONNECTED
