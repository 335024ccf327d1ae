//! Over streamable HTTP: the bearer token names the caller, and a session cannot be borrowed.

use super::*;

struct Tokens;

impl TokenVerifier for Tokens {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            match token {
                "alice-token" => Ok(Principal::user("oidc", "alice")),
                "bob-token" => Ok(Principal::user("oidc", "bob")),
                _ => Err("unknown token".into()),
            }
        })
    }
}

#[tokio::test]
async fn over_http_the_bearer_token_names_the_caller_and_a_session_cannot_be_borrowed() {
    let handle = McpHttp::new(McpServer::new(runtime()))
        .verifier(Tokens)
        .start()
        .await
        .unwrap();
    let url = format!("http://{}/mcp", handle.addr());
    assert!(handle.addr().ip().is_loopback(), "loopback by default");

    // With rmcp's HTTP client and a valid token: the principal is the caller. (rmcp builds its
    // reqwest client itself: the crypto provider must be there first.)
    let _ = http_client();
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header("alice-token"),
    );
    let client = Client::default().serve(transport).await.unwrap();
    let result = client
        .call_tool(
            CallToolRequestParams::new("service_status")
                .with_arguments(args(json!({ "service": "api" }))),
        )
        .await
        .unwrap();
    assert_eq!(result.structured_content.unwrap()["caller"], "alice");

    // Without a token, or with a bad one: 401.
    let http = http_client().build().unwrap();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "1" } }
    });
    let post = |token: Option<&str>, session: Option<&str>, body: &Value| {
        let mut request = http
            .post(&url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(session) = session {
            request = request
                .header("Mcp-Session-Id", session)
                .header("Mcp-Protocol-Version", "2025-11-25");
        }
        request.send()
    };
    let refused = post(None, None, &initialize).await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(refused.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        post(Some("forged"), None, &initialize)
            .await
            .unwrap()
            .status(),
        401
    );

    // Alice opens a session and calls once; Bob, with a valid token of his own, cannot use it.
    let opened = post(Some("alice-token"), None, &initialize).await.unwrap();
    assert!(opened.status().is_success());
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        session.len() >= 32,
        "session ids are unguessable: {session}"
    );
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    post(Some("alice-token"), Some(&session), &initialized)
        .await
        .unwrap();
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "write_note", "arguments": {} }
    });
    let by_alice = post(Some("alice-token"), Some(&session), &call)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(by_alice.contains("noted"), "{by_alice}");
    let call = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "write_note", "arguments": {} }
    });
    // Bob naming alice's session is answered as for a session that does not exist: the id
    // neither works for him nor tells him it is open.
    let by_bob = post(Some("bob-token"), Some(&session), &call)
        .await
        .unwrap();
    assert_eq!(by_bob.status(), 404);
    assert_eq!(by_bob.text().await.unwrap(), "Not Found: Session not found");

    // A Host that is not loopback is refused (DNS rebinding).
    let rebound = http
        .post(&url)
        .header("Host", "evil.example")
        .header("Authorization", "Bearer alice-token")
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    handle.shutdown().await;
}
