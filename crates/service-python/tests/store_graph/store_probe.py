"""A graph that uses LangGraph's store API the way memory-using agents do, and reports
what it got back, for crates/service-python/tests/store.rs."""

import asyncio

from typing_extensions import TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import PutOp

ITEMS = 1500
NAMESPACES = 1200


class State(TypedDict, total=False):
    op: str
    report: dict


async def probe(state: State) -> dict:
    store = get_store()
    if state["op"] == "fill":
        await store.abatch(
            [
                PutOp(
                    ("docs", f"g{i % NAMESPACES}"),
                    f"k{i}",
                    {"n": i, "kind": "even" if i % 2 == 0 else "odd", "text": "the cat sat on the mat" if i == 7 else f"note {i}"},
                )
                for i in range(ITEMS)
            ]
        )
        await store.aput(("docs", "g0"), "unindexed", {"n": -1, "text": "the cat sat on the mat"}, index=False)
        return {"report": {}}
    if state["op"] == "ttl":
        # LangGraph's put: no ttl is the store's default, None never expires.
        await store.aput(("ttl",), "default", {"n": 1})
        await store.aput(("ttl",), "never", {"n": 2}, ttl=None)
        await store.aput(("ttl",), "thirty", {"n": 3}, ttl=30)
        await asyncio.to_thread(store.put, ("ttl",), "never_sync", {"n": 4}, ttl=None)
        return {"report": {}}
    if state["op"] == "read":
        # Without refresh_ttl: the server's refresh_on_read decides.
        got = await store.aget(("ttl",), "default")
        return {"report": {"read": got is not None}}

    everything = await store.asearch(("docs",), limit=5000)
    late = await store.asearch(("docs",), filter={"n": {"$gte": 1000}}, limit=5000)
    even_after_100 = await store.asearch(("docs",), filter={"kind": "even"}, limit=5000, offset=100)
    ranked = await store.asearch(("docs",), query="cat on a mat", limit=3)
    ranked_all = await store.asearch(("docs",), query="cat on a mat", limit=5000)
    namespaces = await store.alist_namespaces(prefix=("docs",), limit=5000)
    roots = await store.alist_namespaces(max_depth=1)
    some = await store.alist_namespaces(prefix=("docs",), limit=5, offset=10)
    got = await store.aget(("docs", "g7"), "k7")
    return {
        "report": {
            "everything": len(everything),
            "late": sorted(item.value["n"] for item in late) == list(range(1000, ITEMS)),
            "even_after_100": len(even_after_100),
            "ranked": [[item.key, item.score] for item in ranked],
            "unindexed_last": ranked_all[-1].key == "unindexed" and ranked_all[-1].score is None,
            "namespaces": len(namespaces),
            "roots": [list(namespace) for namespace in roots],
            "some": len(some),
            "got": got.value if got else None,
        }
    }


builder = StateGraph(State)
builder.add_node("probe", probe)
builder.add_edge(START, "probe")
builder.add_edge("probe", END)
graph = builder.compile()
