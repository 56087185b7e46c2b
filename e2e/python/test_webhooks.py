"""Run-completion webhooks through the Python SDK: `webhook=` on a run reaches a real
receiver, which checks the signature with Python's own `hmac` (independently of the
server's code) and answers 2xx only after recording the delivery.

run.sh starts the server with SERVICE_WEBHOOK_SECRET=E2E_WEBHOOK_SECRET; against a
server started otherwise, set E2E_WEBHOOK_SECRET to its secret."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from conftest import REFERENCE, eventually, wait_run

SECRET = os.environ.get("E2E_WEBHOOK_SECRET", "e2e-webhook-secret")
TOLERANCE_SECONDS = 300

pytestmark = pytest.mark.skipif(REFERENCE, reason="the reference server blocks loopback webhooks and signs differently")


def verify(header: str | None, raw_body: bytes, secrets: list[str]) -> bool:
    """The recipe of docs/webhooks.md: `t=<unix>,v1=<hex>` over b"<t>." + raw body."""
    if not header:
        return False
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > TOLERANCE_SECONDS:
        return False
    signed = f"{timestamp}.".encode() + raw_body
    for secret in secrets:
        expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, parts.get("v1", "")):
            return True
    return False


class Receiver:
    """A loopback HTTP receiver; `fail_first` requests answer 500."""

    def __init__(self, fail_first: int = 0):
        self.deliveries: list[dict] = []
        self.fail_first = fail_first
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                ok = verify(self.headers.get("X-Service-Signature"), raw, [SECRET])
                with receiver.lock:
                    failing = receiver.fail_first > 0
                    receiver.fail_first -= 1
                    # Recorded before answering: a 2xx means the work is durable.
                    receiver.deliveries.append({
                        "id": self.headers.get("X-Service-Delivery-Id"),
                        "attempt": self.headers.get("X-Service-Attempt"),
                        "signed": ok,
                        "body": json.loads(raw),
                    })
                self.send_response(500 if failing or not ok else 204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def received(self) -> list[dict]:
        with self.lock:
            return list(self.deliveries)

    def close(self):
        self.server.shutdown()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


async def arrived(receiver: Receiver, count: int) -> list[dict]:
    async def fetch():
        return receiver.received()

    return await eventually(fetch, lambda got: len(got) >= count, timeout=20)


async def test_a_run_with_a_webhook_reaches_the_receiver_signed(client, thread, http, receiver):
    run = await client.runs.create(
        thread["thread_id"],
        "echo",
        input={"messages": [{"type": "human", "content": "hook me"}]},
        webhook=receiver.url,
    )
    [delivery] = await arrived(receiver, 1)
    assert delivery["signed"], "the signature verifies with Python's hmac"
    body = delivery["body"]
    assert body["run_id"] == run["run_id"]
    assert body["thread_id"] == thread["thread_id"]
    assert body["status"] == "success"
    assert body["values"]["messages"][-1]["content"] == "echo: hook me"
    assert delivery["attempt"] == "1"

    listed = await eventually(
        lambda: http.get(f"/threads/{thread['thread_id']}/runs/{run['run_id']}/deliveries"),
        lambda response: response.json() and response.json()[0]["status"] == "delivered",
    )
    [row] = listed.json()
    assert row["delivery_id"] == delivery["id"]
    assert "payload" not in row
    replay = await http.post(
        f"/threads/{thread['thread_id']}/runs/{run['run_id']}/deliveries/{row['delivery_id']}/replay"
    )
    assert replay.status_code == 409


async def test_a_stateless_run_tells_its_state_at_the_end_though_its_thread_is_gone(client, receiver):
    """A stateless run's thread is deleted as it settles; the webhook still carries the
    state the run ended in, when it succeeded and when it failed."""
    hello = {"messages": [{"type": "human", "content": "hook me"}]}
    await client.runs.wait(None, "echo", input=hello, webhook=receiver.url)
    await client.runs.wait(None, "fail", input=hello, webhook=receiver.url, raise_error=False)
    deliveries = await arrived(receiver, 2)
    by_status = {d["body"]["status"]: d["body"] for d in deliveries}
    assert [m["content"] for m in by_status["success"]["values"]["messages"]] == ["hook me", "echo: hook me"]
    assert [m["content"] for m in by_status["error"]["values"]["messages"]] == ["hook me"]
    assert "boom" in by_status["error"]["error"]


async def test_a_refused_delivery_is_retried_with_the_same_id(client, thread):
    receiver = Receiver(fail_first=1)
    try:
        run = await client.runs.create(thread["thread_id"], "fail", input={}, webhook=receiver.url)
        await wait_run(client, thread["thread_id"], run["run_id"])
        first, second = (await arrived(receiver, 2))[:2]
        assert first["id"] == second["id"]
        assert (first["attempt"], second["attempt"]) == ("1", "2")
        assert second["body"]["status"] == "error"
        assert second["body"]["error"] == "boom"
        assert first["signed"] and second["signed"]
    finally:
        receiver.close()


async def test_a_webhook_must_be_an_absolute_url(client, thread):
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(thread["thread_id"], "echo", input={}, webhook="/relative")
