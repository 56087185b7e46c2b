"""Every surface of a failed run (the `fail` graph raises ValueError("boom") from RuntimeError("root cause"))."""

import json

import pytest

from conftest import collect, events, spec_only, wait_run, wait_thread_idle


def cause_messages(err: dict) -> list:
    out, cur = [], err.get("cause")
    while isinstance(cur, dict):
        out.append(cur.get("message"))
        cur = cur.get("cause")
    return out


async def test_stream_ends_with_one_error_frame(client, thread):
    parts = await collect(client.runs.stream(thread["thread_id"], "fail", input={}, stream_mode=["values", "updates"]))
    assert events(parts).count("error") == 1
    assert parts[-1].event == "error"
    err = parts[-1].data
    assert err["error"] == "ValueError"
    assert err["message"] == "boom"
    with spec_only("SPEC RunError: error frame carries `name` equal to `error` and the cause chain"):
        assert err["name"] == err["error"]
        assert "root cause" in cause_messages(err)


async def test_wait_body_carries_error_object_and_sdk_raises(client, thread):
    tid = thread["thread_id"]
    body = await client.runs.wait(tid, "fail", input={}, raise_error=False)
    err = body["__error__"]
    assert isinstance(err, dict)  # an object, not a double-encoded string
    assert err["error"] == "ValueError" and err["message"] == "boom"
    with pytest.raises(Exception, match="ValueError: boom"):
        await client.runs.wait(tid, "fail", input={})
    with spec_only("SPEC RunError in the wait body: `name` and the cause chain"):
        assert err["name"] == "ValueError"
        assert "root cause" in cause_messages(err)


async def test_failed_run_row_has_status_error_and_error(client, thread):
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "fail", input={})
    done = await wait_run(client, tid, run["run_id"])
    assert done["status"] == "error"
    with spec_only("SPEC A1: the run row carries `error` (RunError) on failure"):
        err = done["error"]
        assert err["error"] == "ValueError" and err["name"] == "ValueError"
        assert err["message"] == "boom"
        assert "root cause" in cause_messages(err)


async def test_thread_of_a_failed_run_is_in_error_with_the_message(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "fail", input={}, raise_error=False)
    t = await wait_thread_idle(client, tid)
    assert t["status"] == "error"
    assert await client.threads.count(metadata=thread["metadata"], status="error") == 1
    with spec_only("SPEC A10: thread.error is the message string (the peer sends an object); metadata.error kept"):
        assert t["error"] == "boom"
        assert t["metadata"].get("error")


async def test_failed_task_error_in_state_is_json_encoded_run_error(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "fail", input={}, raise_error=False)
    state = await client.threads.get_state(tid)
    assert state["next"] == ["explode"]
    [task] = state["tasks"]
    assert task["name"] == "explode" and task["error"]
    with spec_only("SPEC A11: task error is a JSON-encoded RunError (the peer sends a repr)"):
        assert json.loads(task["error"])["message"] == "boom"


async def test_a_later_successful_run_clears_the_thread_error(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "fail", input={}, raise_error=False)
    assert (await wait_thread_idle(client, tid))["status"] == "error"

    failed_run = (await client.runs.list(tid))[0]
    result = await client.runs.wait(tid, "echo", input={"messages": [{"type": "human", "content": "ok"}]})
    assert result["messages"][-1]["content"] == "echo: ok"
    t = await wait_thread_idle(client, tid)
    assert t["status"] == "idle"
    assert not t.get("error")
    assert (await client.runs.get(tid, failed_run["run_id"]))["status"] == "error"  # the run keeps its own error
