// The v2 TypeScript MCP SDK (`@modelcontextprotocol/client`, protocol 2026-07-28) as a client
// of toolwright's MCP server, over stdio or streamable HTTP:
//
//   node client-v2.mjs <server binary> [server args...]
//   node client-v2.mjs http <url> <bearer token> [Toolwright-Session value]
//
// With MCP_SCENARIO=taint it plays the taint scenario of taint.mjs; with MCP_SCENARIO=write it
// only calls a write tool (to see whether the requests' binding is tainted).
//
// On 2026-07-28 the server cannot send requests to the client: a call that needs the user answers
// with an `input_required` result, which the SDK fulfils through the elicitation handler and
// retries with `inputResponses` and the sealed `requestState`. Prints one JSON line per finding.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [command, ...args] = process.argv.slice(2);
let transport;
if (command === "http") {
  const [url, token, conversation] = args;
  const headers = { Authorization: `Bearer ${token}` };
  if (conversation) headers["Toolwright-Session"] = conversation;
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
} else {
  transport = new StdioClientTransport({ command, args, stderr: "inherit" });
}
const client = new Client(
  { name: "toolwright-node-v2-test", version: "1.0.0" },
  {
    capabilities: { elicitation: { form: {} } },
    // The modern era at exactly 2026-07-28: `server/discover`, no `initialize`.
    versionNegotiation: { mode: { pin: "2026-07-28" } },
  },
);
const asked = [];
// Set by the taint scenario: the next elicitation fails as if the client's dialog broke.
const failing = { next: false };
client.setRequestHandler("elicitation/create", async (request) => {
  asked.push(request.params.message);
  if (failing.next) {
    failing.next = false;
    throw new Error("the approval dialog crashed");
  }
  return { action: "accept", content: {} };
});
const out = (key, value) => console.log(JSON.stringify({ [key]: value }));

await client.connect(transport);
out("protocol", client.getNegotiatedProtocolVersion() ?? null);
if (process.env.MCP_SCENARIO === "taint") {
  const { taintScenario } = await import("./taint.mjs");
  await taintScenario(client, asked, failing, out);
  await client.close();
  process.exit(0);
}
if (process.env.MCP_SCENARIO === "write") {
  const write = await client.callTool({ name: "treehole__send_code", arguments: {} });
  out("write", write);
  out("asked", asked);
  await client.close();
  process.exit(0);
}
const status = await client.callTool({ name: "get_service_status", arguments: { service: "payment-api" } });
out("status", status);
const restart = await client.callTool({
  name: "restart_service",
  arguments: { service: "payment-api", reason: "memory leak after the 2.3 deploy" },
});
out("restart", restart);
out("asked", asked);
await client.close();
