"""Python LangGraph versions of the example graphs the server ships (same ids, same behaviour).

Serve them with the reference server to compare behaviour side by side:
    pip install "langgraph-cli[inmem]" && langgraph dev --no-browser --port 8130
(run from this folder; langgraph.json lists the graphs). Where the reference server and
SPEC.md disagree, SPEC.md wins. This server serves them through its Python bridge too:
the bridge's tests and scripts/test's reference-graph passes read them from here.
"""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any, Optional

from typing_extensions import TypedDict

from langgraph.config import get_store, get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


# --------------------------------------------------------------------- echo
class EchoState(TypedDict, total=False):
    messages: Annotated[list, operator.add]


def _content(msg: Any) -> Any:
    if isinstance(msg, dict):
        return msg.get("content")
    return getattr(msg, "content", msg)


def echo_node(state: EchoState) -> dict:
    msgs = state.get("messages") or []
    last = _content(msgs[-1]) if msgs else ""
    return {"messages": [{"type": "ai", "content": f"echo: {last}"}]}


_b = StateGraph(EchoState)
_b.add_node("echo", echo_node)
_b.add_edge(START, "echo")
_b.add_edge("echo", END)
echo = _b.compile()


# -------------------------------------------------------------------- steps
class StepsState(TypedDict, total=False):
    n: Optional[int]
    count: int
    log: Annotated[list, operator.add]


def step_node(state: StepsState) -> dict:
    k = (state.get("count") or 0) + 1
    get_stream_writer()({"step": k})
    return {"count": k, "log": [f"step {k}"]}


def _steps_route(state: StepsState) -> str:
    n = state.get("n")
    if n is None:
        n = 3
    return "step" if (state.get("count") or 0) < n else END


_b = StateGraph(StepsState)
_b.add_node("step", step_node)
_b.add_edge(START, "step")
_b.add_conditional_edges("step", _steps_route, ["step", END])
steps = _b.compile()


# ----------------------------------------------------------------- approval
class ApprovalState(TypedDict, total=False):
    topic: str
    draft: str
    status: str


def draft_node(state: ApprovalState) -> dict:
    return {"draft": f"draft for {state.get('topic')}"}


def review_node(state: ApprovalState) -> dict:
    answer = interrupt({"question": "approve?", "draft": state.get("draft")})
    return {"status": "approved" if answer is True else "rejected"}


_b = StateGraph(ApprovalState)
_b.add_node("draft", draft_node)
_b.add_node("review", review_node)
_b.add_edge(START, "draft")
_b.add_edge("draft", "review")
_b.add_edge("review", END)
approval = _b.compile()


# --------------------------------------------------------------------- fail
class FailState(TypedDict, total=False):
    messages: Annotated[list, operator.add]


def explode_node(state: FailState) -> dict:
    try:
        raise RuntimeError("root cause")
    except RuntimeError as cause:
        raise ValueError("boom") from cause


_b = StateGraph(FailState)
_b.add_node("explode", explode_node)
_b.add_edge(START, "explode")
_b.add_edge("explode", END)
fail = _b.compile()


# --------------------------------------------------------------------- slow
class SlowState(TypedDict, total=False):
    delay_ms: Optional[int]
    done: bool


def sleep_node(state: SlowState) -> dict:
    delay = state.get("delay_ms")
    if delay is None:
        delay = 1000
    time.sleep(delay / 1000.0)
    return {"done": True}


_b = StateGraph(SlowState)
_b.add_node("sleep", sleep_node)
_b.add_edge(START, "sleep")
_b.add_edge("sleep", END)
slow = _b.compile()


# -------------------------------------------------------------------- reply
class ReplyState(TypedDict, total=False):
    text: str
    replied: bool


def reply_node(state: ReplyState) -> dict:
    # Reply declaration on the custom stream. The service captures the last
    # declaration into the webhook body's `reply` field (spec-only feature).
    get_stream_writer()({"reply": {"text": f"reply to {state.get('text')}"}})
    return {"replied": True}


_b = StateGraph(ReplyState)
_b.add_node("reply", reply_node)
_b.add_edge(START, "reply")
_b.add_edge("reply", END)
reply = _b.compile()


# ------------------------------------------------------------------- memory
class MemoryState(TypedDict, total=False):
    user: str
    key: str
    text: str
    count: int


def remember_node(state: MemoryState) -> dict:
    store = get_store()
    ns = ("memories", state["user"])
    store.put(ns, state["key"], {"text": state.get("text")})
    items = store.search(ns, limit=1000)
    return {"count": len(items)}


_b = StateGraph(MemoryState)
_b.add_node("remember", remember_node)
_b.add_edge(START, "remember")
_b.add_edge("remember", END)
memory = _b.compile()
