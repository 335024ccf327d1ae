// The official TypeScript MCP SDK as a client of toolwright's MCP server.
//
//   node client.mjs stdio <server binary> [server args...]
//   node client.mjs http <url> <bearer token>
//
// It declares elicitation and accepts every request, lists every page of tools, calls a read
// tool, a tool whose policy asks the user, and a tool with invalid input, and prints one JSON
// line per finding for tests/mcp_clients.rs to check. With MCP_SCENARIO=taint it plays the
// taint scenario of taint.mjs instead.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: rest, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target), {
        requestInit: { headers: { Authorization: `Bearer ${rest[0]}` } },
      });

const client = new Client(
  { name: "toolwright-node-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
const asked = [];
// Set by the taint scenario: the next elicitation fails as if the client's dialog broke.
const failing = { next: false };
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  if (failing.next) {
    failing.next = false;
    throw new Error("the approval dialog crashed");
  }
  return { action: "accept", content: {} };
});

const out = (key, value) => console.log(JSON.stringify({ [key]: value }));

await client.connect(transport);
if (process.env.MCP_SCENARIO === "taint") {
  const { taintScenario } = await import("./taint.mjs");
  await taintScenario(client, asked, failing, out);
  await client.close();
  process.exit(0);
}
out("server", client.getServerVersion());
out("protocol", transport.protocolVersion ?? null);

const names = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  for (const tool of page.tools) {
    names.push(tool.name);
    if (tool.name === "get_service_status") out("status_tool", tool);
  }
  cursor = page.nextCursor;
} while (cursor);
out("tools", names);

const status = await client.callTool({
  name: "get_service_status",
  arguments: { service: "payment-api" },
});
out("status", status);

const restart = await client.callTool({
  name: "restart_service",
  arguments: { service: "payment-api", reason: "memory leak after the 2.3 deploy" },
});
out("restart", restart);
out("asked", asked);

const invalid = await client.callTool({ name: "get_service_status", arguments: { service: "" } });
out("invalid", invalid);

await client.close();
