"""The official Python MCP SDK (PyPI `mcp`) as a client of toolwright's MCP server.

    python client.py <url> <bearer token> <answer>

Connects over streamable HTTP with a bearer token, declares elicitation and answers each request
with <answer> (accept | decline | cancel), lists every page of tools, calls a read tool and a tool
whose policy asks the user, and prints one JSON line per finding for tests/mcp_clients.rs.
"""

import asyncio
import json
import sys

import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def out(key, value):
    print(json.dumps({key: value}), flush=True)


async def main(url: str, token: str, answer: str) -> None:
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=answer, content={} if answer == "accept" else None)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
                init = await session.initialize()
                out("server", init.server_info.name)
                out("protocol", init.protocol_version)
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
                out("status", status.model_dump(mode="json", by_alias=True, exclude_none=True))
                restart = await session.call_tool(
                    "restart_service",
                    {"service": "payment-api", "reason": "memory leak after the 2.3 deploy"},
                )
                out("restart", restart.model_dump(mode="json", by_alias=True, exclude_none=True))
                out("asked", asked)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
