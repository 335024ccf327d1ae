"""A stdio MCP server whose tool list pages badly, for testing toolwright's MCP client.

    python tests/mcp-servers/paging.py endless|repeating|restless COUNT_FILE

JSON-RPC 2.0 over stdin and stdout, one message a line, written by hand (the official SDKs do
not page badly): `initialize`, `ping` and `tools/list` are answered, anything else gets
"method not found". Each `tools/list` page holds one tool, `t<N>`, and a `nextCursor`:

    endless     the next number, forever
    repeating   "again", always (the cursor never moves on)
    restless    none (one page), and right after it `notifications/tools/list_changed`: the
                server says its tools changed every time it has listed them

COUNT_FILE gets the number of `tools/list` requests answered so far, rewritten after each one.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    mode, count_file = sys.argv[1], sys.argv[2]
    pages = 0
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if "id" not in message:
            continue  # a notification (`notifications/initialized`)
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "paging", "version": "0"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            cursor = (message.get("params") or {}).get("cursor")
            page = int(cursor) if mode == "endless" and cursor else 0
            pages += 1
            # Replaced whole, so a test reading it never sees it half written.
            with open(count_file + ".new", "w") as count:
                count.write(str(pages))
            os.replace(count_file + ".new", count_file)
            result = {"tools": [{"name": f"t{page}", "inputSchema": {"type": "object"}}]}
            if mode != "restless":
                result["nextCursor"] = str(page + 1) if mode == "endless" else "again"
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            print(json.dumps(reply), flush=True)
            if mode == "restless":
                changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                print(json.dumps(changed), flush=True)
            continue
        else:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": f"method not found: {method}"},
            }
            print(json.dumps(reply), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if __name__ == "__main__":
    main()
