// The taint scenario, shared by the v1 (client.mjs) and v2 (client-v2.mjs) TypeScript SDK
// clients against the example server (examples/mcp_server.rs). The client accepts every
// elicitation except the one `failing.next` makes fail. After an untrusted read, every write
// must ask the user: in the same turn, after an `ends_turn` tool ended the turn, after an
// approval, and after an elicitation failed. A money tool's request shows its amount.
// Prints one JSON line per finding for tests/mcp_clients.rs.

export async function taintScenario(client, asked, failing, out) {
  // Informed consent: the recharge's request names its amount, whatever its prompt says.
  const recharge = await client.callTool({
    name: "wallet__recharge",
    arguments: { amount_cents: 50000 },
  });
  out("recharge", recharge);
  out("recharge_asked", asked.splice(0));

  // Before any untrusted output, a write runs without asking.
  out("clean_write", await client.callTool({ name: "treehole__send_code", arguments: {} }));
  out("clean_asked", asked.length);

  out("read", await client.callTool({ name: "treehole__read", arguments: {} }));
  const steps = [];
  const call = async (label, name, args = {}) => {
    const before = asked.length;
    let result;
    try {
      result = await client.callTool({ name, arguments: args });
    } catch (error) {
      result = { thrown: String(error) };
    }
    steps.push({ label, asked: asked.length - before, result });
  };
  // (a) the same MCP session, the next call: asks.
  await call("write_after_read", "treehole__send_code");
  // ... approved, and the next one still asks; it ends the turn.
  await call("ends_turn", "react", { emoji: "👍" });
  // (b) a new turn after `ends_turn`: asks.
  await call("write_after_ends_turn", "treehole__send_code");
  // (c) an elicitation that fails leaves nothing approved, and the next write asks again.
  failing.next = true;
  await call("write_failed_elicitation", "treehole__send_code");
  await call("write_after_failed_elicitation", "treehole__send_code");
  out("steps", steps);
  out("asked", asked);
}
