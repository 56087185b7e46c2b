"""HTTP error bodies and status codes the SDKs branch on."""

import uuid

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from conftest import GRAPHS, spec_only


async def test_error_body_has_message_detail_and_sdk_reads_it(http):
    r = await http.get(f"/threads/{uuid.uuid4()}")
    assert r.status_code == 404
    body = r.json()
    assert body["detail"]
    with spec_only("SPEC A6: error bodies carry `message` (and `detail`)"):
        assert body["message"]


async def test_duplicate_thread_is_409(client, thread):
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=thread["thread_id"])


async def test_duplicate_assistant_is_409(client):
    a = await client.assistants.create(graph_id="echo")
    with pytest.raises(ConflictError):
        await client.assistants.create(graph_id="echo", assistant_id=a["assistant_id"])


async def test_unknown_run_is_404(client, thread):
    with pytest.raises(NotFoundError):
        await client.runs.get(thread["thread_id"], str(uuid.uuid4()))


async def test_search_limit_above_1000_is_rejected(http):
    r = await http.post("/threads/search", json={"limit": 1001})
    assert 400 <= r.status_code < 500


async def test_ok_endpoint(http):
    r = await http.get("/ok")
    assert r.status_code == 200 and r.json()["ok"] is True


async def test_info_endpoint_reports_a_version(http):
    r = await http.get("/info")
    assert r.status_code == 200
    assert "version" in r.json() and "flags" in r.json()
    # As the reference server: the langgraph the Python graphs run on, else null.
    if GRAPHS == "python":
        from importlib.metadata import version

        assert r.json()["langgraph_py_version"] == version("langgraph")
    else:
        assert r.json()["langgraph_py_version"] is None
