// The v2 TypeScript MCP SDK (`@modelcontextprotocol/client`, protocol 2026-07-28) as a client
// of toolwright's MCP server over stdio:
//
//   node client-v2.mjs <server binary> [server args...]
//
// On 2026-07-28 the server cannot send requests to the client: a call that needs the user answers
// with an `input_required` result, which the SDK fulfils through the elicitation handler and
// retries with `inputResponses` and the sealed `requestState`. Prints one JSON line per finding.
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client(
  { name: "toolwright-node-v2-test", version: "1.0.0" },
  {
    capabilities: { elicitation: { form: {} } },
    // The modern era at exactly 2026-07-28: `server/discover`, no `initialize`.
    versionNegotiation: { mode: { pin: "2026-07-28" } },
  },
);
const asked = [];
client.setRequestHandler("elicitation/create", async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: {} };
});
const out = (key, value) => console.log(JSON.stringify({ [key]: value }));

await client.connect(transport);
out("protocol", client.getNegotiatedProtocolVersion() ?? null);
const status = await client.callTool({ name: "get_service_status", arguments: { service: "payment-api" } });
out("status", status);
const restart = await client.callTool({
  name: "restart_service",
  arguments: { service: "payment-api", reason: "memory leak after the 2.3 deploy" },
});
out("restart", restart);
out("asked", asked);
await client.close();
