"""Assistants: CRUD, search, count, versions, set-latest, introspection."""

import pytest
from langgraph_sdk.errors import NotFoundError

from conftest import marker, spec_only


async def test_create_get_update_delete_assistant(client):
    m = marker()
    created = await client.assistants.create(graph_id="echo", name=f"a-{m}", metadata={"e2e": m})
    assert created["graph_id"] == "echo"
    assert created["version"] == 1
    assert created["metadata"]["e2e"] == m
    aid = created["assistant_id"]

    got = await client.assistants.get(aid)
    assert got["assistant_id"] == aid and got["name"] == f"a-{m}"

    updated = await client.assistants.update(aid, metadata={"extra": 1}, name=f"b-{m}")
    assert updated["version"] == 2
    assert updated["name"] == f"b-{m}"
    assert updated["metadata"] == {"e2e": m, "extra": 1}  # metadata is shallow-merged

    await client.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        await client.assistants.get(aid)


async def test_create_with_if_exists_do_nothing_returns_existing(client):
    m = marker()
    first = await client.assistants.create(graph_id="echo", metadata={"e2e": m})
    again = await client.assistants.create(
        graph_id="echo", assistant_id=first["assistant_id"], if_exists="do_nothing", name="other"
    )
    assert again["assistant_id"] == first["assistant_id"]
    assert again["name"] == first["name"]


async def test_versions_are_listed_newest_first_and_set_latest_reactivates(client):
    m = marker()
    a = await client.assistants.create(graph_id="echo", name="v1", metadata={"e2e": m})
    aid = a["assistant_id"]
    await client.assistants.update(aid, name="v2")
    await client.assistants.update(aid, name="v3")

    versions = await client.assistants.get_versions(aid)
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert [v["name"] for v in versions] == ["v3", "v2", "v1"]

    latest = await client.assistants.set_latest(aid, 1)
    assert latest["version"] == 1 and latest["name"] == "v1"
    assert (await client.assistants.get(aid))["name"] == "v1"
    # set-latest mints no new version
    assert len(await client.assistants.get_versions(aid)) == 3


async def test_search_filters_by_metadata_and_graph_and_count_matches(client):
    m = marker()
    for graph in ("echo", "echo", "steps"):
        await client.assistants.create(graph_id=graph, metadata={"e2e": m})
    found = await client.assistants.search(metadata={"e2e": m}, limit=10)
    assert len(found) == 3
    assert {a["graph_id"] for a in found} == {"echo", "steps"}
    assert len(await client.assistants.search(metadata={"e2e": m}, graph_id="steps")) == 1
    assert await client.assistants.count(metadata={"e2e": m}) == 3
    assert await client.assistants.count(metadata={"e2e": m}, graph_id="echo") == 2


async def test_search_pages_with_x_pagination_next(client, http):
    m = marker()
    for _ in range(3):
        await client.assistants.create(graph_id="echo", metadata={"e2e": m})

    page = await client.assistants.search(metadata={"e2e": m}, limit=2, response_format="object")
    assert len(page["assistants"]) == 2
    assert page["next"] == "2"
    last = await client.assistants.search(metadata={"e2e": m}, limit=2, offset=2, response_format="object")
    assert len(last["assistants"]) == 1
    assert last["next"] is None

    raw = await http.post("/assistants/search", json={"metadata": {"e2e": m}, "limit": 2})
    assert raw.status_code == 200
    assert raw.headers["x-pagination-next"] == "2"


async def test_search_select_returns_only_selected_fields(client):
    m = marker()
    await client.assistants.create(graph_id="echo", metadata={"e2e": m})
    found = await client.assistants.search(metadata={"e2e": m}, select=["assistant_id", "graph_id"])
    assert len(found) == 1
    assert set(found[0]) == {"assistant_id", "graph_id"}


async def test_get_graph_lists_the_graph_nodes(client):
    graph = await client.assistants.get_graph("echo")
    ids = {n["id"] for n in graph["nodes"]}
    assert "echo" in ids
    assert any(e["target"] == "echo" for e in graph["edges"])


async def test_get_schemas_names_the_graph(client):
    a = await client.assistants.create(graph_id="echo", metadata={"e2e": marker()})
    schemas = await client.assistants.get_schemas(a["assistant_id"])
    assert schemas["graph_id"] == "echo"
    for key in ("input_schema", "output_schema", "state_schema", "config_schema", "context_schema"):
        assert key in schemas


async def test_graph_id_alias_is_accepted_on_assistant_reads(client):
    with spec_only("contract REC: graph id accepted as assistant id on GET /assistants/{id} /schemas and /subgraphs"):
        assert (await client.assistants.get("echo"))["graph_id"] == "echo"
        assert (await client.assistants.get_schemas("echo"))["graph_id"] == "echo"
        assert await client.assistants.get_subgraphs("echo") == {}


async def test_get_subgraphs_of_a_flat_graph_is_empty(client):
    a = await client.assistants.create(graph_id="echo", metadata={"e2e": marker()})
    assert await client.assistants.get_subgraphs(a["assistant_id"]) == {}
    assert await client.assistants.get_subgraphs(a["assistant_id"], recurse=True) == {}


async def test_unknown_assistant_is_not_found(client):
    with pytest.raises(NotFoundError):
        await client.assistants.get("00000000-0000-4000-8000-000000000000")


async def test_sync_client_creates_and_reads_assistants(sync_client):
    m = marker()
    a = sync_client.assistants.create(graph_id="steps", metadata={"e2e": m})
    assert sync_client.assistants.get(a["assistant_id"])["graph_id"] == "steps"
    assert sync_client.assistants.count(metadata={"e2e": m}) == 1
