"""The official Python MCP SDK (PyPI `mcp`) as a client of toolwright's MCP server.

    python client.py <url> <bearer token> <answer>
    python client.py stdio <answer> <server binary> [server args...]

Connects over streamable HTTP with a bearer token, or to a server it starts over stdio, declares
elicitation and answers each request with <answer> (accept | decline | cancel), lists every page
of tools, calls a read tool and a tool whose policy asks the user, and prints one JSON line per
finding for tests/mcp_clients.rs. With MCP_SCENARIO=taint it plays the taint scenario of
tests/mcp-clients/node/taint.mjs instead (the same calls, printing the same findings).
"""

import asyncio
import json
import os
import sys
from contextlib import asynccontextmanager

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def out(key, value):
    print(json.dumps({key: value}), flush=True)


def dump(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


@asynccontextmanager
async def connect(args):
    """The transport's (read, write) streams, and the answer to give each elicitation."""
    if args[0] == "stdio":
        server = StdioServerParameters(command=args[2], args=args[3:])
        async with stdio_client(server) as (read, write):
            yield read, write, args[1]
    else:
        url, token, answer = args
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                yield read, write, answer


async def taint_scenario(session, asked, failing):
    """tests/mcp-clients/node/taint.mjs, step for step."""
    out("recharge", dump(await session.call_tool("wallet__recharge", {"amount_cents": 50000})))
    out("recharge_asked", asked[:])
    asked.clear()
    out("clean_write", dump(await session.call_tool("treehole__send_code", {})))
    out("clean_asked", len(asked))
    out("read", dump(await session.call_tool("treehole__read", {})))
    steps = []

    async def call(label, name, arguments=None):
        before = len(asked)
        try:
            result = dump(await session.call_tool(name, arguments or {}))
        except Exception as error:  # noqa: BLE001 - the finding is what was thrown
            result = {"thrown": str(error)}
        steps.append({"label": label, "asked": len(asked) - before, "result": result})

    await call("write_after_read", "treehole__send_code")
    await call("ends_turn", "react", {"emoji": "👍"})
    await call("write_after_ends_turn", "treehole__send_code")
    failing["next"] = True
    await call("write_failed_elicitation", "treehole__send_code")
    await call("write_after_failed_elicitation", "treehole__send_code")
    out("steps", steps)
    out("asked", asked)


async def main(args) -> None:
    asked = []
    # Set by the taint scenario: the next elicitation fails as if the client's dialog broke.
    failing = {"next": False}

    async with connect(args) as (read, write, answer):

        async def on_elicit(context, params):
            asked.append(params.message)
            if failing["next"]:
                failing["next"] = False
                return types.ErrorData(code=-32603, message="the approval dialog crashed")
            return types.ElicitResult(action=answer, content={} if answer == "accept" else None)

        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            init = await session.initialize()
            out("server", init.server_info.name)
            out("protocol", init.protocol_version)
            if os.environ.get("MCP_SCENARIO") == "taint":
                await taint_scenario(session, asked, failing)
                return
            names = []
            cursor = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                names.extend(tool.name for tool in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            out("tools", names)
            status = await session.call_tool("get_service_status", {"service": "payment-api"})
            out("status", dump(status))
            restart = await session.call_tool(
                "restart_service",
                {"service": "payment-api", "reason": "memory leak after the 2.3 deploy"},
            )
            out("restart", dump(restart))
            out("asked", asked)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
