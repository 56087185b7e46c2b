"""The run streams of the example graphs frame by frame as LangGraph's own loop makes
them: this suite passes unchanged against the built-in (Rust) graphs and against the
Python reference graphs served through the bridge, which run LangGraph itself. It pins
LangGraph Python's frames, so the JS graphs' pass skips it: LangGraph.js serializes
messages with fewer fields, names the approval graph's first node `drafting`, and
writes no fork checkpoint when nothing is left to run.

- a new thread's list channels start empty (`messages: []`);
- a resumed run first shows the state it resumes;
- no `values` frame follows an input that writes no state key;
- interrupts in frames and wait bodies carry `response_schema`;
- a run without input from an addressed checkpoint starts its branch with a fork
  checkpoint, even when nothing is left to run.
"""

import pytest

from conftest import GRAPHS, review_request

pytestmark = pytest.mark.skipif(
    GRAPHS == "js", reason="pins LangGraph Python's frames; LangGraph.js frames differ (see the module's doc)"
)

IDS = ("id", "run_id", "thread_id", "checkpoint_id", "created_at")


def shape(value):
    """A frame without the ids that differ from run to run."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items() if k not in IDS}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return value


async def frames(client, thread_id, assistant_id, **kwargs):
    parts = client.runs.stream(thread_id, assistant_id, stream_mode=["values", "updates"], **kwargs)
    return [(p.event, shape(p.data)) for p in [p async for p in parts] if p.event in ("values", "updates")]


def ai(content):
    return {
        "content": content,
        "additional_kwargs": {},
        "response_metadata": {},
        "type": "ai",
        "name": None,
        "tool_calls": [],
        "invalid_tool_calls": [],
        "usage_metadata": None,
    }


async def test_an_interrupted_run_and_its_resume_stream_as_langgraph_does(client):
    thread_id = (await client.threads.create())["thread_id"]
    asked = shape([{"value": review_request("draft for cats"), "id": "", "response_schema": None}])
    start = {"topic": "cats", "messages": []}
    drafted = {**start, "draft": "draft for cats"}
    assert await frames(client, thread_id, "approval", input={"topic": "cats"}) == [
        ("values", start),
        ("updates", {"draft": {"draft": "draft for cats"}}),
        ("values", drafted),
        ("updates", {"__interrupt__": asked}),
        ("values", {**drafted, "__interrupt__": asked}),
    ]
    reply = {"content": "approved: draft for cats", "type": "ai"}
    assert await frames(client, thread_id, "approval", command={"resume": True}) == [
        ("values", drafted),
        ("updates", {"review": {"status": "approved", "messages": [reply]}}),
        ("values", {**drafted, "status": "approved", "messages": [ai("approved: draft for cats")]}),
    ]


async def test_a_wait_that_pauses_lists_the_interrupt_with_its_response_schema(client):
    thread_id = (await client.threads.create())["thread_id"]
    result = await client.runs.wait(thread_id, "approval", input={"topic": "x"})
    [interrupt] = result["__interrupt__"]
    assert sorted(interrupt) == ["id", "response_schema", "value"]
    assert interrupt["response_schema"] is None


async def test_an_input_of_no_state_key_shows_no_empty_state(client):
    thread_id = (await client.threads.create())["thread_id"]
    assert await frames(client, thread_id, "echo", input={"other": 1}) == [
        ("updates", {"echo": {"messages": [{"type": "ai", "content": "echo: "}]}}),
        ("values", {"messages": [ai("echo: ")]}),
    ]


async def test_a_run_without_input_from_a_checkpoint_forks_it_even_with_nothing_left(client):
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "echo", input={"messages": [{"type": "human", "content": "a"}]})
    history = await client.threads.get_history(thread_id)
    assert [h["metadata"]["source"] for h in history] == ["loop", "loop", "input"]
    head = history[0]

    shown = await frames(client, thread_id, "echo", checkpoint=head["checkpoint"])
    assert shown == [("values", shape(head["values"]))]
    history = await client.threads.get_history(thread_id)
    fork = history[0]
    assert (fork["metadata"]["source"], fork["metadata"]["step"]) == ("fork", 2)
    assert fork["parent_checkpoint"]["checkpoint_id"] == head["checkpoint"]["checkpoint_id"]
    assert fork["values"] == head["values"] and fork["next"] == []

    # From the checkpoint before the answer: a fork, then the node runs on it.
    before = next(h for h in history if h["next"] == ["echo"])
    await frames(client, thread_id, "echo", checkpoint=before["checkpoint"])
    history = await client.threads.get_history(thread_id)
    assert [(h["metadata"]["source"], h["metadata"]["step"], h["next"]) for h in history[:2]] == [
        ("loop", 2, []),
        ("fork", 1, ["echo"]),
    ]
    assert history[1]["parent_checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
