"""Store adapters for crates/service-server/tests/store_adapter.rs: LangGraph's own
InMemoryStore keeps the items, and counts the operations that reach it."""

from langgraph.store.memory import InMemoryStore


class CountingStore(InMemoryStore):
    """InMemoryStore, counting each kind of operation it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = {}

    async def abatch(self, ops):
        for op in ops:
            kind = type(op).__name__
            self.seen[kind] = self.seen.get(kind, 0) + 1
        return await super().abatch(ops)


store = CountingStore()

# Not a store: the boot must refuse it.
not_a_store = {"put": "nothing"}


class DownStore(InMemoryStore):
    """A store whose backend is down: every operation raises."""

    async def abatch(self, ops):
        raise ConnectionError("the notes database is down")


down = DownStore()
