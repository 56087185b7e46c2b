"""MCP at /mcp with the official MCP Python client (`mcp`) as a real client.

The client probes with `server/discover`, falls back to `initialize` on -32601, then
lists the assistants as tools and calls them; each call is a blocking run. Under
auth (a server of its own with API keys) a client without a key gets a 401.
"""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from conftest import BASE_URL, marker, own_server

HELLO = {"messages": [{"type": "human", "content": "hello"}]}


def mcp_client(url: str, headers: dict[str, str] | None = None, statuses: list[int] | None = None) -> Client:
    """A client of `url`/mcp sending `headers` (an API key) with every request; the
    status of every answer is appended to `statuses` (the client does not report it)."""
    http = create_mcp_http_client(headers=headers)
    if statuses is not None:

        async def record(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        http.event_hooks["response"].append(record)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


async def test_the_official_client_lists_the_example_assistants_as_tools():
    async with mcp_client(BASE_URL) as client:
        listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    for graph in ("echo", "steps", "fail"):
        assert graph in tools, sorted(tools)
        assert tools[graph].title == graph
        assert tools[graph].input_schema.get("type") == "object"


async def test_calling_echo_answers_its_last_ai_message():
    async with mcp_client(BASE_URL) as client:
        result = await client.call_tool("echo", HELLO)
    assert not result.is_error
    assert [block.text for block in result.content] == ["echo: hello"]


async def test_a_failing_run_is_a_tool_result_with_is_error():
    async with mcp_client(BASE_URL) as client:
        result = await client.call_tool("fail", {})
    assert result.is_error
    assert result.content and result.content[0].text


async def test_an_unknown_tool_is_an_invalid_params_error():
    async with mcp_client(BASE_URL) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool(f"nothing-{marker()}", {})
    assert raised.value.error.code == -32602


async def test_an_assistant_named_with_spaces_is_a_tool_with_a_safe_name():
    name = f"My echo {marker()[:8]}"
    async with httpx.AsyncClient(base_url=BASE_URL) as http:
        created = await http.post("/assistants", json={"graph_id": "echo", "name": name})
        created.raise_for_status()
        try:
            async with mcp_client(BASE_URL) as client:
                tools = []
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                (tool,) = [tool for tool in tools if tool.title == name]
                assert tool.name == name.replace(" ", "_")
                result = await client.call_tool(tool.name, HELLO)
                assert [block.text for block in result.content] == ["echo: hello"]
        finally:
            await http.delete(f"/assistants/{created.json()['assistant_id']}")


async def test_under_auth_a_call_without_a_key_is_401_and_one_with_a_key_runs():
    key = f"mcp-key-{marker()}"
    config = {"auth": {"api_keys": {f"mcp-{marker()}": key}}}
    with own_server(config) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            assert (await http.post("/mcp", json=ping)).status_code == 401
        statuses: list[int] = []
        with pytest.raises(Exception):
            async with mcp_client(url, statuses=statuses) as client:
                await client.list_tools()
        assert statuses and set(statuses) == {401}, statuses
        async with mcp_client(url, headers={"x-api-key": key}) as client:
            result = await client.call_tool("echo", HELLO)
        assert [block.text for block in result.content] == ["echo: hello"]
