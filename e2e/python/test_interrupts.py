"""Interrupt and resume with the `approval` graph."""

from langgraph_sdk.schema import Command

from conftest import GRAPHS, collect, events, review_request, spec_only

# LangGraph.js refuses a node named like a state key: the JS graph's `draft` node is
# `drafting` (examples/js-graphs/graphs.ts).
DRAFT_NODE = "drafting" if GRAPHS == "js" else "draft"


async def pause(client, tid):
    result = await client.runs.wait(tid, "approval", input={"topic": "cats"})
    assert "__interrupt__" in result
    return result


async def test_wait_returns_values_plus_interrupt_when_the_graph_pauses(client, thread):
    result = await pause(client, thread["thread_id"])
    assert result["draft"] == "draft for cats"
    [intr] = result["__interrupt__"]
    assert intr["value"] == review_request("draft for cats")
    assert intr["id"]


async def test_paused_thread_is_interrupted_with_next_review_and_interrupts_by_task(client, thread):
    tid = thread["thread_id"]
    await pause(client, tid)
    state = await client.threads.get_state(tid)
    assert state["next"] == ["review"]
    [task] = state["tasks"]
    assert task["name"] == "review"
    assert task["interrupts"][0]["value"]["question"] == "approve?"

    t = await client.threads.get(tid)
    assert t["status"] == "interrupted"
    assert list(t["interrupts"]) == [task["id"]]  # keyed by task id
    [intr] = t["interrupts"][task["id"]]
    assert intr["value"] == review_request("draft for cats")
    assert intr["id"]
    assert await client.threads.count(metadata=thread["metadata"], status="interrupted") == 1


async def test_paused_run_settles_and_is_not_an_error(client, thread):
    tid = thread["thread_id"]
    await pause(client, tid)
    [run] = await client.runs.list(tid)
    assert run["status"] == "success"  # the run ended; the thread carries the pause


async def test_resume_true_approves(client, thread):
    tid = thread["thread_id"]
    await pause(client, tid)
    result = await client.runs.wait(tid, "approval", command=Command(resume=True))
    assert result["status"] == "approved"
    assert "__interrupt__" not in result
    t = await client.threads.get(tid)
    assert t["status"] == "idle"
    assert t["interrupts"] == {}
    assert (await client.threads.get_state(tid))["next"] == []


async def test_resume_false_rejects(client, thread):
    tid = thread["thread_id"]
    await pause(client, tid)
    result = await client.runs.wait(tid, "approval", command={"resume": False})
    assert result["status"] == "rejected"


async def test_stream_reports_the_interrupt_in_updates_and_values(client, thread):
    parts = await collect(client.runs.stream(thread["thread_id"], "approval", input={"topic": "dogs"},
                                             stream_mode=["values", "updates"]))
    updates = [p.data for p in parts if p.event == "updates"]
    assert {DRAFT_NODE: {"draft": "draft for dogs"}} in updates
    intr_update = next(u for u in updates if "__interrupt__" in u)
    assert intr_update["__interrupt__"][0]["value"]["question"] == "approve?"
    assert parts[-1].event == "values" and "__interrupt__" in parts[-1].data
    assert "error" not in events(parts)


async def test_resume_by_stream_with_a_command(client, thread):
    tid = thread["thread_id"]
    await pause(client, tid)
    parts = await collect(client.runs.stream(tid, "approval", command={"resume": True}, stream_mode="updates"))
    [review] = [p.data["review"] for p in parts if "review" in (p.data or {})]
    assert review["status"] == "approved"
    assert [m["content"] for m in review["messages"]] == ["approved: draft for cats"]


async def test_interrupt_before_pauses_and_null_input_continues(client, thread):
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 2}, interrupt_before=["step"])
    state = await client.threads.get_state(tid)
    assert state["next"] == ["step"]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    result = await client.runs.wait(tid, "steps", input=None)
    assert result["count"] == 2


async def test_approval_answers_the_chat_uis_decisions(client):
    """Agent Chat UI answers the HITL-shaped interrupt with `{"decisions": [...]}`."""
    blocks = {"messages": [{"type": "human", "content": [{"type": "text", "text": "cats"}]}]}
    edit = {"type": "edit", "edited_action": {"name": "publish", "args": {"draft": "better"}}}
    for decision, status, draft in [
        ({"type": "approve"}, "approved", "draft for cats"),
        (edit, "approved", "better"),
        ({"type": "reject", "message": "no"}, "rejected", "draft for cats"),
    ]:
        tid = (await client.threads.create())["thread_id"]
        paused = await client.runs.wait(tid, "approval", input=blocks)
        assert paused["__interrupt__"][0]["value"] == review_request("draft for cats")
        result = await client.runs.wait(tid, "approval", command={"resume": {"decisions": [decision]}})
        assert (result["status"], result["draft"]) == (status, draft)
        assert [(m["type"], m["content"]) for m in result["messages"]][-1] == ("ai", f"{status}: {draft}")
