"""Subgraphs with the `nested` graph: `plan`, then `approval` as subgraph node `review`
(its interrupt pauses `nested`), then `publish`."""

from langgraph_sdk.schema import Command

from conftest import collect, review_request, rust_examples_only, wait_run

pytestmark = rust_examples_only


async def pause(client, tid):
    result = await client.runs.wait(tid, "nested", input={"topic": "cats"})
    assert result["__interrupt__"][0]["value"] == review_request("draft for cats")
    return result


async def test_stream_subgraphs_sends_the_subgraphs_events_named_mode_bar_namespace(client, thread):
    tid = thread["thread_id"]
    parts = await collect(
        client.runs.stream(tid, "nested", input={"topic": "cats"}, stream_mode=["updates"], stream_subgraphs=True)
    )
    nested = [p for p in parts if p.event.startswith("updates|review:")]
    assert [p.data for p in nested][:1] == [{"draft": {"draft": "draft for cats"}}]
    namespace = nested[0].event.split("|", 1)[1]
    state = await client.threads.get_state(tid)
    assert namespace == f"review:{state['tasks'][0]['id']}"
    assert {"plan": {"log": ["plan cats"]}} in [p.data for p in parts if p.event == "updates"]

    plain = await collect(client.runs.stream(None, "nested", input={"topic": "dogs"}, stream_mode=["updates"]))
    assert not [p for p in plain if "|" in p.event], "without stream_subgraphs only the graph's own events"


async def test_state_with_subgraphs_shows_the_subgraphs_pause_and_the_parent_resumes_it(client, thread):
    tid = thread["thread_id"]
    await pause(client, tid)
    thread_now = await client.threads.get(tid)
    assert thread_now["status"] == "interrupted"
    state = await client.threads.get_state(tid, subgraphs=True)
    assert state["next"] == ["review"]
    [task] = state["tasks"]
    inner = task["state"]
    assert inner["next"] == ["review"]
    assert inner["values"]["draft"] == "draft for cats"
    assert inner["checkpoint"]["checkpoint_ns"] == f"review:{task['id']}"
    assert inner["interrupts"][0]["id"] == state["interrupts"][0]["id"]
    assert (await client.threads.get_state(tid))["tasks"][0]["state"] is None

    # The subgraph's own checkpoints, read through its namespace.
    child = {"thread_id": tid, "checkpoint_ns": inner["checkpoint"]["checkpoint_ns"]}
    history = await client.threads.get_history(tid, limit=10, checkpoint=child)
    assert history[0]["next"] == ["review"]
    assert history[-1]["metadata"]["source"] == "input"
    assert all(h["checkpoint"]["checkpoint_ns"] == child["checkpoint_ns"] for h in history)
    assert (await client.threads.get_state(tid, checkpoint=child))["values"]["draft"] == "draft for cats"

    final = await client.runs.wait(tid, "nested", command=Command(resume=True))
    assert final["status"] == "approved"
    assert final["log"] == ["plan cats", "publish approved"]
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_a_subgraph_interrupt_is_answered_by_id_from_the_parent(client, thread):
    tid = thread["thread_id"]
    result = await pause(client, tid)
    interrupt_id = result["__interrupt__"][0]["id"]
    run = await client.runs.create(tid, "nested", command=Command(resume={interrupt_id: False}))
    await wait_run(client, tid, run["run_id"])
    assert (await client.threads.get_state(tid))["values"]["status"] == "rejected"


async def test_a_paused_subgraphs_state_is_edited_through_its_namespace(client, thread):
    tid = thread["thread_id"]
    await pause(client, tid)
    state = await client.threads.get_state(tid, subgraphs=True)
    child = state["tasks"][0]["state"]["checkpoint"]
    written = await client.threads.update_state(tid, {"draft": "edited draft"}, as_node="draft", checkpoint=child)
    assert written["checkpoint"]["checkpoint_ns"] == child["checkpoint_ns"]
    final = await client.runs.wait(tid, "nested", command=Command(resume=True))
    assert (final["draft"], final["status"]) == ("edited draft", "approved")


async def test_assistant_subgraphs_and_xray_drawing(client):
    listed = await client.assistants.get_subgraphs("nested")
    assert list(listed) == ["review"]
    assert "draft" in listed["review"]["state_schema"]["properties"]
    assert list(await client.assistants.get_subgraphs("nested", namespace="review")) == ["review"]
    assert await client.assistants.get_subgraphs("nested", namespace="other", recurse=True) == {}
    flat = await client.assistants.get_graph("nested")
    assert "review" in [node["id"] for node in flat["nodes"]]
    drawn = await client.assistants.get_graph("nested", xray=True)
    ids = [node["id"] for node in drawn["nodes"]]
    assert ids == ["__start__", "plan", "review:draft", "review:review", "publish", "__end__"]
    edges = {(edge["source"], edge["target"]) for edge in drawn["edges"]}
    assert {("plan", "review:draft"), ("review:draft", "review:review"), ("review:review", "publish")} <= edges
