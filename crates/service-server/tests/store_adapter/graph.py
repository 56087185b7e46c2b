"""A graph using the long-term store as LangGraph graphs do; it reports what the store
answered and what the adapter (the same worker's CountingStore) holds."""

import sys

from typing_extensions import TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    report: dict


async def remember(state: State) -> dict:
    store = get_store()
    await store.aput(("notes", "graph"), "from-graph", {"text": "written by a run", "n": 10})
    found = await store.asearch(("notes",), filter={"n": {"$gte": 2}}, limit=50)
    namespaces = await store.alist_namespaces(prefix=("notes",))
    got = await store.aget(("notes", "u1"), "a")
    adapter = sys.modules["service_store_adapter"].store
    held = sorted(item.key for item in adapter.search(("notes",), limit=100))
    return {
        "report": {
            "found": [item.key for item in found],
            "namespaces": [list(namespace) for namespace in namespaces],
            "got": got.value if got else None,
            "held": held,
            "seen": dict(adapter.seen),
        }
    }


builder = StateGraph(State)
builder.add_node("remember", remember)
builder.add_edge(START, "remember")
builder.add_edge("remember", END)
graph = builder.compile()
