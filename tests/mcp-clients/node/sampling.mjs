// The official TypeScript MCP SDKs as clients whose model a toolwright tool asks (MCP sampling):
//
//   node sampling.mjs v1 <url> [nosampling]   # @modelcontextprotocol/sdk, 2025-11-25
//   node sampling.mjs v2 <url> [nosampling]   # @modelcontextprotocol/client, 2026-07-28
//
// The client's "model" answers from the request alone, so the test can check what reached it:
// JSON for a question that asks for JSON (the result schema is in the system prompt), else
// "Summary of <prompt>". v1 answers `sampling/createMessage` while the tool runs; v2 gets the
// request in an `input_required` result, answers it and calls again. With `nosampling` the
// client declares no sampling. Prints one JSON line per finding.
const [sdk, url, mode] = process.argv.slice(2);
const sampling = mode !== "nosampling";
const capabilities = sampling ? { sampling: {} } : {};
const info = { name: "toolwright-node-sampling-test", version: "1.0.0" };

let client;
let transport;
if (sdk === "v1") {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import(
    "@modelcontextprotocol/sdk/client/streamableHttp.js"
  );
  client = new Client(info, { capabilities });
  transport = new StreamableHTTPClientTransport(new URL(url));
} else {
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  client = new Client(info, {
    capabilities,
    versionNegotiation: { mode: { pin: "2026-07-28" } },
  });
  transport = new StreamableHTTPClientTransport(new URL(url));
}

const asked = [];
const answer = async (request) => {
  const params = request.params;
  asked.push({
    systemPrompt: params.systemPrompt ?? null,
    maxTokens: params.maxTokens,
    messages: params.messages,
  });
  const prompt = params.messages.at(-1).content.text;
  const text = (params.systemPrompt ?? "").includes("JSON Schema")
    ? '```json\n{"spam": true, "reason": "sells watches"}\n```'
    : `Summary of ${prompt.replace(/^Summarize: /, "")}`;
  return {
    role: "assistant",
    content: { type: "text", text },
    model: `node-${sdk}-model`,
    stopReason: "endTurn",
  };
};
if (sampling) {
  if (sdk === "v1") {
    const { CreateMessageRequestSchema } = await import("@modelcontextprotocol/sdk/types.js");
    client.setRequestHandler(CreateMessageRequestSchema, answer);
  } else {
    client.setRequestHandler("sampling/createMessage", answer);
  }
}

const out = (key, value) => console.log(JSON.stringify({ [key]: value }));

await client.connect(transport);
out("protocol", sdk === "v1" ? transport.protocolVersion ?? null : client.getNegotiatedProtocolVersion() ?? null);
out("summary", await client.callTool({ name: "summarize", arguments: { text: "the Q3 report" } }));
out("verdict", await client.callTool({ name: "classify", arguments: { text: "buy cheap watches" } }));
out("asked", asked);
await client.close();
