#!/usr/bin/env python3
"""Hostile input against a running server: every route of routes.txt x kinds of bad
input (invalid JSON, wrong types, NUL and invalid UTF-8, huge and negative numbers,
deep nesting, oversized bodies, unknown ids, bad headers, bad query strings).

Fails on any 5xx, any error answer whose body is not the JSON error body of
contract/errors.md (`{"detail": ...}`; the exceptions are `GET /store/items`
without a key, `{"error": ...}`, and `/mcp` and `/a2a/...`, whose request errors are JSON-RPC's
`{"error": {"code": ..., "message": ...}}`), or a server that stops answering.

    E2E_BASE_URL=http://127.0.0.1:2024 python3 e2e/hostile/run.py

Standard library only. About two thousand requests.
"""

import http.client
import json
import os
import select
import socket
import sys
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = urllib.parse.urlsplit(os.environ.get("E2E_BASE_URL", "http://127.0.0.1:2024"))
TIMEOUT = 15.0
# Over the default body limit (25 MiB), sent to a few routes only: each costs time.
OVERSIZED = 26 * 1024 * 1024
# A broken server (every request hanging for TIMEOUT) is reported in bounded time.
MAX_FAILURES = 40
DEADLINE = time.monotonic() + float(os.environ.get("HOSTILE_DEADLINE_S", "300"))


def routes():
    with open(os.path.join(HERE, "routes.txt")) as table:
        for line in table:
            line = line.strip()
            if line and not line.startswith("#"):
                method, path = line.split(" ", 1)
                yield method, path


class Failures:
    def __init__(self):
        self.items = []
        self.sent = 0

    def add(self, what, why):
        self.items.append(f"{what}: {why}")
        print(f"[hostile] FAIL {what}: {why}", file=sys.stderr)
        if len(self.items) >= MAX_FAILURES:
            print(f"[hostile] stopping after {MAX_FAILURES} failures", file=sys.stderr)
            report_and_exit()


FAIL = Failures()


def request(method, path, body=None, headers=None):
    """(status, headers, body bytes); raises on a transport failure. Streams are
    closed once their head is read."""
    connection = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=TIMEOUT)
    try:
        all_headers = {"Content-Type": "application/json"}
        all_headers.update(headers or {})
        connection.request(method, path, body=body, headers=all_headers)
        response = connection.getresponse()
        content_type = response.getheader("Content-Type", "")
        if content_type.startswith("text/event-stream"):
            return response.status, response, b""
        return response.status, response, response.read()
    finally:
        connection.close()


def check(method, path, body=None, headers=None, label=""):
    """Sends one request and records what breaks the rules."""
    what = f"{method} {path[:120]} {label}".strip()
    FAIL.sent += 1
    try:
        status, response, data = request(method, path, body, headers)
    except Exception as error:  # a hang, a reset: the server stopped answering
        FAIL.add(what, f"no answer: {error!r}")
        if not alive():
            FAIL.add(what, "the server stopped answering GET /ok")
            report_and_exit()
        return None, None
    if status >= 500:
        FAIL.add(what, f"{status} {data[:200]!r}")
        return status, None
    if status < 400:
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            return status, None
    content_type = response.getheader("Content-Type", "")
    if not content_type.startswith("application/json"):
        FAIL.add(what, f"{status} with Content-Type {content_type!r}: {data[:200]!r}")
        return status, None
    try:
        parsed = json.loads(data)
    except ValueError:
        FAIL.add(what, f"{status} with a body that is not JSON: {data[:200]!r}")
        return status, None
    json_rpc = path.startswith("/mcp") or (method == "POST" and path.startswith("/a2a/"))
    if json_rpc and isinstance(parsed, dict) and "detail" not in parsed:
        error = parsed.get("error")
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            FAIL.add(what, f"{status} without a JSON-RPC error: {data[:200]!r}")
        return status, parsed
    store_get = method == "GET" and path.startswith("/store/items")
    key = "error" if store_get and "detail" not in parsed else "detail"
    if not isinstance(parsed, dict) or not isinstance(parsed.get(key), str):
        FAIL.add(what, f"{status} without a string '{key}': {data[:200]!r}")
    return status, parsed


def alive():
    for _ in range(3):
        try:
            status, _, _ = request("GET", "/ok")
            if status == 200:
                return True
        except Exception:
            time.sleep(0.5)
    return False


def created(path, body, field):
    status, parsed = check("POST", path, json.dumps(body), label="(fixture)")
    if status != 200 or not isinstance(parsed, dict) or field not in parsed:
        FAIL.add(f"POST {path}", f"fixture not created: {status} {parsed!r}")
        return str(uuid.uuid4())
    return parsed[field]


def fixtures():
    """Fresh ids of real rows, so bad input also reaches past the lookups."""
    thread = created("/threads", {}, "thread_id")
    assistant = created("/assistants", {"graph_id": "echo"}, "assistant_id")
    run = created(f"/threads/{thread}/runs", {"assistant_id": "echo", "input": {}}, "run_id")
    cron = created("/runs/crons", {"assistant_id": "echo", "schedule": "0 0 1 1 *"}, "cron_id")
    return {
        "thread_id": thread,
        "assistant_id": assistant,
        "run_id": run,
        "cron_id": cron,
        "checkpoint_id": str(uuid.uuid4()),
        "delivery_id": str(uuid.uuid4()),
        "namespace": "x",
        "graph_id": "echo",
        "file": "entrypoint.js",
    }


def fill(path, ids, override=None, name=None):
    """The path with its parameters filled from `ids`; `override` (raw, already
    percent-encoded) replaces parameter `name`, or every parameter when `name` is None."""
    out = path
    for param, value in ids.items():
        token = "{" + param + "}"
        if token not in out:
            continue
        if override is not None and (name is None or name == param):
            out = out.replace(token, override)
        else:
            out = out.replace(token, urllib.parse.quote(str(value), safe=""))
    return out


def params(path):
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


# Path segments a client may send instead of an id.
BAD_SEGMENTS = {
    "unknown uuid": lambda: str(uuid.uuid4()),
    "not a uuid": lambda: "not-a-uuid",
    "invalid utf-8": lambda: "%FF%FE",
    "overlong utf-8": lambda: "%C0%AF",
    "nul": lambda: "%00",
    "nul inside": lambda: "a%00b",
    "huge": lambda: "x" * 4000,
    "dot dot": lambda: "..%2F..",
    "percent alone": lambda: "%",
    "emoji": lambda: "%F0%9F%98%80",
}


def deep(depth):
    return "[" * depth + "]" * depth


# Whole bodies that are bad on any route.
BAD_BODIES = {
    "invalid json": b"{",
    "trailing garbage": b"{} x",
    "array": b"[]",
    "string": b'"x"',
    "number": b"1",
    "null": b"null",
    "invalid utf-8": b'{"a": "\xff\xfe"}',
    "lone surrogate": b'{"a": "\\ud800"}',
    "nul": b'{"a": "\\u0000"}',
    "nul key": b'{"\\u0000": 1}',
    "huge number": b'{"a": 1e400}',
    "huge integer": b'{"a": 123456789012345678901234567890}',
    "deep nesting 200": ('{"a": ' + deep(200) + "}").encode(),
    "deep nesting 100000": ('{"a": ' + deep(100000) + "}").encode(),
    "many keys": json.dumps({f"k{i}": i for i in range(20000)}).encode(),
}

# Fields with the wrong type or out of bounds, merged into each route's base body.
BAD_FIELDS = [
    {"metadata": "x"},
    {"metadata": {"k": "a\u0000b"}},
    {"metadata": {"\u0000": 1}},
    {"metadata": [1, 2]},
    {"limit": -1},
    {"limit": "ten"},
    {"limit": 1e30},
    {"limit": 2**63},
    {"offset": -5},
    {"offset": 10**20},
    {"offset": 2**62},
    {"ttl": 1e30},
    {"ttl": -1},
    {"ttl": {"strategy": "delete", "ttl": 1e30}},
    {"ttl": "forever"},
    {"after_seconds": 1e30},
    {"after_seconds": -1},
    {"after_seconds": "soon"},
    {"config": {"recursion_limit": 10**12}},
    {"config": {"recursion_limit": -1}},
    {"config": "x"},
    {"input": {"x": "\u0000"}},
    {"input": deep(60)},
    {"command": "resume"},
    {"command": {"resume": "\u0000"}},
    {"stream_mode": ["nonsense"]},
    {"stream_mode": 5},
    {"multitask_strategy": "explode"},
    {"if_not_exists": "maybe"},
    {"webhook": "http://127.0.0.1:1/x"},
    {"webhook": "not a url"},
    {"checkpoint_id": "\u0000"},
    {"namespace": ["\u0000"]},
    {"namespace": []},
    {"namespace": "a.b"},
    {"key": "\u0000"},
    {"key": 5},
    {"value": "x"},
    {"filter": {"\u0000": 1}},
    {"filter": {"a": {"$nope": 1}}},
    {"prefix": ["\u0000"]},
    {"max_depth": -1},
    {"max_depth": 10**15},
    {"name": "\u0000"},
    {"graph_id": "\u0000"},
    {"assistant_id": "\u0000"},
    {"assistant_id": str(uuid.uuid4())},
    {"schedule": "\u0000"},
    {"schedule": "99 99 99 99 99"},
    {"timezone": "Mars/Olympus"},
    {"end_time": "year 10000"},
    {"version": 2**62},
    {"version": -1},
    {"thread_ids": ["nope"]},
    {"run_ids": ["\u0000"]},
    {"status": "nonsense"},
    {"sort_by": "nonsense"},
    {"select": ["nonsense"]},
    {"before": "\u0000"},
    {"as_node": "\u0000"},
    {"values": {"\u0000": 1}},
]

# A body each route accepts, so a bad field is checked past the first refusal.
BASES = {
    "/invoke/{graph_id}": {"input": {}},
    "/ui/{assistant_id}": {"name": "x"},
    "/assistants": {"graph_id": "echo"},
    "/assistants/{assistant_id}/latest": {"version": 1},
    "/runs/crons": {"assistant_id": "echo", "schedule": "0 0 1 1 *"},
    "/threads/{thread_id}/runs/crons": {"assistant_id": "echo", "schedule": "0 0 1 1 *"},
    "/runs/crons/{cron_id}": {"schedule": "0 0 1 1 *"},
    "/threads/{thread_id}/runs": {"assistant_id": "echo", "input": {}},
    "/threads/{thread_id}/runs/stream": {"assistant_id": "echo", "input": {}},
    "/threads/{thread_id}/runs/wait": {"assistant_id": "echo", "input": {}},
    "/runs": {"assistant_id": "echo", "input": {}},
    "/runs/stream": {"assistant_id": "echo", "input": {}},
    "/runs/wait": {"assistant_id": "echo", "input": {}},
    "/store/items": {"namespace": ["a"], "key": "k", "value": {}},
    "/threads/{thread_id}/state": {"values": {}},
    "/threads/{thread_id}/state/checkpoint": {"checkpoint": {"checkpoint_id": str(uuid.uuid4())}},
    "/runs/cancel": {"status": "pending"},
    "/threads/{thread_id}/commands": {"id": 1, "method": "agent.getTree", "params": {}},
    "/threads/{thread_id}/stream/events": {"channels": ["values"]},
}

BAD_QUERIES = [
    "limit=-1",
    "limit=abc",
    "limit=99999999999999999999",
    "offset=-1",
    "offset=99999999999999999999",
    "before=%00",
    "before=%FF",
    "key=%00",
    "key=k&namespace=%00",
    "key=k&namespace=%FF%FE",
    "namespace=a",
    "stream_mode=bogus",
    "stream_mode=%00",
    "subgraphs=maybe",
    "xray=-1",
    "xray=99999999999",
    "select=%FF",
    "include=%00",
    "status=bogus",
    "cancel_on_disconnect=maybe",
    "wait=maybe",
    "action=explode",
    "refresh_ttl=maybe",
    "%00=1",
    "&&&==&",
    "a=%",
]

BAD_HEADERS = [
    {"Idempotency-Key": "k" * 300},
    {"Idempotency-Key": ""},
    {"Last-Event-ID": "not-an-id"},
    {"Last-Event-ID": "99999999999999999999999-1"},
    {"Content-Type": "text/plain"},
    {"Content-Type": "application/xml"},
    {"Accept": "text/event-stream"},
    {"Prefer": "return=minimal"},
    {"Authorization": "Bearer \u00ff"},
]

WITH_BODY = {"POST", "PUT", "PATCH", "DELETE"}


def run_route(method, path):
    ids = fixtures()
    good_path = fill(path, ids)
    base = BASES.get(path, {})
    base_text = json.dumps(base)

    # Bad ids, in each parameter on its own.
    for name in params(path):
        for label, segment in BAD_SEGMENTS.items():
            check(method, fill(path, ids, segment(), name), base_text if method in WITH_BODY else None,
                  label=f"({name}: {label})")

    # Bad query strings.
    for query in BAD_QUERIES:
        check(method, f"{good_path}?{query}", base_text if method in WITH_BODY else None,
              label=f"(query {query})")

    # Bad headers.
    for headers in BAD_HEADERS:
        body = base_text if method in WITH_BODY else None
        check(method, good_path, body, headers=headers, label=f"(headers {list(headers)})")

    if method not in WITH_BODY:
        return
    # Bad bodies, then bad fields on top of a body the route accepts.
    for label, body in BAD_BODIES.items():
        check(method, good_path, body, label=f"(body: {label})")
    for field in BAD_FIELDS:
        body = dict(base)
        body.update(field)
        # Repeated with an Idempotency-Key: the layer reads the body first.
        check(method, good_path, json.dumps(body), label=f"(fields {list(field)})")
    for field in BAD_FIELDS[:8]:
        body = dict(base)
        body.update(field)
        check(method, good_path, json.dumps(body), headers={"Idempotency-Key": str(uuid.uuid4())},
              label=f"(idempotent, fields {list(field)})")


def send_oversized(method, path, headers, chunked):
    """Sends a body over the limit as a slow client would, watching for the answer
    between chunks: the server may answer (413) and close before the body is all
    sent. Returns (status, content type, body bytes)."""
    chunk = b"x" * (1024 * 1024)
    head = [f"{method} {path} HTTP/1.1", f"Host: {BASE.hostname}", "Content-Type: application/json"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {OVERSIZED}")
    with socket.create_connection((BASE.hostname, BASE.port), timeout=TIMEOUT) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sent = 0
        try:
            while sent < OVERSIZED:
                if select.select([sock], [], [], 0)[0]:
                    break
                data = (b"%x\r\n" % len(chunk) + chunk + b"\r\n") if chunked else chunk
                sock.sendall(data)
                sent += len(chunk)
            if chunked and sent >= OVERSIZED:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, response.getheader("Content-Type", ""), response.read()


def oversized():
    """Bodies over the limit: a 413 with the JSON error body, with and without a
    Content-Length and an Idempotency-Key, read no further than needed."""
    cases = [
        ("POST", "/threads", {}, False),
        ("POST", "/runs/wait", {}, True),
        ("PUT", "/store/items", {}, False),
        ("POST", "/threads", {"Idempotency-Key": str(uuid.uuid4())}, False),
        ("POST", "/runs", {"Idempotency-Key": str(uuid.uuid4())}, True),
    ]
    for method, path, headers, chunked in cases:
        what = f"{method} {path} (oversized, {'chunked' if chunked else 'with length'}, {list(headers)})"
        FAIL.sent += 1
        try:
            status, content_type, data = send_oversized(method, path, headers, chunked)
        except Exception as error:
            FAIL.add(what, f"no answer: {error!r}")
            continue
        if status != 413:
            FAIL.add(what, f"answered {status}, not 413: {data[:200]!r}")
        elif not content_type.startswith("application/json") or "detail" not in json.loads(data):
            FAIL.add(what, f"413 without the JSON error body: {content_type} {data[:200]!r}")


def unknown_routes():
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]:
        check(method, "/no/such/route", b"{}")
        check(method, "/threads/%FF/nothing", b"{}")
    check("PUT", "/threads", b"{}")
    check("DELETE", "/runs", b"{}")


def report_and_exit():
    if FAIL.items:
        print(f"[hostile] {len(FAIL.items)} failure(s) in {FAIL.sent} requests", file=sys.stderr)
        sys.exit(1)
    print(f"[hostile] {FAIL.sent} requests, no 5xx, every error JSON, server answering")
    sys.exit(0)


def main():
    if not alive():
        FAIL.add("GET /ok", "the server does not answer")
        report_and_exit()
    started = time.monotonic()
    for method, path in routes():
        if time.monotonic() > DEADLINE:
            FAIL.add(f"{method} {path}", "not reached: the suite ran past its deadline")
            break
        run_route(method, path)
    unknown_routes()
    oversized()
    if not alive():
        FAIL.add("GET /ok", "the server stopped answering after the suite")
    print(f"[hostile] done in {time.monotonic() - started:.1f} s")
    report_and_exit()


if __name__ == "__main__":
    main()
