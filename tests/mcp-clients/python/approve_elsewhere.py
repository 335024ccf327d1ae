"""The official Python MCP SDK as a client whose user takes their time to answer.

    python approve_elsewhere.py <url> <go file>

Connects over streamable HTTP, declares elicitation, and calls `restart_service`. When the
server asks for approval it prints `ELICITED` and waits until <go file> exists before it
accepts (an operator may answer elsewhere meanwhile). Prints `RESULT <json>` with the call's
result, for tests/example_console.rs.
"""

import asyncio
import json
import os
import sys

import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url, go_file):
    async with streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]

        async def on_elicit(context, params):
            print("ELICITED", flush=True)
            for _ in range(600):
                if os.path.exists(go_file):
                    break
                await asyncio.sleep(0.1)
            return types.ElicitResult(action="accept", content={})

        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            await session.initialize()
            result = await session.call_tool(
                "restart_service",
                {"service": "payment-api", "reason": "stuck after the 14:00 deploy"},
            )
            dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            print("RESULT " + json.dumps(dumped), flush=True)


asyncio.run(main(sys.argv[1], sys.argv[2]))
