"""The official Python MCP SDK against a bdk agent's /v1/mcp and /v1/mcp/tools.

usage: mcp_client.py BASE_URL TOKEN

Prints one JSON object per line: {"step": ..., ...}. The Rust test reads and checks them.
"""

import asyncio
import json
import sys

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


async def refused_without_token(base):
    async with httpx.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"}}}
        response = await http.post(base + "/v1/mcp", json=body,
                                   headers={"Accept": "application/json, text/event-stream"})
        emit("no_token", status=response.status_code)
    try:
        with anyio_timeout(10):
            async with streamablehttp_client(base + "/v1/mcp") as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
        emit("sdk_no_token", refused=False)
    except BaseException as error:  # the SDK raises from its task group
        emit("sdk_no_token", refused=True, error=type(error).__name__)


class anyio_timeout:
    def __init__(self, seconds):
        import anyio
        self.scope = anyio.fail_after(seconds)

    def __enter__(self):
        return self.scope.__enter__()

    def __exit__(self, *exc):
        return self.scope.__exit__(*exc)


async def agent(base, token):
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(base + "/v1/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            emit("initialize", server=init.serverInfo.name, protocol=init.protocolVersion)
            tools = await session.list_tools()
            emit("list_tools", names=[t.name for t in tools.tools])
            asked = await session.call_tool("ask", {"message": "hello from python", "waitSeconds": 0})
            report = asked.structuredContent
            emit("ask", report=report, isError=asked.isError)
            polls = 0
            while report["status"] == "running" and polls < 50:
                polls += 1
                checked = await session.call_tool("check", {"sessionId": report["sessionId"], "waitSeconds": 5})
                report = checked.structuredContent
            emit("check", report=report, polls=polls)
            again = await session.call_tool("ask", {"message": "second", "sessionId": report["sessionId"], "waitSeconds": 20})
            emit("follow_up", report=again.structuredContent)
            called = await session.call_tool("call_tool", {"name": "add", "input": {"a": 2, "b": 3}})
            emit("call_tool", result=called.structuredContent, isError=called.isError)
            unknown = await session.call_tool("call_tool", {"name": "nope", "input": {}})
            emit("call_tool_unknown", result=unknown.structuredContent, isError=unknown.isError)


async def server_tools(base, token):
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(base + "/v1/mcp/tools", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            emit("tools_list", tools=[{"name": t.name, "inputSchema": t.inputSchema,
                                       "outputSchema": t.outputSchema} for t in tools.tools])
            added = await session.call_tool("add", {"a": 20, "b": 22})
            emit("tools_call", structured=added.structuredContent, isError=added.isError)
            invalid = await session.call_tool("add", {"a": "x"})
            emit("tools_invalid", structured=invalid.structuredContent, isError=invalid.isError)


async def main():
    base, token = sys.argv[1], sys.argv[2]
    await refused_without_token(base)
    await agent(base, token)
    await server_tools(base, token)
    emit("done")


asyncio.run(main())
