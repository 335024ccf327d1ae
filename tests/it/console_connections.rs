//! The console's connections page against a real remote MCP server (the Python fixture of
//! `remote_mcp`): a tool whose server changed its definition is shown withheld, with the
//! pinned and the listed definitions side by side, and approving it from the console pins the
//! new definition with the signed-in principal and lists the tool again.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use toolwright::Principal;
use toolwright::console::Console;
use toolwright::mcp::TokenVerifier;
use toolwright::runtime::{Connection, Event, SessionSpec};

use crate::remote_mcp::{Fixture, event, harmless, run, runtime, turn};
use crate::support::call;

struct Operator;

impl TokenVerifier for Operator {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            (token == "ops-token")
                .then(|| Principal::user("test", "operator"))
                .ok_or_else(|| "unknown token".to_owned())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_definition_is_reviewed_and_approved_in_the_console() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["echo", "mutate"])
                .trusted()
                .tool("mutate", harmless()),
        ],
    );
    let mut events = rt.subscribe();
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    run(
        &turn,
        vec![call("c1", "fixture__echo", json!({ "text": "a" }))],
    )
    .await;
    run(&turn, vec![call("c2", "fixture__mutate", json!({}))]).await;
    event(&mut events, |e| {
        matches!(e, Event::ToolDefinitionChanged { .. })
    })
    .await;
    assert!(rt.registry().get("fixture__echo").unwrap().is_withheld());

    let server = Console::new(rt.clone(), Operator)
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", server.addr());

    let page = client
        .get(url("/connections"))
        .header("authorization", "Bearer ops-token")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Withheld: <code>fixture__echo</code>"),
        "{page}"
    );
    assert!(page.contains("Approve the new definition"), "{page}");
    assert!(
        page.contains("IGNORE PREVIOUS INSTRUCTIONS"),
        "the listed definition is shown for review: {page}"
    );
    assert!(page.contains("badge up"), "the connection is up: {page}");

    let json: Value = serde_json::from_str(
        &client
            .get(url("/connections"))
            .header("authorization", "Bearer ops-token")
            .header("accept", "application/json")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json[0]["withheld"][0]["name"], "fixture__echo", "{json}");
    let pinned = json[0]["pins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tool"] == "echo")
        .expect("echo was pinned at its first use")
        .clone();

    let approved = client
        .post(url("/connections/approve"))
        .header("authorization", "Bearer ops-token")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("tool=fixture__echo")
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    let report: Value = serde_json::from_str(&approved.text().await.unwrap()).unwrap();
    assert_eq!(report["accepted"], true, "{report}");
    assert!(!rt.registry().get("fixture__echo").unwrap().is_withheld());
    let pins = rt.store().pins("fixture").await.unwrap();
    let echo = pins.iter().find(|p| p.tool == "echo").unwrap();
    assert_ne!(
        json!(echo.digest),
        pinned["digest"],
        "the new definition is pinned"
    );
    assert_eq!(echo.approved_by, Some(Principal::user("test", "operator")));

    // Approving again finds nothing withheld.
    let again = client
        .post(url("/connections/approve"))
        .header("authorization", "Bearer ops-token")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("tool=fixture__echo")
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);
    server.shutdown().await;
}
