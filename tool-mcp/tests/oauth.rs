//! The HTTP server as an OAuth 2.1 protected resource, against an authorization server the test
//! starts on loopback (`support/authorization_server.rs`) and checked through token
//! introspection (`IntrospectionVerifier`): the metadata document at both well-known paths, the
//! `WWW-Authenticate` challenges, tokens for another resource or without the required scope
//! refused, and the official TypeScript and Python SDKs completing their whole authorization
//! flow (discovery, dynamic registration, PKCE, `resource`) and calling a tool as the user who
//! authorized. `scripts/setup-clients` installs both SDKs; a missing one fails these tests.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SqliteStore};
use toolwright::{Principal, Registry};
use toolwright_mcp::{
    HttpHandle, IntrospectionVerifier, McpError, McpHttp, McpServer, ProtectedResource,
    TokenVerifier,
};

#[path = "support/authorization_server.rs"]
mod authorization_server;

use authorization_server::{AuthorizationServer, INTROSPECTION_CLIENT, Issued};

#[derive(Serialize, JsonSchema)]
struct Caller {
    id: Option<String>,
    issuer: Option<String>,
    client: Option<String>,
}

/// Says who calls.
#[tool(effect = read, output_schema)]
async fn whoami(_: NoInput, ctx: ToolContext) -> Caller {
    let caller = ctx.current();
    Caller {
        id: caller.map(|p| p.principal_id.clone()),
        issuer: caller.and_then(|p| p.issuer.clone()),
        client: caller.and_then(|p| p.attribute_str("client_id").map(str::to_owned)),
    }
}

fn server() -> McpServer {
    let registry = Registry::from_tools([whoami::TOOL]).unwrap();
    let runtime = Runtime::builder(registry)
        .store(SqliteStore::in_memory().unwrap())
        .build()
        .unwrap();
    McpServer::new(runtime)
}

/// The MCP server, a protected resource of `auth` that requires the scope `tools`.
async fn protected(auth: &AuthorizationServer) -> HttpHandle {
    let (id, secret) = INTROSPECTION_CLIENT;
    McpHttp::new(server())
        .protected_resource(
            ProtectedResource::new(auth.issuer())
                .required_scopes(["tools"])
                .resource_name("toolwright test tools"),
        )
        .verifier(
            IntrospectionVerifier::new(auth.introspection_endpoint())
                .client_credentials(id, secret),
        )
        .start()
        .await
        .unwrap()
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// `initialize` posted with `token`: the status, `WWW-Authenticate` and the body.
async fn initialize(url: &str, token: Option<&str>) -> (u16, Option<String>, String) {
    let mut request = http()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(INITIALIZE);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    (
        response.status().as_u16(),
        challenge,
        response.text().await.unwrap(),
    )
}

/// A token from `auth` through its own authorization code flow with PKCE, for `resource` and
/// `scope`, the way the SDKs get theirs.
async fn token_for(auth: &AuthorizationServer, resource: &str, scope: &str) -> String {
    let (code, verifier, client_id) = authorize(auth, resource, scope).await;
    let response = exchange(auth, &client_id, &code, &verifier, resource).await;
    assert_eq!(response["token_type"], "Bearer", "{response}");
    response["access_token"].as_str().unwrap().to_owned()
}

const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// Registers a client and authorizes it: the code, the PKCE verifier and the client id.
async fn authorize(
    auth: &AuthorizationServer,
    resource: &str,
    scope: &str,
) -> (String, String, String) {
    let http = http();
    let registered: Value = http
        .post(format!("{}/register", auth.issuer()))
        .header("Content-Type", "application/json")
        .body(json!({ "client_name": "raw", "redirect_uris": [REDIRECT] }).to_string())
        .send()
        .await
        .unwrap()
        .json_value()
        .await;
    let client_id = registered["client_id"].as_str().unwrap().to_owned();
    let verifier = format!("{}{}", uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(&verifier));
    let mut url = reqwest::Url::parse(&format!("{}/authorize", auth.issuer())).unwrap();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client_id)
        .append_pair("redirect_uri", REDIRECT)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", "s")
        .append_pair("resource", resource)
        .append_pair("scope", scope);
    let redirected = http.get(url).send().await.unwrap();
    assert_eq!(redirected.status(), 302);
    let location = reqwest::Url::parse(redirected.headers()["location"].to_str().unwrap()).unwrap();
    let code = location
        .query_pairs()
        .find(|(name, _)| name == "code")
        .unwrap()
        .1
        .into_owned();
    (code, verifier, client_id)
}

/// The token endpoint's answer to an authorization code.
async fn exchange(
    auth: &AuthorizationServer,
    client_id: &str,
    code: &str,
    verifier: &str,
    resource: &str,
) -> Value {
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", code)
        .append_pair("redirect_uri", REDIRECT)
        .append_pair("client_id", client_id)
        .append_pair("code_verifier", verifier)
        .append_pair("resource", resource)
        .finish();
    http()
        .post(format!("{}/token", auth.issuer()))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap()
        .json_value()
        .await
}

trait JsonValue {
    async fn json_value(self) -> Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Value {
        serde_json::from_str(&self.text().await.unwrap()).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_metadata_document_is_public_at_both_well_known_paths() {
    let auth = AuthorizationServer::start().await;
    let handle = protected(&auth).await;
    let origin = format!("http://{}", handle.addr());
    let expected = json!({
        "resource": format!("{origin}/mcp"),
        "authorization_servers": [auth.issuer()],
        "scopes_supported": ["tools"],
        "bearer_methods_supported": ["header"],
        "resource_name": "toolwright test tools",
    });
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let response = http()
            .get(format!("{origin}{path}"))
            .header("Origin", "https://inspector.example")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.headers()["access-control-allow-origin"], "*");
        assert_eq!(response.json_value().await, expected, "{path}");
        // A browser's preflight (clients send `MCP-Protocol-Version` with the request).
        let preflight = http()
            .request(reqwest::Method::OPTIONS, format!("{origin}{path}"))
            .header("Origin", "https://inspector.example")
            .header("Access-Control-Request-Method", "GET")
            .header("Access-Control-Request-Headers", "mcp-protocol-version")
            .send()
            .await
            .unwrap();
        assert_eq!(preflight.status(), 204);
        assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_refusal_names_the_metadata_and_only_tokens_for_this_resource_pass() {
    let auth = AuthorizationServer::start().await;
    let handle = protected(&auth).await;
    let resource = format!("http://{}/mcp", handle.addr());
    let challenge = format!(
        "Bearer resource_metadata=\"http://{}/.well-known/oauth-protected-resource/mcp\", scope=\"tools\"",
        handle.addr()
    );

    // No token: 401, the challenge without an error (nothing was presented).
    let (status, header, _) = initialize(&resource, None).await;
    assert_eq!((status, header.as_deref()), (401, Some(challenge.as_str())));

    // A token the authorization server does not know: introspected, refused.
    let (status, header, body) = initialize(&resource, Some("forged")).await;
    assert_eq!(status, 401);
    let header = header.unwrap();
    assert!(
        header.starts_with(&format!(
            "{challenge}, error=\"invalid_token\", error_description=\""
        )),
        "{header}"
    );
    assert!(body.contains("not active"), "{body}");
    assert_eq!(auth.introspections(), 1);

    // A valid token issued for another resource (RFC 8707): refused, saying what to ask for.
    let elsewhere = token_for(&auth, "https://other.example/mcp", "tools").await;
    let (status, header, body) = initialize(&resource, Some(&elsewhere)).await;
    assert_eq!(status, 401);
    assert!(header.unwrap().contains("error=\"invalid_token\""));
    assert!(
        body.contains("was issued for `https://other.example/mcp`, not for this server")
            && body.contains(&format!("sending `resource` as `{resource}`")),
        "{body}"
    );

    // A token for this resource without the required scope: 403, which scope to ask for.
    let narrow = token_for(&auth, &resource, "admin").await;
    let (status, header, body) = initialize(&resource, Some(&narrow)).await;
    assert_eq!(status, 403);
    let header = header.unwrap();
    assert!(
        header.starts_with(&format!("{challenge}, error=\"insufficient_scope\"")),
        "{header}"
    );
    assert!(body.contains("lacks the scope `tools`"), "{body}");

    // The right token opens a session.
    let good = token_for(&auth, &resource, "tools").await;
    let (status, _, body) = initialize(&resource, Some(&good)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"protocolVersion\""), "{body}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_test_authorization_server_holds_clients_to_pkce_and_the_resource() {
    // What the SDK flows below prove rests on the authorization server refusing these.
    let auth = AuthorizationServer::start().await;
    let resource = "http://127.0.0.1:1/mcp";
    let (code, _, client_id) = authorize(&auth, resource, "tools").await;
    let wrong_verifier = exchange(&auth, &client_id, &code, &"x".repeat(64), resource).await;
    assert_eq!(wrong_verifier["error"], "invalid_grant");
    assert!(
        wrong_verifier["error_description"]
            .as_str()
            .unwrap()
            .contains("PKCE")
    );
    let (code, verifier, client_id) = authorize(&auth, resource, "tools").await;
    let other = exchange(
        &auth,
        &client_id,
        &code,
        &verifier,
        "http://127.0.0.1:2/mcp",
    )
    .await;
    assert_eq!(other["error"], "invalid_grant");
    assert!(
        other["error_description"]
            .as_str()
            .unwrap()
            .contains("RFC 8707")
    );
}

/// A verifier written before audiences: it names the caller and nothing else.
struct NamesOnly;

impl TokenVerifier for NamesOnly {
    fn verify<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async { Ok(Principal::user("sso", "alice")) })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_protected_resource_needs_a_verifier_that_reports_audiences() {
    let declared = || ProtectedResource::new("http://127.0.0.1:9");
    let Err(McpError::Config(missing)) = McpHttp::new(server())
        .protected_resource(declared())
        .start()
        .await
    else {
        panic!("a protected resource started without a verifier")
    };
    assert!(missing.contains("McpHttp::verifier"), "{missing}");

    // A verifier that reports no audience: every token is refused, saying why.
    let handle = McpHttp::new(server())
        .protected_resource(declared())
        .verifier(NamesOnly)
        .start()
        .await
        .unwrap();
    let (status, _, body) = initialize(&format!("http://{}/mcp", handle.addr()), Some("t")).await;
    assert_eq!(status, 401);
    assert!(body.contains("names no audience"), "{body}");

    // Without a protected resource it keeps working as before.
    let plain = McpHttp::new(server())
        .verifier(NamesOnly)
        .start()
        .await
        .unwrap();
    let (status, _, _) = initialize(&format!("http://{}/mcp", plain.addr()), Some("t")).await;
    assert_eq!(status, 200);
    let metadata = http()
        .get(format!(
            "http://{}/.well-known/oauth-protected-resource",
            plain.addr()
        ))
        .send()
        .await
        .unwrap();
    assert_ne!(
        metadata.status(),
        200,
        "no metadata without a protected resource"
    );
    handle.shutdown().await;
    plain.shutdown().await;
}

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("tests/mcp-clients")
}

/// Runs a client to the end (a safety net of 5 minutes: they finish in seconds) and returns the
/// JSON lines it printed, by key.
async fn run_client(mut command: tokio::process::Command) -> serde_json::Map<String, Value> {
    command.kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the client did not finish")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let mut found = serde_json::Map::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        if let Ok(Value::Object(map)) = serde_json::from_str(line) {
            found.extend(map);
        }
    }
    found
}

/// What both SDKs must have done: one authorization code grant for this resource with the
/// required scope, then a call of `whoami` as `alice`, on tokens introspected by the server.
fn check_flow(
    auth: &AuthorizationServer,
    found: &serde_json::Map<String, Value>,
    client_name: &str,
    resource: &str,
) {
    assert_eq!(
        auth.issued(),
        [Issued {
            client_name: client_name.into(),
            grant: "authorization_code".into(),
            resource: resource.into(),
            scope: "tools".into(),
        }]
    );
    assert_eq!(
        found["unauthorized_first"], true,
        "the first attempt had no token"
    );
    assert_eq!(found["tools"], json!(["whoami"]));
    let caller = &found["whoami"]["structuredContent"];
    assert_eq!(caller["id"], "alice");
    assert_eq!(caller["issuer"], auth.issuer());
    assert!(caller["client"].is_string(), "{caller}");
    assert!(
        auth.introspections() >= 2,
        "each request's token is checked"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_sdk_completes_the_oauth_flow_and_calls_a_tool() {
    let dir = clients_dir().join("node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "the TypeScript MCP SDK is not installed; run `scripts/setup-clients` (`scripts/test` does)"
    );
    let auth = AuthorizationServer::start().await;
    let handle = protected(&auth).await;
    let resource = format!("http://{}/mcp", handle.addr());
    let mut node = tokio::process::Command::new("node");
    node.arg(dir.join("oauth.mjs")).arg(&resource);
    let found = run_client(node).await;
    check_flow(&auth, &found, "toolwright-oauth-typescript", &resource);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_completes_the_oauth_flow_and_calls_a_tool() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let python = root.join("target/mcp-venv/bin/python");
    assert!(
        python.exists(),
        "the Python MCP SDK is not installed; run `scripts/setup-clients` (`scripts/test` does)"
    );
    let auth = AuthorizationServer::start().await;
    let handle = protected(&auth).await;
    let resource = format!("http://{}/mcp", handle.addr());
    let mut client = tokio::process::Command::new(python);
    client
        .arg(clients_dir().join("python/oauth.py"))
        .arg(&resource);
    let found = run_client(client).await;
    check_flow(&auth, &found, "toolwright-oauth-python", &resource);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_resource_may_be_a_public_name_whose_host_the_server_accepts() {
    let auth = AuthorizationServer::start().await;
    let handle = McpHttp::new(server())
        .protected_resource(ProtectedResource::new(auth.issuer()).resource("https://mcp.test/mcp"))
        .verifier(IntrospectionVerifier::new(auth.introspection_endpoint()))
        .start()
        .await
        .unwrap();
    let post = |host: &'static str| {
        http()
            .post(format!("http://{}/mcp", handle.addr()))
            .header("Host", host)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(INITIALIZE)
            .send()
    };
    // As a proxy forwards it: the public name in `Host`, the challenge naming the public URL.
    let proxied = post("mcp.test").await.unwrap();
    assert_eq!(proxied.status(), 401);
    assert_eq!(
        proxied.headers()["www-authenticate"],
        "Bearer resource_metadata=\"https://mcp.test/.well-known/oauth-protected-resource/mcp\""
    );
    assert_eq!(post("other.test").await.unwrap().status(), 403);
    let metadata = http()
        .get(format!(
            "http://{}/.well-known/oauth-protected-resource/mcp",
            handle.addr()
        ))
        .send()
        .await
        .unwrap()
        .json_value()
        .await;
    assert_eq!(metadata["resource"], "https://mcp.test/mcp");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_that_cannot_be_checked_is_a_503_not_a_401() {
    // The resource server's credentials are wrong: the authorization server refuses to answer.
    // Clients must retry, not send their user to authorize again.
    let auth = AuthorizationServer::start().await;
    let handle = McpHttp::new(server())
        .protected_resource(ProtectedResource::new(auth.issuer()))
        .verifier(
            IntrospectionVerifier::new(auth.introspection_endpoint())
                .client_credentials("toolwright-mcp", "wrong"),
        )
        .start()
        .await
        .unwrap();
    let url = format!("http://{}/mcp", handle.addr());
    let token = token_for(&auth, &url, "tools").await;
    let response = http()
        .post(&url)
        .bearer_auth(token)
        .header("Content-Type", "application/json")
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    assert!(!response.headers().contains_key("www-authenticate"));
    let body = response.text().await.unwrap();
    assert_eq!(body, "the token could not be checked now; retry in 5 s");
    handle.shutdown().await;
}
