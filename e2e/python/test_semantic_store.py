"""Store semantic search (SPEC "Store", `store.index`) through the Python SDK: a
server of its own whose index embeds with a fake OpenAI-compatible endpoint on
127.0.0.1 (words hashed into 64 buckets, answered in base64 as OpenAI does)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import httpx
import pytest
from langgraph_sdk import get_client

from conftest import SERVER_MODE, marker, own_server

DIMS = 64


def vector(text: str) -> list[float]:
    """Each word (lowercased) adds one to the bucket of its FNV-1a hash."""
    buckets = [0.0] * DIMS
    for word in re.findall(r"[0-9a-z]+", text.lower()):
        h = 0xCBF29CE484222325
        for byte in word.encode():
            h = ((h ^ byte) * 0x100000001B3) % 2**64
        buckets[h % DIMS] += 1.0
    if not any(buckets):
        buckets[-1] = 1.0
    return buckets


class Embeddings(BaseHTTPRequestHandler):
    failing = False
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"auth": self.headers.get("Authorization"), **body})
        if type(self).failing:
            answer, status = {"error": {"message": "the fake embedder is down"}}, 500
        else:
            data = [
                {"object": "embedding", "index": i, "embedding": base64.b64encode(struct.pack(f"<{DIMS}f", *vector(text))).decode()}
                for i, text in enumerate(body["input"])
            ]
            answer, status = {"object": "list", "data": data, "model": body["model"]}, 200
        raw = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def fake_embeddings() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def indexed_url() -> Iterator[str]:
    env: dict[str, str | None] = {}
    if SERVER_MODE == "start":
        # The index needs pgvector; Debian's PostgreSQL has none.
        pgvector = os.environ.get("PGVECTOR_TEST_URL")
        if not pgvector:
            pytest.skip("start mode needs PostgreSQL with pgvector: set PGVECTOR_TEST_URL")
        env["DATABASE_URL"] = pgvector
    config = {"store": {"index": {"embed": "openai:fake-embedder", "dims": DIMS, "fields": ["text"]}}}
    with fake_embeddings() as embeddings:
        env.update({"OPENAI_BASE_URL": embeddings, "OPENAI_API_KEY": "sk-e2e"})
        with own_server(config, env=env) as url:
            yield url


@pytest.fixture
async def indexed(indexed_url):
    client = get_client(url=indexed_url, api_key=None)
    try:
        yield client
    finally:
        await client.aclose()


async def test_search_items_with_query_ranks_by_cosine_similarity(indexed):
    ns = ["e2e", marker()]
    await indexed.store.put_item(ns, key="mat", value={"text": "the cat sat on the mat"})
    await indexed.store.put_item(ns, key="stocks", value={"text": "stock prices fell"})
    await indexed.store.put_item(ns, key="dog", value={"text": "a cat chased a dog"})
    found = (await indexed.store.search_items(ns, query="the cat on the mat", limit=10))["items"]
    assert [item["key"] for item in found] == ["mat", "dog", "stocks"]
    scores = [item["score"] for item in found]
    assert all(isinstance(score, float) for score in scores), scores
    assert scores == sorted(scores, reverse=True)
    plain = (await indexed.store.search_items(ns, limit=10))["items"]
    assert [item["score"] for item in plain] == [None, None, None]
    seen = Embeddings.seen[-1]
    assert seen["auth"] == "Bearer sk-e2e" and seen["encoding_format"] == "base64"


async def test_query_with_filter_and_paging_and_unindexed_items_last(indexed):
    ns = ["e2e", marker()]
    await indexed.store.put_item(ns, key="pet", value={"text": "cat", "kind": "pet"})
    await indexed.store.put_item(ns, key="wild", value={"text": "cat", "kind": "wild"})
    await indexed.store.put_item(ns, key="far", value={"text": "stock market", "kind": "pet"})
    await indexed.store.put_item(ns, key="skip", value={"text": "cat", "kind": "pet"}, index=False)
    found = (await indexed.store.search_items(ns, query="cat", filter={"kind": "pet"}, limit=10))["items"]
    assert [item["key"] for item in found] == ["pet", "far", "skip"]
    assert abs(found[0]["score"] - 1.0) < 1e-6
    assert found[2]["score"] is None, "put with index=False: no vector, never above a scored item"
    page = (await indexed.store.search_items(ns, query="cat", filter={"kind": "pet"}, limit=1, offset=1))["items"]
    assert [item["key"] for item in page] == ["far"]


async def test_put_with_its_own_fields_embeds_those(indexed):
    ns = ["e2e", marker()]
    value = {"text": "stock prices", "title": "the cat sat on the mat"}
    await indexed.store.put_item(ns, key="title", value=value, index=["title"])
    await indexed.store.put_item(ns, key="text", value=value)
    found = (await indexed.store.search_items(ns, query="the cat sat on the mat"))["items"]
    assert [item["key"] for item in found] == ["title", "text"]


async def test_an_embedder_failure_fails_the_put_and_writes_nothing(indexed):
    ns = ["e2e", marker()]
    Embeddings.failing = True
    try:
        with pytest.raises(httpx.HTTPStatusError) as failed:
            await indexed.store.put_item(ns, key="k", value={"text": "hello"})
    finally:
        Embeddings.failing = False
    assert failed.value.response.status_code == 503
    body = failed.value.response.json()
    assert "embedding failed" in body["message"] and "the fake embedder is down" in body["message"]
    assert await indexed.store.get_item(ns, key="k") is None
