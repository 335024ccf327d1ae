"""The official Python MCP SDK's OAuth flow against a toolwright MCP server that is an OAuth
protected resource, run by tool-mcp/tests/oauth.rs.

    python oauth.py <MCP endpoint URL>

The SDK's `OAuthClientProvider` (httpx auth) gets a 401, finds the authorization server through
the protected resource metadata, registers a client dynamically, and sends the user to the
authorization endpoint with PKCE and `resource`; the user here is a request that reads the
authorization server's redirect (it approves at once), as a browser would follow it to the
redirect URI. The SDK exchanges the code and retries with the token; the session lists the tools
and calls `whoami`, and this prints one JSON line per finding.
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

# Never contacted: the redirect is read from the authorization server's answer.
REDIRECT_URL = "http://127.0.0.1:9/callback"


def out(key, value):
    print(json.dumps({key: value}), flush=True)


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def main(url: str) -> None:
    redirected: dict[str, str] = {}
    statuses: list[int] = []

    async def redirect_handler(authorization_url: str) -> None:
        # The user approves at once: read where the authorization server sends the browser.
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            answer = await http.get(authorization_url)
        if answer.status_code != 302:
            raise RuntimeError(f"the authorization endpoint answered {answer.status_code}: {answer.text}")
        query = parse_qs(urlparse(answer.headers["location"]).query)
        redirected.update({key: values[0] for key, values in query.items()})

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=redirected["code"], state=redirected.get("state"), iss=redirected.get("iss")
        )

    async def record(response: httpx2.Response) -> None:
        if response.request.url == httpx2.URL(url):
            statuses.append(response.status_code)

    storage = Memory()
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="toolwright-oauth-python",
            redirect_uris=[AnyUrl(REDIRECT_URL)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=auth, event_hooks={"response": [record]}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out("protocol", init.protocol_version)
                tools = await session.list_tools()
                out("tools", [tool.name for tool in tools.tools])
                whoami = await session.call_tool("whoami", {})
                out("whoami", whoami.model_dump(mode="json", by_alias=True, exclude_none=True))
    out("unauthorized_first", bool(statuses) and statuses[0] == 401)
    out("scope", storage.tokens.scope if storage.tokens else None)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
