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
from langgraph.graph.message import add_messages
from langgraph.types import interrupt


# --------------------------------------------------------------------- echo
class EchoState(TypedDict, total=False):
    messages: Annotated[list, add_messages]


def _text(msg: Any) -> str:
    """A message's text: its content string, or its text blocks joined."""
    content = msg.get("content") if isinstance(msg, dict) else getattr(msg, "content", msg)
    if isinstance(content, list):
        return "".join(
            block if isinstance(block, str) else block.get("text", "")
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        )
    return "" if content is None else str(content)


def echo_node(state: EchoState) -> dict:
    msgs = state.get("messages") or []
    last = _text(msgs[-1]) if msgs else ""
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
    messages: Annotated[list, add_messages]


def draft_node(state: ApprovalState) -> dict:
    topic = state.get("topic")
    if topic is None and state.get("messages"):
        topic = _text(state["messages"][-1])
    return {"draft": f"draft for {topic}"}


def review_node(state: ApprovalState) -> dict:
    # The ask also in the shape of LangChain's human-in-the-loop middleware, which
    # Agent Chat UI renders and answers with {"decisions": [...]}.
    draft = state.get("draft")
    answer = interrupt(
        {
            "question": "approve?",
            "draft": draft,
            "action_requests": [
                {"name": "publish", "args": {"draft": draft}, "description": "Publish this draft?"}
            ],
            "review_configs": [
                {"action_name": "publish", "allowed_decisions": ["approve", "edit", "reject"]}
            ],
        }
    )
    status, decided = "rejected", draft
    if answer is True:
        status = "approved"
    elif isinstance(answer, dict) and answer.get("decisions"):
        decision = answer["decisions"][0]
        if decision.get("type") == "approve":
            status = "approved"
        elif decision.get("type") == "edit":
            status = "approved"
            edited = (decision.get("edited_action") or {}).get("args", {}).get("draft")
            decided = draft if edited is None else edited
    update = {"status": status, "messages": [{"type": "ai", "content": f"{status}: {decided}"}]}
    if decided != draft:
        update["draft"] = decided
    return update


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
