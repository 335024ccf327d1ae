// The official TypeScript MCP SDK's OAuth flow against a toolwright MCP server that is an OAuth
// protected resource, run by tool-mcp/tests/oauth.rs.
//
//   node oauth.mjs <MCP endpoint URL>
//
// The SDK gets a 401, finds the authorization server through the protected resource metadata,
// registers a client dynamically, and sends the user to the authorization endpoint with PKCE and
// `resource`; the user here is a fetch that reads the authorization server's redirect (it
// approves at once), as a browser would follow it to the redirect URI. The SDK then exchanges the
// code, connects again with the token, lists the tools and calls `whoami`, and this prints one
// JSON line per finding.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url] = process.argv.slice(2);
const out = (key, value) => console.log(JSON.stringify({ [key]: value }));

// Never contacted: the redirect is read from the authorization server's answer.
const REDIRECT_URL = "http://127.0.0.1:9/callback";

/** An in-memory OAuthClientProvider whose user approves at once. */
class Provider {
  constructor() {
    this.client = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.expectedState = undefined;
    this.code = undefined;
  }
  get redirectUrl() {
    return REDIRECT_URL;
  }
  get clientMetadata() {
    return {
      client_name: "toolwright-oauth-typescript",
      redirect_uris: [REDIRECT_URL],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    this.expectedState = crypto.randomUUID();
    return this.expectedState;
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(information) {
    this.client = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  async redirectToAuthorization(authorizationUrl) {
    const answer = await fetch(authorizationUrl, { redirect: "manual" });
    const location = answer.headers.get("location");
    if (answer.status !== 302 || !location) {
      throw new Error(`the authorization endpoint answered ${answer.status}: ${await answer.text()}`);
    }
    const redirect = new URL(location);
    if (redirect.searchParams.get("state") !== this.expectedState) {
      throw new Error(`state mismatch in ${location}`);
    }
    this.code = redirect.searchParams.get("code");
  }
}

const provider = new Provider();
const newClient = () => new Client({ name: "toolwright-oauth-test", version: "1.0.0" });

let client = newClient();
let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await client.connect(transport);
  out("unauthorized_first", false);
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
  out("unauthorized_first", true);
  await transport.finishAuth(provider.code);
  client = newClient();
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
}
out("scope", provider.saved?.scope ?? null);
out("protocol", transport.protocolVersion ?? null);

const { tools } = await client.listTools();
out("tools", tools.map((tool) => tool.name));
out("whoami", await client.callTool({ name: "whoami", arguments: {} }));
await client.close();
