"""Crons: create (stateless and on a thread), search, count, update, delete.

Schedules are chosen never to fire during the test (once a year).
"""

import pytest
from langgraph_sdk.errors import APIStatusError, NotFoundError

from conftest import marker

YEARLY = "0 0 1 1 *"


async def test_create_stateless_cron_and_find_it(client):
    m = marker()
    cron = await client.crons.create("echo", schedule=YEARLY, input={"messages": []}, metadata={"e2e": m})
    assert cron["cron_id"]
    assert cron["schedule"] == YEARLY
    assert cron["thread_id"] is None
    assert cron["enabled"] is True
    assert cron["next_run_date"]
    assert cron["metadata"]["e2e"] == m

    found = await client.crons.search(metadata={"e2e": m})
    assert [c["cron_id"] for c in found] == [cron["cron_id"]]
    assert await client.crons.count(metadata={"e2e": m}) == 1
    await client.crons.delete(cron["cron_id"])


async def test_create_cron_for_a_thread(client, thread):
    cron = await client.crons.create_for_thread(thread["thread_id"], "echo", schedule=YEARLY, input={"messages": []})
    assert cron["thread_id"] == thread["thread_id"]
    found = await client.crons.search(thread_id=thread["thread_id"])
    assert [c["cron_id"] for c in found] == [cron["cron_id"]]
    assert await client.crons.count(thread_id=thread["thread_id"]) == 1
    await client.crons.delete(cron["cron_id"])


async def test_update_cron_changes_schedule_and_pauses(client):
    m = marker()
    cron = await client.crons.create("echo", schedule=YEARLY, input={}, metadata={"e2e": m})
    updated = await client.crons.update(cron["cron_id"], schedule="0 0 2 1 *", enabled=False, metadata={"more": 1})
    assert updated["cron_id"] == cron["cron_id"]
    assert updated["schedule"] == "0 0 2 1 *"
    assert updated["enabled"] is False
    assert updated["metadata"]["e2e"] == m and updated["metadata"]["more"] == 1

    assert [c["cron_id"] for c in await client.crons.search(metadata={"e2e": m}, enabled=False)] == [cron["cron_id"]]
    assert await client.crons.search(metadata={"e2e": m}, enabled=True) == []
    await client.crons.delete(cron["cron_id"])


async def test_delete_cron_removes_it(client):
    m = marker()
    cron = await client.crons.create("steps", schedule=YEARLY, input={"n": 1}, metadata={"e2e": m})
    await client.crons.delete(cron["cron_id"])
    assert await client.crons.count(metadata={"e2e": m}) == 0
    with pytest.raises(NotFoundError):
        await client.crons.delete(cron["cron_id"])


async def test_invalid_schedule_is_rejected(client):
    with pytest.raises(APIStatusError) as err:
        await client.crons.create("echo", schedule="not a cron", input={})
    assert err.value.status_code in (400, 422)


async def test_search_pages(client):
    m = marker()
    ids = [(await client.crons.create("echo", schedule=YEARLY, input={}, metadata={"e2e": m}))["cron_id"] for _ in range(3)]
    page1 = await client.crons.search(metadata={"e2e": m}, limit=2)
    page2 = await client.crons.search(metadata={"e2e": m}, limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 1
    assert {c["cron_id"] for c in page1 + page2} == set(ids)
    for cid in ids:
        await client.crons.delete(cid)


async def test_search_sends_the_pagination_headers(client, http):
    m = marker()
    ids = [(await client.crons.create("echo", schedule=YEARLY, input={}, metadata={"e2e": m}))["cron_id"] for _ in range(3)]
    first = await http.post("/runs/crons/search", json={"metadata": {"e2e": m}, "limit": 2})
    assert first.headers["x-pagination-next"] == "2"
    assert first.headers["x-pagination-total"] == "3"
    last = await http.post("/runs/crons/search", json={"metadata": {"e2e": m}, "limit": 2, "offset": 2})
    assert "x-pagination-next" not in last.headers
    assert len(last.json()) == 1
    for cid in ids:
        await client.crons.delete(cid)
