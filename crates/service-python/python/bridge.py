"""The Python side of the graph bridge: one worker process of service-server.

The server starts this file with the interpreter named by SERVICE_PYTHON and talks to
it over the process's stdin and a duplicate of its original stdout, one JSON message
per line (docs/python-graphs.md, "The worker protocol"). Whatever the user's graphs
print goes to stderr, which the server logs.

Messages from the server:
  {"id": n, "op": <one of OPS>, ...}      a request; answered by frames with the same id
  {"id": n, "op": "cancel"}               cancels request n
  {"reply": m, "ok": value} | {"reply": m, "err": text}   the answer to call m
Messages to the server:
  {"hello": {...}}                        first line: versions, then the graphs' load
  {"id": n, "chunk": [mode, namespace, data]}   a stream frame of request n
  {"id": n, "node": {"task", "name", "ns", "end"?, "error"?}}   a node's start or end
                                          (traced stream requests only)
  {"id": n, "ok": value} | {"id": n, "err": RunError} | {"id": n, "cancelled": true}
                                          the end of request n
  {"call": m, "id": n, "op": "cp.*" | "store.*", ...}   checkpointer and store calls,
                                          made for request n
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import enum
import importlib
import importlib.util
import inspect
import json
import os
import sys
import threading
import traceback
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

PROTOCOL = 1
# How long writes wait for the checkpoint they belong to (see ServerSaver.known).
WRITES_WAIT_S = 5.0

# The protocol stream is a copy of the original stdout; fd 1 then points at stderr so
# a print() in a graph cannot corrupt it.
_protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_write_lock = threading.Lock()

try:
    import orjson

    def _dumps(value: Any) -> bytes:
        return orjson.dumps(
            value, default=_plain, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
        )
except ImportError:  # pragma: no cover - orjson ships with langsmith

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, default=_plain, separators=(",", ":")).encode()


def _plain(value: Any) -> Any:
    """JSON for what graphs put in state and frames (messages, pydantic models, ...)."""
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return value.model_dump()
    if hasattr(value, "to_json") and callable(value.to_json) and hasattr(value, "lc_id"):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if _is_interrupt(value):
        return {"value": value.value, "id": value.id}
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, BaseException):
        return {"error": type(value).__name__, "message": str(value)}
    if hasattr(value, "_asdict"):
        return value._asdict()
    if hasattr(value, "dict") and callable(value.dict):
        return value.dict()
    return repr(value)


def _is_interrupt(value: Any) -> bool:
    return type(value).__name__ == "Interrupt" and hasattr(value, "value")


def send(message: dict) -> None:
    data = _dumps(message) + b"\n"
    with _write_lock:
        _protocol_out.write(data)


def run_error(error: BaseException, depth: int = 0) -> dict:
    """A RunError for the server: type, message, stack, and the cause chain."""
    out = {
        "error": type(error).__name__,
        "message": str(error),
        "stack": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
    }
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None and depth < 8:
        out["cause"] = run_error(cause, depth + 1)
    return out


# ----------------------------------------------------------------- calls to the server

class Calls:
    """Calls from Python to the server's checkpointer and store, answered by `reply`;
    each is one variant of `Call` in crates/service-python/src/calls.rs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.next = 0
        self.waiting: dict[int, asyncio.Future] = {}

    async def call(self, request: int | None, op: str, **args: Any) -> Any:
        self.next += 1
        call_id = self.next
        future = self.loop.create_future()
        self.waiting[call_id] = future
        send({"call": call_id, "id": request, "op": op, **args})
        return await future

    def answer(self, message: dict) -> None:
        future = self.waiting.pop(message["reply"], None)
        if future is None or future.done():
            return
        if "err" in message:
            future.set_exception(RuntimeError(message["err"]))
        else:
            future.set_result(message.get("ok"))


def from_thread(coro: Any) -> Any:
    """Runs `coro` on the worker's event loop from a thread (a sync node using the
    store, or LangGraph's sync API) and waits for it."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is CALLS.loop:
        coro.close()
        raise RuntimeError("a sync store or checkpointer method was called on the event loop; use the async one")
    return asyncio.run_coroutine_threadsafe(coro, CALLS.loop).result()


CALLS: Calls
# The request a piece of code runs for (so a call names the run whose store it uses).
REQUEST: ContextVar[int | None] = ContextVar("service_request", default=None)


# ------------------------------------------------------------------------ the saver

# The run keys the server puts in a run's config metadata. LangGraph 1.x no longer
# copies them into its checkpoints' metadata; the server finds a run's checkpoints by
# them (rollback, and refusing a stopped run's late checkpoints), so the saver does.
RUN_KEYS = ("run_id", "thread_id", "graph_id", "assistant_id", "run_attempt")


def _run_keys(config: dict) -> dict:
    run = config.get("metadata") or {}
    return {key: run[key] for key in RUN_KEYS if key in run}


def _serializer():
    """LangGraph's serializer, with langgraph.json's `checkpointer.serde` settings
    (allowed modules, pickle fallback) when the server passes them."""
    settings = os.environ.get("SERVICE_CHECKPOINTER_SERDE")
    if not settings:
        return None
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    def modules(value: Any) -> Any:
        return [tuple(path) for path in value] if isinstance(value, list) else value

    options = json.loads(settings)
    kwargs: dict[str, Any] = {"pickle_fallback": bool(options.get("pickle_fallback", False))}
    for key in ("allowed_json_modules", "allowed_msgpack_modules"):
        if key in options:
            kwargs[key] = modules(options[key])
    return JsonPlusSerializer(**kwargs)


def _saver_class():
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        CheckpointTuple,
    )

    def coordinates(config: dict) -> tuple[str, str, str | None]:
        conf = config.get("configurable", {})
        return conf["thread_id"], conf.get("checkpoint_ns", "") or "", conf.get("checkpoint_id")

    class ServerSaver(BaseCheckpointSaver):
        """Keeps checkpoints in the server's own checkpointer (memory or PostgreSQL).

        Bodies and written values are stored as the serializer's typed bytes; metadata
        as JSON, so the server can filter history and roll back runs by it.
        """

        def __init__(self) -> None:
            super().__init__(serde=_serializer())
            # Checkpoints this process knows the server has. LangGraph stores a
            # checkpoint in the background, after the one before it, and may record
            # the next step's writes against it first; the server refuses writes
            # against a checkpoint it does not have, so those writes wait for it.
            self.known: OrderedDict[tuple[str, str, str], asyncio.Event] = OrderedDict()

        def _event(self, key: tuple[str, str, str]) -> asyncio.Event:
            event = self.known.get(key)
            if event is None:
                event = self.known[key] = asyncio.Event()
                while len(self.known) > 100_000:
                    self.known.popitem(last=False)
            return event

        def _stored(self, config: dict) -> None:
            conf = config["configurable"]
            self._event((conf["thread_id"], conf.get("checkpoint_ns", "") or "", conf["checkpoint_id"])).set()

        def _typed(self, value: Any) -> dict:
            kind, data = self.serde.dumps_typed(value)
            return {"t": kind, "b": base64.b64encode(data).decode()}

        def _untyped(self, stored: dict) -> Any:
            return self.serde.loads_typed((stored["t"], base64.b64decode(stored["b"])))

        def _tuple(self, stored: dict) -> CheckpointTuple:
            config = {"configurable": stored["config"]}
            parent = stored.get("parent_config")
            writes = []
            for write in stored.get("pending_writes", []):
                idx, _, channel = write["channel"].partition(":")
                value = write["value"]
                writes.append(
                    (value.get("p", ""), write["task_id"], int(idx), channel, self._untyped(value))
                )
            writes.sort(key=lambda w: (w[0], w[1], w[2]))
            return CheckpointTuple(
                config=config,
                checkpoint=self._untyped(stored["checkpoint"]),
                metadata=stored.get("metadata") or {},
                parent_config={"configurable": parent} if parent else None,
                pending_writes=[(task, channel, value) for _, task, _, channel, value in writes],
            )

        async def aget_tuple(self, config: dict) -> CheckpointTuple | None:
            thread, ns, checkpoint = coordinates(config)
            stored = await CALLS.call(
                REQUEST.get(), "cp.get", thread_id=thread, checkpoint_ns=ns, checkpoint_id=checkpoint
            )
            if stored is None:
                return None
            found = self._tuple(stored)
            self._stored(found.config)
            return found

        async def alist(
            self,
            config: dict | None,
            *,
            filter: dict | None = None,
            before: dict | None = None,
            limit: int | None = None,
        ) -> AsyncIterator[CheckpointTuple]:
            if config is None:
                raise NotImplementedError("listing checkpoints needs a thread_id")
            thread, ns, checkpoint = coordinates(config)
            stored = await CALLS.call(
                REQUEST.get(),
                "cp.list",
                thread_id=thread,
                checkpoint_ns=ns,
                checkpoint_id=checkpoint,
                filter=filter,
                before=(before or {}).get("configurable", {}).get("checkpoint_id"),
                limit=limit,
            )
            for item in stored:
                found = self._tuple(item)
                self._stored(found.config)
                yield found

        async def aput(self, config: dict, checkpoint: dict, metadata: dict, new_versions: dict) -> dict:
            thread, ns, parent = coordinates(config)
            await CALLS.call(
                REQUEST.get(),
                "cp.put",
                thread_id=thread,
                checkpoint_ns=ns,
                parent_id=parent,
                checkpoint_id=checkpoint["id"],
                checkpoint=self._typed(checkpoint),
                metadata={**_run_keys(config), **json.loads(_dumps(metadata))},
            )
            self._event((thread, ns, checkpoint["id"])).set()
            return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

        async def aput_writes(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
            thread, ns, checkpoint = coordinates(config)
            try:
                await asyncio.wait_for(self._event((thread, ns, checkpoint)).wait(), WRITES_WAIT_S)
            except asyncio.TimeoutError:
                pass  # stored by another worker or process: the server decides
            await CALLS.call(
                REQUEST.get(),
                "cp.put_writes",
                thread_id=thread,
                checkpoint_ns=ns,
                checkpoint_id=checkpoint,
                task_id=task_id,
                run_id=(config.get("metadata") or {}).get("run_id"),
                writes=[
                    [f"{WRITES_IDX_MAP.get(channel, idx)}:{channel}", {**self._typed(value), "p": task_path}]
                    for idx, (channel, value) in enumerate(writes)
                ],
            )

        async def adelete_thread(self, thread_id: str) -> None:
            await CALLS.call(REQUEST.get(), "cp.delete_thread", thread_id=thread_id)

        def get_tuple(self, config: dict) -> CheckpointTuple | None:
            return from_thread(self.aget_tuple(config))

        def list(self, config, *, filter=None, before=None, limit=None) -> Iterator[CheckpointTuple]:
            async def collect():
                return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

            yield from from_thread(collect())

        def put(self, config, checkpoint, metadata, new_versions):
            return from_thread(self.aput(config, checkpoint, metadata, new_versions))

        def put_writes(self, config, writes, task_id, task_path=""):
            return from_thread(self.aput_writes(config, writes, task_id, task_path))

        def delete_thread(self, thread_id: str) -> None:
            return from_thread(self.adelete_thread(thread_id))

    return ServerSaver


# ------------------------------------------------------------------------ the store

def _store_class():
    from langgraph.store.base import (
        NOT_PROVIDED,
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        PutOp,
        SearchItem,
        SearchOp,
        _validate_namespace,
        _validate_namespace_labels,
    )

    def item(stored: dict, cls=Item, **extra):
        return cls(
            namespace=tuple(stored["namespace"]),
            key=stored["key"],
            value=stored["value"],
            created_at=stored["created_at"],
            updated_at=stored["updated_at"],
            **extra,
        )

    def conditions(op) -> dict:
        """A ListNamespacesOp's match conditions as the server's prefix and suffix."""
        wanted: dict = {}
        for condition in op.match_conditions or ():
            if condition.match_type in wanted:
                raise NotImplementedError(f"more than one {condition.match_type} condition in list_namespaces")
            wanted[condition.match_type] = list(condition.path)
        return wanted

    class ServerStore(BaseStore):
        """The server's long-term store, as the run that uses it sees it: every operation
        is the server's own (filters, paging, semantic query, ttl), none re-implemented."""

        supports_ttl = True

        # LangGraph's put resolves a ttl not given to its own ttl_config before the op
        # is built, so "not given" and None (never expires) would both arrive as None:
        # the op keeps NOT_PROVIDED, and the server applies its configured default.
        async def aput(self, namespace, key, value, index=None, *, ttl=NOT_PROVIDED):
            _validate_namespace(namespace)
            await self.abatch([PutOp(tuple(namespace), str(key), value, index=index, ttl=ttl)])

        def put(self, namespace, key, value, index=None, *, ttl=NOT_PROVIDED):
            _validate_namespace(namespace)
            self.batch([PutOp(tuple(namespace), str(key), value, index=index, ttl=ttl)])

        # Likewise a get's refresh_ttl not given would become True: None lets the
        # server apply store.ttl.refresh_on_read.
        async def aget(self, namespace, key, *, refresh_ttl=None):
            _validate_namespace_labels(namespace)
            return (await self.abatch([GetOp(tuple(namespace), str(key), refresh_ttl)]))[0]

        def get(self, namespace, key, *, refresh_ttl=None):
            _validate_namespace_labels(namespace)
            return self.batch([GetOp(tuple(namespace), str(key), refresh_ttl)])[0]

        async def _one(self, op):
            request = REQUEST.get()

            async def call(name: str, **body: Any) -> Any:
                return await CALLS.call(request, name, body=body)

            if isinstance(op, GetOp):
                stored = await call("store.get", namespace=list(op.namespace), key=op.key, refresh_ttl=op.refresh_ttl)
                return None if stored is None else item(stored)
            if isinstance(op, PutOp):
                if op.value is None:
                    await call("store.delete", namespace=list(op.namespace), key=op.key)
                    return None
                body = {"namespace": list(op.namespace), "key": op.key, "value": op.value}
                if op.index is not None:
                    body["index"] = op.index if op.index is False else list(op.index)
                # Absent: the server's default ttl; null: never expires (`GraphPut` in
                # crates/service-python/src/calls.rs).
                if op.ttl is not NOT_PROVIDED:
                    body["ttl"] = op.ttl
                await call("store.put", **body)
                return None
            if isinstance(op, SearchOp):
                stored = await call(
                    "store.search",
                    namespace_prefix=list(op.namespace_prefix),
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                    query=op.query,
                    refresh_ttl=op.refresh_ttl,
                )
                return [item(s, SearchItem, score=s.get("score")) for s in stored]
            if isinstance(op, ListNamespacesOp):
                stored = await call(
                    "store.list_namespaces",
                    **conditions(op),
                    max_depth=op.max_depth,
                    limit=op.limit,
                    offset=op.offset,
                )
                return [tuple(namespace) for namespace in stored]
            raise NotImplementedError(f"store operation {type(op).__name__}")

        async def abatch(self, ops):
            return [await self._one(op) for op in ops]

        def batch(self, ops):
            return from_thread(self.abatch(list(ops)))

    return ServerStore


# ----------------------------------------------------------------------- the graphs

class Graph:
    """One served graph: the user's object and how to get a runnable graph from it."""

    def __init__(self, graph_id: str, target: Any) -> None:
        self.graph_id = graph_id
        self.target = target

    async def compiled(self, config: dict) -> Any:
        target = self.target
        if _is_pregel(target):
            graph = target
        elif hasattr(target, "compile") and callable(target.compile):
            graph = target.compile()
        elif callable(target):
            params = inspect.signature(target).parameters
            made = target(config) if params else target()
            if inspect.isawaitable(made):
                made = await made
            graph = made.compile() if hasattr(made, "compile") and not _is_pregel(made) else made
        else:
            raise TypeError(f"{self.graph_id}: {type(target).__name__} is not a graph")
        if not _is_pregel(graph):
            raise TypeError(f"{self.graph_id}: the factory returned {type(graph).__name__}, not a graph")
        return graph.copy(update={"checkpointer": SAVER, "store": STORE})


def _is_pregel(value: Any) -> bool:
    from langgraph.pregel import Pregel

    return isinstance(value, Pregel)


def load(graph_id: str, spec: str, base: str) -> Graph:
    return Graph(graph_id, load_object(f"service_graphs.{graph_id}", spec, base))


def load_object(name: str, spec: str, base: str) -> Any:
    """The attribute `spec` names: './file.py:attr' (relative to `base`) or 'module:attr'."""
    path, _, attr = spec.rpartition(":")
    if not path or not attr:
        raise ValueError(f"{spec!r} must be './file.py:attribute' or 'package.module:attribute'")
    if path.endswith(".py") or "/" in path:
        file = os.path.normpath(os.path.join(base, path))
        module_spec = importlib.util.spec_from_file_location(name, file)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load {file}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(path)
    target = module
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def load_embeddings(spec: str, base: str) -> Any:
    """store.index.embed: a file or module attribute (an Embeddings object, or a function
    from a list of texts to vectors, sync or async), else a LangChain 'provider:model'."""
    path, _, _ = spec.rpartition(":")
    if path.endswith(".py") or "/" in path:
        target = load_object("service_embeddings", spec, base)
    else:
        try:
            from langchain.embeddings import init_embeddings
        except ImportError as error:
            raise ImportError(f"{spec!r} is a LangChain provider string: install langchain in this environment") from error
        target = init_embeddings(spec)
    if not (hasattr(target, "aembed_documents") or hasattr(target, "embed_documents") or callable(target)):
        raise TypeError(f"{spec!r} is a {type(target).__name__}: neither an Embeddings object nor a function")
    return target


EMBEDDINGS: Any = None


async def embed(request: dict) -> Any:
    texts = request["texts"]
    if hasattr(EMBEDDINGS, "aembed_documents"):
        vectors = await EMBEDDINGS.aembed_documents(texts)
    elif hasattr(EMBEDDINGS, "embed_documents"):
        vectors = await asyncio.to_thread(EMBEDDINGS.embed_documents, texts)
    else:
        vectors = EMBEDDINGS(texts)
        if inspect.isawaitable(vectors):
            vectors = await vectors
    return [[float(x) for x in vector] for vector in vectors]


def load_store_adapter(spec: str, base: str) -> Any:
    """store.adapter: a LangGraph BaseStore instance (anything with a batch method)."""
    target = load_object("service_store_adapter", spec, base)
    if not callable(getattr(target, "abatch", None)):
        raise TypeError(
            f"{spec!r} is a {type(target).__name__}, not a LangGraph BaseStore instance: it has no abatch method"
        )
    return target


STORE_ADAPTER: Any = None
# Items and namespaces are read from the adapter in pages of this size.
ADAPTER_PAGE = 1000


def _adapted_item(found: Any) -> dict:
    def stamp(at: datetime.datetime) -> str:
        # A naive time is taken as UTC (the server needs an offset).
        return (at if at.tzinfo else at.replace(tzinfo=datetime.timezone.utc)).isoformat()

    return {
        "namespace": list(found.namespace),
        "key": found.key,
        "value": found.value,
        "created_at": stamp(found.created_at),
        "updated_at": stamp(found.updated_at),
    }


async def adapter(request: dict) -> Any:
    """One operation on the store.adapter (`AdapterCall` in crates/service-python/src/adapter.rs):
    plain storage; the server applies its filter, order, paging and namespace rules."""
    from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

    call = request["call"]
    kind = call["kind"]
    store = STORE_ADAPTER
    if kind == "get":
        [found] = await store.abatch([GetOp(tuple(call["namespace"]), call["key"], refresh_ttl=call["refresh_ttl"])])
        return None if found is None else _adapted_item(found)
    if kind == "put":
        await store.abatch([PutOp(tuple(call["namespace"]), call["key"], call["value"], ttl=call["ttl"])])
        return None
    if kind == "delete":
        await store.abatch([PutOp(tuple(call["namespace"]), call["key"], None)])
        return None
    if kind == "items":
        found: list = []
        while True:
            [page] = await store.abatch(
                [SearchOp(tuple(call["prefix"]), limit=ADAPTER_PAGE, offset=len(found), refresh_ttl=False)]
            )
            found.extend(_adapted_item(item) for item in page)
            if len(page) < ADAPTER_PAGE:
                return found
    if kind == "namespaces":
        conditions = (MatchCondition("prefix", tuple(call["prefix"])),) if call["prefix"] else ()
        found = []
        while True:
            [page] = await store.abatch(
                [ListNamespacesOp(match_conditions=conditions, limit=ADAPTER_PAGE, offset=len(found))]
            )
            found.extend(list(namespace) for namespace in page)
            if len(page) < ADAPTER_PAGE:
                return found
    if kind == "sweep":
        swept = store.sweep_ttl()
        if inspect.isawaitable(swept):
            swept = await swept
        return swept if isinstance(swept, int) else 0
    raise ValueError(f"unknown store adapter call {kind!r}")


GRAPHS: dict[str, Graph] = {}
SAVER: Any = None
STORE: Any = None


# --------------------------------------------------------------------- the requests

def _config(request: dict) -> dict:
    config = dict(request.get("config") or {})
    config.setdefault("configurable", {})
    if request.get("metadata"):
        config["metadata"] = {**(config.get("metadata") or {}), **request["metadata"]}
    return config


def _input(value: Any) -> Any:
    if isinstance(value, dict) and "command" in value:
        from langgraph.types import Command, Send

        command = dict(value["command"])
        goto = command.get("goto")
        if goto is not None:
            def send(g):
                return Send(g["node"], g.get("input")) if isinstance(g, dict) else g

            command["goto"] = [send(g) for g in goto] if isinstance(goto, list) else send(goto)
        return Command(**{k: v for k, v in command.items() if k in ("resume", "update", "goto", "graph")})
    return value.get("values") if isinstance(value, dict) else None


def _coordinates(config: dict | None) -> dict | None:
    if not config:
        return None
    conf = config.get("configurable", {})
    if not conf.get("thread_id"):
        return None
    return {
        "thread_id": conf["thread_id"],
        "checkpoint_ns": conf.get("checkpoint_ns", "") or "",
        "checkpoint_id": conf.get("checkpoint_id"),
    }


def _task_error(error: Any) -> str | None:
    """A task's error as a JSON RunError; read back from a checkpoint it is the
    exception's repr, e.g. "ValueError('boom')"."""
    if not error:
        return None
    if isinstance(error, BaseException):
        return json.dumps(run_error(error))
    import ast
    import re

    text = str(error)
    parsed = re.fullmatch(r"(\w+)\((.*)\)", text, re.S)
    name, message = "Error", text
    if parsed:
        name = parsed.group(1)
        try:
            args = ast.literal_eval(f"({parsed.group(2)},)") if parsed.group(2) else ()
            message = str(args[0]) if len(args) == 1 else ", ".join(map(str, args))
        except (ValueError, SyntaxError):
            message = parsed.group(2)
    return json.dumps({"error": name, "name": name, "message": message})


def snapshot(state: Any) -> dict:
    tasks = []
    for task in state.tasks:
        entry = {
            "id": task.id,
            "name": task.name,
            "error": _task_error(task.error),
            "interrupts": [{"id": i.id, "value": i.value} for i in task.interrupts],
            "result": task.result,
        }
        if task.state is not None:
            if hasattr(task.state, "values"):
                entry["state"] = snapshot(task.state)
                entry["checkpoint"] = _coordinates(task.state.config)
            else:
                entry["checkpoint"] = _coordinates(task.state)
        tasks.append(entry)
    return {
        "values": state.values,
        "next": list(state.next),
        "tasks": tasks,
        "config": _coordinates(state.config),
        "parent_config": _coordinates(state.parent_config),
        "metadata": state.metadata,
        "created_at": state.created_at,
    }


async def _run(request: dict) -> tuple[Any, dict, dict]:
    """The graph, config and keyword arguments of a run request."""
    config = _config(request)
    graph = await GRAPHS[request["graph_id"]].compiled(config)
    if not _coordinates(config):
        graph = graph.copy(update={"checkpointer": None})
    # The assistant's context, `{}` when it has none (a context schema's defaults apply).
    kwargs: dict = {"context": request.get("context") or {}}
    for key in ("interrupt_before", "interrupt_after"):
        if request.get(key) is not None:
            kwargs[key] = request[key]
    return graph, config, kwargs


def _node_boundary(request_id: int, ns: tuple, task: dict) -> None:
    """Reports a task's start or end, which the server makes a span of its run's trace
    (LangGraph's `tasks` stream: a start carries `triggers`, an end `result`)."""
    node: dict = {"task": task.get("id"), "name": task.get("name"), "ns": list(ns)}
    if "triggers" not in task:
        node["end"] = True
        error = task.get("error")
        if error:
            node["error"] = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
    send({"id": request_id, "node": node})


async def stream(request: dict) -> Any:
    graph, config, kwargs = await _run(request)
    modes = request.get("modes") or ["values"]
    # A traced run (the request carries the server's `traceparent`) reports its nodes'
    # boundaries; `tasks` frames nobody asked for are not sent.
    traced = bool(request.get("traceparent"))
    asked = "tasks" in modes
    if traced and not asked:
        modes = [*modes, "tasks"]
    async for ns, mode, data in graph.astream(
        _input(request.get("input")), config, stream_mode=modes, subgraphs=True, **kwargs
    ):
        if traced and mode == "tasks":
            _node_boundary(request["id"], ns, data)
            if not asked:
                continue
        send({"id": request["id"], "chunk": [mode, list(ns), data]})
    if not _coordinates(config):
        return None
    # The state the run ended in, so the server need not ask for it.
    latest = {k: v for k, v in config["configurable"].items() if k not in ("checkpoint_id", "checkpoint_ns")}
    return snapshot(await graph.aget_state({**config, "configurable": latest}))


async def events(request: dict) -> Any:
    graph, config, kwargs = await _run(request)
    async for event in graph.astream_events(_input(request.get("input")), config, version="v2", **kwargs):
        send({"id": request["id"], "chunk": ["events", [], event]})
    return None


async def state(request: dict) -> Any:
    graph = await GRAPHS[request["graph_id"]].compiled(_config(request))
    return snapshot(await graph.aget_state(_config(request), subgraphs=bool(request.get("subgraphs"))))


async def history(request: dict) -> Any:
    graph = await GRAPHS[request["graph_id"]].compiled(_config(request))
    before = request.get("before")
    found = []
    async for item in graph.aget_state_history(
        _config(request),
        filter=request.get("filter"),
        before={"configurable": {"checkpoint_id": before}} if before else None,
        limit=request.get("limit"),
    ):
        found.append(snapshot(item))
    return found


async def update(request: dict) -> Any:
    graph = await GRAPHS[request["graph_id"]].compiled(_config(request))
    config = await graph.aupdate_state(_config(request), request.get("values"), as_node=request.get("as_node"))
    return _coordinates(config)


async def bulk(request: dict) -> Any:
    from langgraph.types import StateUpdate

    graph = await GRAPHS[request["graph_id"]].compiled(_config(request))
    supersteps = []
    for step in request["supersteps"]:
        updates = []
        for update in step:
            values = update.get("values")
            if update.get("command") is not None:
                values = _input({"command": update["command"]})
            updates.append(StateUpdate(values, update.get("as_node")))
        supersteps.append(updates)
    config = await graph.abulk_update_state(_config(request), supersteps)
    return _coordinates(config)


async def drawing(request: dict) -> Any:
    graph = await GRAPHS[request["graph_id"]].compiled(_config(request))
    xray = request.get("xray") or 0
    drawn = graph.get_graph(_config(request), xray=xray if xray > 0 else False)
    return drawn.to_json()


def _schemas(graph: Any) -> dict:
    def attempt(make):
        try:
            return make()
        except Exception:  # a schema the graph cannot describe is left out
            return None

    def state_schema():
        builder = getattr(graph, "builder", None)
        schema = getattr(builder, "state_schema", None) or getattr(builder, "schema", None)
        if schema is None:
            return None
        from pydantic import TypeAdapter

        return TypeAdapter(schema).json_schema()

    return {
        "input_schema": attempt(graph.get_input_jsonschema),
        "output_schema": attempt(graph.get_output_jsonschema),
        "state_schema": attempt(state_schema),
        "config_schema": attempt(graph.get_config_jsonschema) if hasattr(graph, "get_config_jsonschema") else None,
        "context_schema": attempt(graph.get_context_jsonschema) if hasattr(graph, "get_context_jsonschema") else None,
    }


async def subgraphs(request: dict) -> Any:
    graph = await GRAPHS[request["graph_id"]].compiled(_config(request))
    found = []
    async for namespace, subgraph in graph.aget_subgraphs(
        namespace=request.get("namespace"), recurse=bool(request.get("recurse"))
    ):
        found.append([namespace, _schemas(subgraph)])
    return found


async def schemas(request: dict) -> Any:
    return _schemas(await GRAPHS[request["graph_id"]].compiled(_config(request)))


OPS = {
    "stream": stream,
    "events": events,
    "state": state,
    "history": history,
    "update": update,
    "bulk": bulk,
    "graph": drawing,
    "subgraphs": subgraphs,
    "schemas": schemas,
    "embed": embed,
    "adapter": adapter,
}


async def handle(request: dict) -> None:
    REQUEST.set(request["id"])
    try:
        result = await OPS[request["op"]](request)
    except asyncio.CancelledError:
        send({"id": request["id"], "cancelled": True})
        return
    except BaseException as error:  # every failure goes back to the server as a RunError
        send({"id": request["id"], "err": run_error(error)})
        return
    send({"id": request["id"], "ok": result})


async def serve() -> None:
    loop = asyncio.get_running_loop()
    global CALLS
    CALLS = Calls(loop)
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: dict[int, asyncio.Task] = {}
    while True:
        line = await reader.readline()
        if not line:
            # The server is gone (stdin closed): exit now, not after the sync nodes
            # still running in LangGraph's thread pool return.
            sys.stderr.flush()
            os._exit(0)
        message = json.loads(line)
        if "reply" in message:
            CALLS.answer(message)
        elif message.get("op") == "cancel":
            task = running.get(message["id"])
            if task is not None:
                task.cancel()
        else:
            task = asyncio.create_task(handle(message))
            running[message["id"]] = task
            task.add_done_callback(lambda _, n=message["id"]: running.pop(n, None))


def main() -> None:
    spec = json.loads(os.environ.pop("SERVICE_BRIDGE_SPEC"))
    hello: dict = {"protocol": PROTOCOL, "python": sys.version.split()[0], "graphs": {}}
    try:
        from importlib.metadata import version

        hello["langgraph"] = version("langgraph")
        import langgraph.pregel  # noqa: F401
    except Exception as error:  # reported to the server, which refuses to boot
        hello["langgraph_error"] = f"{type(error).__name__}: {error}"
        send({"hello": hello})
        return
    global SAVER, STORE
    SAVER = _saver_class()()
    STORE = _store_class()()
    base = spec["base"]
    for path in reversed(spec.get("paths", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    global EMBEDDINGS
    if spec.get("embed"):
        try:
            EMBEDDINGS = load_embeddings(spec["embed"], base)
        except BaseException as error:  # reported to the server, which refuses to boot
            hello["embed_error"] = run_error(error)
            send({"hello": hello})
            return
    global STORE_ADAPTER
    if spec.get("store_adapter"):
        try:
            STORE_ADAPTER = load_store_adapter(spec["store_adapter"], base)
        except BaseException as error:  # reported to the server, which refuses to boot
            hello["store_adapter_error"] = run_error(error)
            send({"hello": hello})
            return
        supports_ttl = bool(getattr(STORE_ADAPTER, "supports_ttl", False))
        hello["store_adapter"] = {
            "supports_ttl": supports_ttl,
            "sweeps": supports_ttl and callable(getattr(STORE_ADAPTER, "sweep_ttl", None)),
        }
    for graph_id, target in spec["graphs"].items():
        try:
            GRAPHS[graph_id] = load(graph_id, target, base)
            hello["graphs"][graph_id] = {"ok": True}
        except BaseException as error:
            hello["graphs"][graph_id] = {"ok": False, "error": run_error(error)}
    send({"hello": hello})
    asyncio.run(serve())


if __name__ == "__main__":
    main()
