"""Two instances on one PostgreSQL database and one Redis: any call reaches any run.

The module starts two servers of its own, A and B (`$E2E_SERVER_BIN start --port 0`
with DATABASE_URL naming a database created for this module and dropped afterwards,
and REDIS_URL), and every multi-call flow alternates between them: a thread made on
one, a run created on the other, its stream joined, replayed and resumed with
`Last-Event-ID` through either. Which instance executes a run is the servers'
choice, so the flows read each stream through both where it matters: without the
shared Redis bus an instance has none of the frames of a run the other executes.

Skipped, saying why, without E2E_SERVER_BIN (a run against an already-running
server) or when PostgreSQL or Redis does not answer. E2E_POSTGRES_URL (default
postgres://postgres@127.0.0.1:5432/postgres, a role that may create databases; psql
runs the CREATE / DROP) and E2E_REDIS_URL (default redis://127.0.0.1:6379) name them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import uuid
from typing import Any, AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from langgraph_sdk import get_client

from conftest import SERVER_BIN, TERMINAL_RUN_STATUSES, collect, eventually, marker, own_server

POSTGRES_URL = os.environ.get("E2E_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("E2E_REDIS_URL", "redis://127.0.0.1:6379")

EVENT_ID = re.compile(r"^(\d+)-(\d+)$")
STEPS_MODES = ["values", "custom"]


# ------------------------------------------------------------------ the two servers


def _redis_answers(url: str) -> str | None:
    """None when a PING to `url` is answered, else why not."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError as err:
        return f"Redis at {parts.hostname}:{parts.port or 6379} does not answer ({err})"
    if not reply.startswith((b"+PONG", b"-NOAUTH")):
        return f"Redis at {parts.hostname}:{parts.port or 6379} answered PING with {reply!r}"
    return None


def _psql(sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["psql", POSTGRES_URL, "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
        capture_output=True,
        text=True,
        timeout=30,
    )


def _postgres_answers() -> str | None:
    """None when psql reaches E2E_POSTGRES_URL, else why not."""
    if shutil.which("psql") is None:
        return "psql is not on PATH (needed to create the instances' database)"
    try:
        done = _psql("SELECT 1")
    except subprocess.TimeoutExpired:
        return "PostgreSQL did not answer psql within 30 s"
    if done.returncode != 0:
        return f"PostgreSQL does not answer at {POSTGRES_URL}: {done.stderr.strip()}"
    return None


@contextlib.contextmanager
def _fresh_database() -> Iterator[str]:
    """A database made for this module (its URL), dropped afterwards."""
    name = f"e2e_instances_{uuid.uuid4().hex[:16]}"
    created = _psql(f"CREATE DATABASE {name}")
    if created.returncode != 0:
        raise RuntimeError(f"CREATE DATABASE {name} failed: {created.stderr.strip()}")
    parts = urlsplit(POSTGRES_URL)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
    finally:
        dropped = _psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if dropped.returncode != 0:
            print(f"DROP DATABASE {name} failed: {dropped.stderr.strip()}")


@pytest.fixture(scope="module")
def instances() -> Iterator[tuple[str, str]]:
    """Base URLs of two `start` instances sharing one fresh database and Redis."""
    if not SERVER_BIN:
        pytest.skip("needs servers of its own: set E2E_SERVER_BIN (this run is against an already-running server)")
    for why_not in (_postgres_answers(), _redis_answers(REDIS_URL)):
        if why_not:
            pytest.skip(why_not)
    with _fresh_database() as database_url:
        env = {"DATABASE_URL": database_url, "REDIS_URL": REDIS_URL}
        # One after the other: A applies the migrations before B boots.
        with own_server({}, env=env, mode="start") as a, own_server({}, env=env, mode="start") as b:
            yield a, b


@pytest.fixture
async def a_and_b(instances):
    """SDK clients of instance A and of instance B."""
    a = get_client(url=instances[0], api_key=None)
    b = get_client(url=instances[1], api_key=None)
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


# ------------------------------------------------------------------------- helpers


def event_id(part: Any) -> tuple[int, int]:
    """An SSE event id `<ms>-<n>` as a pair, so ids compare in order."""
    found = EVENT_ID.match(part.id or "")
    assert found, f"event id {part.id!r} is not <ms>-<n> ({part.event} {part.data!r})"
    return int(found.group(1)), int(found.group(2))


def frames(parts: list) -> list[tuple[str, Any]]:
    return [(p.event, p.data) for p in parts]


def with_ids(parts: list) -> list[tuple[str | None, str, Any]]:
    return [(p.id, p.event, p.data) for p in parts]


def assert_ids_increase(parts: list) -> None:
    ids = [event_id(p) for p in parts]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), f"ids repeat or go back: {[p.id for p in parts]}"


def assert_whole_steps_run(parts: list, run_id: str, n: int) -> None:
    """The frames of a `steps` run with input {"n": n} on a fresh thread, values + custom."""
    assert parts, "no frames"
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run_id, parts[0]
    assert [p.data for p in parts if p.event == "custom"] == [{"step": k} for k in range(1, n + 1)]
    values = [p.data for p in parts if p.event == "values"]
    assert [v.get("count") for v in values] == [None, *range(1, n + 1)]
    assert values[-1]["log"] == [f"step {k}" for k in range(1, n + 1)]
    assert {p.event for p in parts} == {"metadata", "values", "custom"}


async def replay(client, thread_id: str, run_id: str) -> list:
    """Every frame of a run, from its first (`Last-Event-ID: -1`)."""
    return await collect(client.runs.join_stream(thread_id, run_id, last_event_id="-1"), timeout=20)


async def first_frames(stream: AsyncIterator[Any], count: int) -> list:
    """The first `count` frames of `stream`, then the stream is closed (a client going away)."""
    parts: list = []

    async def _read():
        async for part in stream:
            parts.append(part)
            if len(parts) == count:
                return

    try:
        await asyncio.wait_for(_read(), 20)
    finally:
        await stream.aclose()
    return parts


async def bounded_wait(client, thread_id: str, assistant_id: str, **kwargs) -> dict:
    try:
        return await asyncio.wait_for(client.runs.wait(thread_id, assistant_id, **kwargs), 20)
    except asyncio.TimeoutError:
        runs = await client.runs.list(thread_id)
        raise AssertionError(f"runs.wait gave no answer within 20 s; runs on the thread: {runs!r}") from None


async def new_thread(client) -> str:
    return (await client.threads.create(metadata={"e2e": marker()}))["thread_id"]


# --------------------------------------------------------------------------- tests


async def test_run_created_on_b_is_replayed_whole_through_a_and_b(a_and_b):
    a, b = a_and_b
    tid = await new_thread(a)
    run = await b.runs.create(tid, "steps", input={"n": 20}, stream_mode=STEPS_MODES, stream_resumable=True)
    rid = run["run_id"]

    through_a = await replay(a, tid, rid)
    assert_whole_steps_run(through_a, rid, 20)
    assert_ids_increase(through_a)

    # The same frames, ids included, through the instance that did not answer first.
    through_b = await replay(b, tid, rid)
    assert with_ids(through_b) == with_ids(through_a)

    done = await eventually(lambda: a.runs.get(tid, rid), lambda r: r["status"] in TERMINAL_RUN_STATUSES)
    assert done["status"] == "success"


async def test_reconnect_to_the_other_instance_resumes_after_the_last_event_id(a_and_b):
    a, b = a_and_b
    tid = await new_thread(b)
    # Streamed through A: the client reads 7 frames and goes away, the run goes on.
    first = await first_frames(
        a.runs.stream(tid, "steps", input={"n": 20}, stream_mode=STEPS_MODES,
                      stream_resumable=True, on_disconnect="continue"),
        7,
    )
    assert len(first) == 7 and first[0].event == "metadata"
    rid = first[0].data["run_id"]
    # Reconnected through B after the last id seen: 10 more frames, then away again.
    second = await first_frames(b.runs.join_stream(tid, rid, last_event_id=first[-1].id), 10)
    assert len(second) == 10
    # And through A once more, to the end.
    rest = await collect(a.runs.join_stream(tid, rid, last_event_id=second[-1].id), timeout=20)

    whole = await replay(b, tid, rid)
    assert_whole_steps_run(whole, rid, 20)
    assert_ids_increase(whole)
    # No frame twice, none missing: the three pieces are exactly the whole, ids included.
    assert with_ids(first + second + rest) == with_ids(whole)


async def test_wait_on_a_for_a_thread_made_on_b_and_state_read_through_b(a_and_b):
    a, b = a_and_b
    tid = await new_thread(b)
    result = await bounded_wait(a, tid, "steps", input={"n": 5})
    assert result["count"] == 5 and result["log"] == [f"step {k}" for k in range(1, 6)]

    state = await b.threads.get_state(tid)
    assert state["values"] == result
    assert state["next"] == []
    [run] = await b.runs.list(tid)
    assert run["status"] == "success"
    assert (await b.threads.get(tid))["status"] == "idle"
    # A second wait, on B this time, goes on from the state A's run left.
    again = await bounded_wait(b, tid, "steps", input={"n": 7})
    assert again["count"] == 7
    assert (await a.threads.get_state(tid))["values"] == again


async def test_thread_streams_on_b_and_a_see_runs_created_on_a(a_and_b):
    a, b = a_and_b
    tid = await new_thread(a)
    # Live (no Last-Event-ID) thread streams on both instances: whichever executes
    # the runs, one of the two streams is on the other instance.
    on_b = ThreadFollower("B", await b.threads.join_stream(tid))
    on_a = ThreadFollower("A", await a.threads.join_stream(tid))
    try:
        # The SDK connects when the stream is first read, so the first frames of a
        # run created right away could come before a stream listens. Small probe
        # runs on A until one is seen to its end on both streams prove they follow.
        for attempt in range(10):
            probe = await a.runs.create(tid, "steps", input={"n": 1}, stream_mode=["values"])
            try:
                await on_b.until_run_done(probe["run_id"], timeout=2)
                await on_a.until_run_done(probe["run_id"], timeout=2)
                break
            except AssertionError:
                if attempt == 9:
                    raise
        await eventually(lambda: a.threads.get(tid), lambda t: t["status"] == "idle")
        before = (await b.threads.get_state(tid))["values"]["count"]

        run = await a.runs.create(tid, "steps", input={"n": 20}, stream_mode=STEPS_MODES, stream_resumable=True)
        rid = run["run_id"]
        seen_on_b = await on_b.until_run_done(rid, timeout=20)
        seen_on_a = await on_a.until_run_done(rid, timeout=20)
    finally:
        await on_b.close()
        await on_a.close()

    own = frames(await replay(b, tid, rid))
    for seen in (seen_on_b, seen_on_a):
        assert_ids_increase(seen)
        starts = [i for i, p in enumerate(seen) if p.event == "metadata" and p.data.get("run_id") == rid]
        assert starts, f"no metadata frame of the run: {frames(seen)}"
        of_run = seen[starts[0]:-1]
        assert [p.data.get("count") for p in of_run if p.event == "values"] == list(range(before, 21))
        assert [p.data for p in of_run if p.event == "custom"] == [{"step": k} for k in range(before + 1, 21)]
        # Exactly the run's own frames (a thread stream numbers them in its own topic).
        assert frames(of_run) == own


class ThreadFollower:
    """Reads a thread stream in the background, so the test can wait for a run's end."""

    def __init__(self, name: str, stream: AsyncIterator[Any]):
        self.name = name
        self.stream = stream
        self.received: asyncio.Queue = asyncio.Queue()
        self.task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        async for part in self.stream:
            await self.received.put(part)

    async def until_run_done(self, run_id: str, timeout: float) -> list:
        """The frames up to `run_id`'s run-done marker (from where the last call stopped)."""
        parts: list = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self.task.done():
                self.task.result()  # raises what ended the stream
                raise AssertionError(f"the thread stream on {self.name} ended; frames so far: {frames(parts)}")
            try:
                part = await asyncio.wait_for(self.received.get(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise AssertionError(
                    f"the thread stream on {self.name} did not see run {run_id} end within {timeout} s; "
                    f"frames: {frames(parts)}"
                ) from None
            parts.append(part)
            if part.event == "metadata" and part.data.get("status") == "run_done" and part.data["run_id"] == run_id:
                return parts

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.stream.aclose()
