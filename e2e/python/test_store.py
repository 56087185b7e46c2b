"""Store: put / get / delete / search with filters / namespaces, and the `memory` graph."""

import pytest

from conftest import marker, spec_only


@pytest.fixture
def ns():
    return ["e2e", marker()]


async def test_put_get_delete_item(client, ns):
    await client.store.put_item(ns, key="k", value={"a": 1})
    item = await client.store.get_item(ns, key="k")
    assert item["namespace"] == ns and item["key"] == "k" and item["value"] == {"a": 1}
    assert item["created_at"] and item["updated_at"]

    await client.store.put_item(ns, key="k", value={"a": 2})
    assert (await client.store.get_item(ns, key="k"))["value"] == {"a": 2}

    await client.store.delete_item(ns, key="k")
    assert await client.store.get_item(ns, key="k") is None


async def test_missing_item_is_null_not_404(client, http, ns):
    assert await client.store.get_item(ns, key="nope") is None
    r = await http.get("/store/items", params={"namespace": ".".join(ns), "key": "nope"})
    assert r.status_code == 200 and r.json() is None


async def test_delete_of_a_missing_item_succeeds(client, ns):
    await client.store.delete_item(ns, key="never-written")


async def test_search_by_namespace_prefix(client, ns):
    await client.store.put_item(ns + ["a"], key="1", value={"v": 1})
    await client.store.put_item(ns + ["b"], key="2", value={"v": 2})
    await client.store.put_item(["e2e", marker()], key="3", value={"v": 3})
    found = (await client.store.search_items(ns, limit=10))["items"]
    assert sorted(i["key"] for i in found) == ["1", "2"]
    assert all("score" in i and i["score"] is None for i in found)
    assert [i["key"] for i in (await client.store.search_items(ns + ["a"]))["items"]] == ["1"]


async def test_search_paging(client, ns):
    for k in range(5):
        await client.store.put_item(ns, key=f"k{k}", value={"v": k})
    first = (await client.store.search_items(ns, limit=2))["items"]
    rest = (await client.store.search_items(ns, limit=10, offset=2))["items"]
    assert len(first) == 2 and len(rest) == 3
    assert {i["key"] for i in first} | {i["key"] for i in rest} == {f"k{k}" for k in range(5)}


async def test_search_filter_equality_and_operators(client, ns):
    await client.store.put_item(ns, key="a", value={"n": 1, "color": "red"})
    await client.store.put_item(ns, key="b", value={"n": 5, "color": "blue"})
    await client.store.put_item(ns, key="c", value={"n": 9, "color": "red"})

    async def keys(flt):
        return sorted(i["key"] for i in (await client.store.search_items(ns, filter=flt, limit=10))["items"])

    assert await keys({"color": "red"}) == ["a", "c"]
    assert await keys({"n": {"$gt": 2}}) == ["b", "c"]
    assert await keys({"n": {"$gte": 5, "$lt": 9}}) == ["b"]
    assert await keys({"n": {"$lte": 1}}) == ["a"]
    assert await keys({"color": {"$ne": "red"}}) == ["b"]
    assert await keys({"color": {"$eq": "blue"}}) == ["b"]
    assert await keys({"color": "red", "n": {"$gt": 5}}) == ["c"]  # keys are ANDed


async def test_search_filter_in_nin_and_absent_keys(client, ns):
    await client.store.put_item(ns, key="a", value={"n": 1})
    await client.store.put_item(ns, key="b", value={"n": 2})
    await client.store.put_item(ns, key="c", value={"other": True})

    async def keys(flt):
        return sorted(i["key"] for i in (await client.store.search_items(ns, filter=flt, limit=10))["items"])

    with spec_only("SPEC store filter rules: $in/$nin, absent keys match $ne/$nin only, ordering ops compare numbers"):
        assert await keys({"n": {"$in": [1, 3]}}) == ["a"]
        assert await keys({"n": {"$nin": [1]}}) == ["b", "c"]  # absent key matches $nin
        assert await keys({"n": {"$ne": 1}}) == ["b", "c"]  # absent key matches $ne
        assert await keys({"n": {"$gt": 0}}) == ["a", "b"]  # absent key never matches ordering ops
        assert await keys({"n": {}}) == ["a", "b", "c"]  # empty operator object matches everything


async def test_search_filter_unknown_operator_is_400(http, ns):
    r = await http.post("/store/items/search", json={"namespace_prefix": ns, "filter": {"n": {"$regex": "x"}}})
    with spec_only("SPEC: unknown filter operator -> 400"):
        assert r.status_code == 400


async def test_list_namespaces_with_prefix_suffix_and_max_depth(client, ns):
    await client.store.put_item(ns + ["users", "u1"], key="k", value={})
    await client.store.put_item(ns + ["users", "u2"], key="k", value={})
    await client.store.put_item(ns + ["teams", "t1"], key="k", value={})

    listed = (await client.store.list_namespaces(prefix=ns))["namespaces"]
    assert listed == [ns + ["teams", "t1"], ns + ["users", "u1"], ns + ["users", "u2"]]
    assert (await client.store.list_namespaces(prefix=ns, suffix=["u2"]))["namespaces"] == [ns + ["users", "u2"]]
    depth = (await client.store.list_namespaces(prefix=ns, max_depth=3))["namespaces"]
    assert depth == [ns + ["teams"], ns + ["users"]]
    assert len((await client.store.list_namespaces(prefix=ns, limit=1))["namespaces"]) == 1
    assert (await client.store.list_namespaces(prefix=ns, limit=1, offset=2))["namespaces"] == [ns + ["users", "u2"]]


async def test_list_namespaces_prefix_wildcard_matches_one_segment(client, ns):
    await client.store.put_item(ns + ["x", "leaf"], key="k", value={})
    await client.store.put_item(ns + ["y", "leaf"], key="k", value={})
    found = (await client.store.list_namespaces(prefix=ns + ["*", "leaf"]))["namespaces"]
    assert found == [ns + ["x", "leaf"], ns + ["y", "leaf"]]


async def test_memory_graph_counts_items_in_the_store(client):
    user = marker()
    first = await client.runs.wait(None, "memory", input={"user": user, "key": "a", "text": "one"})
    assert first["count"] == 1
    second = await client.runs.wait(None, "memory", input={"user": user, "key": "b", "text": "two"})
    assert second["count"] == 2
    again = await client.runs.wait(None, "memory", input={"user": user, "key": "a", "text": "uno"})
    assert again["count"] == 2  # same key overwrites

    items = (await client.store.search_items(["memories", user], limit=10))["items"]
    assert {i["key"]: i["value"]["text"] for i in items} == {"a": "uno", "b": "two"}
    assert (await client.store.get_item(["memories", user], key="b"))["value"] == {"text": "two"}
