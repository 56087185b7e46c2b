"""SPEC "Limits": a search without `limit` returns up to SERVICE_MAX_PAGE_SIZE rows
(default 1000) on every search route, not 10; a `limit` above 1000 is rejected.
The SDKs always send `limit` (default 10), so these go over plain HTTP."""

import pytest

from conftest import marker, spec_only

ROWS = 12


async def twelve_of_each(client, m: str) -> None:
    for n in range(ROWS):
        await client.threads.create(metadata={"e2e": m})
        await client.assistants.create("echo", metadata={"e2e": m}, name=f"limits {n}")
        await client.crons.create("echo", schedule="0 0 1 1 *", input={}, metadata={"e2e": m})
        await client.store.put_item([m], f"k{n}", {"n": n})


@pytest.mark.parametrize("limit", [None, 10])
async def test_a_search_without_limit_returns_more_than_10(client, http, limit):
    m = marker()
    await twelve_of_each(client, m)
    bodies = {
        "/threads/search": {"metadata": {"e2e": m}},
        "/assistants/search": {"metadata": {"e2e": m}},
        "/runs/crons/search": {"metadata": {"e2e": m}},
        "/store/items/search": {"namespace_prefix": [m]},
    }
    for path, body in bodies.items():
        if limit is not None:
            body = {**body, "limit": limit}
        reply = await http.post(path, json=body)
        assert reply.status_code == 200, reply.text
        rows = reply.json()
        rows = rows["items"] if isinstance(rows, dict) else rows
        with spec_only("the reference server defaults an omitted limit to 10"):
            assert len(rows) == (limit or ROWS), path
    for cron in await client.crons.search(metadata={"e2e": m}, limit=ROWS):
        await client.crons.delete(cron["cron_id"])


async def test_a_search_limit_above_1000_is_rejected_422(http):
    for path in ["/threads/search", "/assistants/search", "/runs/crons/search", "/store/items/search"]:
        reply = await http.post(path, json={"limit": 1001})
        assert reply.status_code == 422, path
        assert "1001 is greater than the maximum of 1000" in reply.text
