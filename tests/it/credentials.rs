//! Credentials: a broker the host installs hands out tokens of connected services. A tool acts
//! with the token of the principal acting in the turn (checked here by a loopback API that
//! reads the `Authorization` header); a missing or expired token is a status the user can fix;
//! `approval(require_auth = ..)` lets only a person holding the token approve, and the tool
//! then reaches that person's token. No token reaches the store, an event or a prompt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::credentials::{CredentialBroker, Token};
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, InputResponse, RequestKind, RespondOutcome, Runtime, SqliteStore, StepOutcome,
};
use toolwright::{ErrorCode, Principal, Registry};

use crate::support::clock::ManualClock;
use crate::support::{alice, bob, call, code, completed, dana, drain, resumed, turn_in, waiting};

const START: u64 = 1_800_000_000_000;
const ALICE_SECRET: &str = "gho_alice_6b1f0c";
const DANA_SECRET: &str = "gho_dana_admin_93ad";
const OLD_SECRET: &str = "gho_old_0000";

/// Tokens by principal id, as a vault would keep them; `old` expires a minute after `START`.
#[derive(Clone, Default)]
struct Vault(Arc<Mutex<HashMap<String, Token>>>);

impl Vault {
    fn with_tokens() -> Vault {
        let vault = Vault::default();
        let mut tokens = vault.0.lock().unwrap();
        tokens.insert("alice".into(), Token::new(ALICE_SECRET));
        tokens.insert("dana".into(), Token::new(DANA_SECRET));
        tokens.insert(
            "old".into(),
            Token::new(OLD_SECRET).expiring_at_ms(START + 60_000),
        );
        drop(tokens);
        vault
    }
}

impl CredentialBroker for Vault {
    fn token<'a>(
        &'a self,
        provider: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Option<Token>, ToolError>> {
        let found = (provider == "github")
            .then(|| self.0.lock().unwrap().get(&principal.principal_id).cloned())
            .flatten();
        Box::pin(async move { Ok(found) })
    }

    fn connect_hint(&self, provider: &str) -> Option<String> {
        Some(format!(
            "connect it at https://app.example.test/connect/{provider}"
        ))
    }
}

/// Where the loopback API of a test listens.
struct Api(String);

/// A loopback stand-in for the provider's API, on the test's own runtime: who a bearer token
/// belongs to.
async fn api() -> Api {
    async fn whoami(headers: HeaderMap) -> String {
        let login = match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some(value) if value == format!("Bearer {ALICE_SECRET}") => "alice",
            Some(value) if value == format!("Bearer {DANA_SECRET}") => "dana",
            _ => "nobody",
        };
        json!({ "login": login }).to_string()
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/user", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/user", axum::routing::get(whoami));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Api(url)
}

/// Who the API says `token` belongs to: a plain HTTP/1.1 GET with the token as a bearer.
async fn login_of(api: &Api, token: &Token) -> Result<String, ToolError> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = api.0.strip_prefix("http://").unwrap_or(&api.0);
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = tokio::net::TcpStream::connect(host).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {}\r\nConnection: close\r\n\r\n",
        token.bearer()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let (_, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| ToolError::new("the API's answer has no body"))?;
    let body: Value = serde_json::from_str(body)?;
    Ok(body["login"].as_str().unwrap_or_default().to_owned())
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Repo {
    repo: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum Whoami {
    Login { login: String, repo: String },
    NeedsAuth(Status),
}

/// Tells who the caller is on GitHub; a missing token is returned as a status object.
#[tool(effect = read)]
async fn github_whoami(args: Repo, ctx: ToolContext, api: State<Api>) -> Result<Whoami, ToolError> {
    match ctx.token("github").await {
        Ok(token) => Ok(Whoami::Login {
            login: login_of(&api, &token).await?,
            repo: args.repo,
        }),
        Err(error) => error.status().map(Whoami::NeedsAuth).ok_or(error.into()),
    }
}

/// Lists the caller's repositories; a missing token fails the call with its status.
#[tool(effect = read)]
async fn github_repos(args: Repo, ctx: ToolContext, api: State<Api>) -> Result<String, ToolError> {
    let token = ctx.token("github").await?;
    Ok(format!(
        "{} of {}",
        args.repo,
        login_of(&api, &token).await?
    ))
}

#[derive(Serialize, JsonSchema)]
struct Granted {
    repo: String,
    for_user: String,
    granted_by: String,
}

/// Grants the caller access to a repository with an administrator's rights: only a person
/// holding a GitHub token may approve, and the grant is made with that person's token.
#[tool(effect = write, approval(request = always, require_auth = "github"))]
async fn grant_access(args: Repo, ctx: ToolContext, api: State<Api>) -> Result<Granted, ToolError> {
    let admin = ctx.approver_token("github").await?;
    Ok(Granted {
        repo: args.repo,
        for_user: ctx
            .current()
            .map(|p| p.principal_id.clone())
            .unwrap_or_default(),
        granted_by: login_of(&api, &admin).await?,
    })
}

fn registry() -> Registry {
    Registry::from_tools([github_whoami::TOOL, github_repos::TOOL, grant_access::TOOL]).unwrap()
}

/// A runtime on a SQLite file with the vault as its broker and a test clock at `START`.
struct Setup {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    clock: ManualClock,
    runtime: Runtime,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    let clock = ManualClock::at(START);
    let runtime = runtime_at(&path, &clock).await;
    Setup {
        _dir: dir,
        path,
        clock,
        runtime,
    }
}

async fn runtime_at(path: &std::path::Path, clock: &ManualClock) -> Runtime {
    Runtime::builder(registry())
        .store(SqliteStore::open(path).unwrap())
        .options(clock.options())
        .state(api().await)
        .credentials(Vault::with_tokens())
        .build()
        .unwrap()
}

fn old() -> Principal {
    Principal::user("oidc", "old")
}

/// Everything a token could leak into: the store's file, every event, every request.
fn assert_no_secret(path: &std::path::Path, events: &[Event]) {
    let stored = std::fs::read(path).unwrap();
    let stored = String::from_utf8_lossy(&stored);
    let events = serde_json::to_string(events).unwrap();
    for secret in [ALICE_SECRET, DANA_SECRET, OLD_SECRET] {
        assert!(!stored.contains(secret), "{secret} in the store");
        assert!(!events.contains(secret), "{secret} in an event");
    }
}

#[tokio::test]
async fn a_tool_acts_with_the_callers_token_and_no_token_is_recorded() {
    let Setup {
        _dir,
        path,
        runtime,
        ..
    } = setup().await;
    let mut events = runtime.subscribe();
    let turn = turn_in(&runtime, "s1", Some(alice())).await;
    let results = completed(
        turn.step(vec![
            call("c1", "github_whoami", json!({ "repo": "tw" })),
            call("c2", "github_repos", json!({ "repo": "tw" })),
        ])
        .await
        .unwrap(),
    );
    assert_eq!(results[0].output, json!({ "login": "alice", "repo": "tw" }));
    assert_eq!(results[1].output, json!("tw of alice"));
    assert_no_secret(&path, &drain(&mut events));
}

#[tokio::test]
async fn a_missing_or_expired_token_is_a_status_the_user_can_fix() {
    let Setup {
        _dir,
        clock,
        runtime,
        ..
    } = setup().await;

    // Bob never connected GitHub: as data, or as an error with the status as details.
    let turn = turn_in(&runtime, "s1", Some(bob())).await;
    let results = completed(
        turn.step(vec![
            call("c1", "github_whoami", json!({ "repo": "tw" })),
            call("c2", "github_repos", json!({ "repo": "tw" })),
        ])
        .await
        .unwrap(),
    );
    let status = results[0].output.clone();
    assert_eq!(status["status"], "authorization_required");
    assert_eq!(status["kind"], "github");
    assert_eq!(status["methods"], json!(["connect"]));
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("oidc:bob has not connected `github`"),
        "{message}"
    );
    assert!(
        message.contains("https://app.example.test/connect/github"),
        "{message}"
    );
    assert_eq!(code(&results[1]), ErrorCode::AuthorizationRequired);
    let error = results[1].error.as_ref().unwrap();
    assert_eq!(
        error.details_value().unwrap()["status"],
        "authorization_required"
    );

    // A token that expired on the runtime's clock asks for a reconnect.
    let turn = turn_in(&runtime, "s2", Some(old())).await;
    let fresh = completed(
        turn.step(vec![call("c1", "github_whoami", json!({ "repo": "tw" }))])
            .await
            .unwrap(),
    );
    assert_eq!(fresh[0].output["login"], "nobody");
    clock.advance(60_000);
    let expired = completed(
        turn.step(vec![call("c2", "github_whoami", json!({ "repo": "tw" }))])
            .await
            .unwrap(),
    );
    assert_eq!(expired[0].output["methods"], json!(["reconnect"]));

    // Nobody signed in.
    let turn = turn_in(&runtime, "s3", None).await;
    let anonymous = completed(
        turn.step(vec![call("c1", "github_whoami", json!({ "repo": "tw" }))])
            .await
            .unwrap(),
    );
    assert_eq!(anonymous[0].output["methods"], json!(["sign_in"]));
}

#[tokio::test]
async fn without_a_broker_the_call_says_to_install_one() {
    let runtime = crate::support::builder_over(registry())
        .state(api().await)
        .build()
        .unwrap();
    let turn = turn_in(&runtime, "s1", Some(alice())).await;
    let results = completed(
        turn.step(vec![call("c1", "github_repos", json!({ "repo": "tw" }))])
            .await
            .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::MissingState);
    assert!(
        results[0]
            .error
            .as_ref()
            .unwrap()
            .message()
            .contains("RuntimeBuilder::credentials"),
        "{results:?}"
    );
}

#[tokio::test]
async fn only_a_token_holder_approves_and_the_tool_acts_with_the_approvers_token() {
    let Setup {
        _dir,
        path,
        clock,
        runtime,
    } = setup().await;
    let mut events = runtime.subscribe();
    let turn = turn_in(&runtime, "s1", Some(alice())).await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "grant_access", json!({ "repo": "tw" }))])
            .await
            .unwrap(),
    );
    assert_eq!(requests[0].kind, RequestKind::ToolApproval);
    let request = requests[0].request_id.clone();

    // Bob holds no token: his approval is rejected and the request stays pending.
    let refused = runtime
        .respond(InputResponse::approve(&request, Some(bob())))
        .await
        .unwrap();
    let RespondOutcome::Rejected { reason } = refused else {
        panic!("expected a rejection: {refused:?}")
    };
    assert!(reason.contains("holding a `github` token"), "{reason}");
    assert!(reason.contains("oidc:bob has not connected"), "{reason}");
    // Neither may he cancel: he is not the requester and holds no token.
    let refused = runtime
        .respond(InputResponse::cancel(&request, Some(bob())))
        .await
        .unwrap();
    assert!(
        matches!(refused, RespondOutcome::Rejected { .. }),
        "{refused:?}"
    );
    // A token that expired does not count either.
    clock.advance(60_000);
    let expired = runtime
        .respond(InputResponse::approve(&request, Some(old())))
        .await
        .unwrap();
    assert!(
        matches!(expired, RespondOutcome::Rejected { .. }),
        "{expired:?}"
    );

    // Dana, an administrator with a token, approves; the grant is made with her token while
    // the call still runs for alice.
    let results = resumed(
        runtime
            .respond(InputResponse::approve(&request, Some(dana())))
            .await
            .unwrap(),
    );
    assert_eq!(
        results[0].output,
        json!({ "repo": "tw", "for_user": "alice", "granted_by": "dana" })
    );
    assert_no_secret(&path, &drain(&mut events));
}

#[tokio::test]
async fn the_requester_may_cancel_a_call_that_needs_a_token_holders_approval() {
    let Setup { runtime, .. } = setup().await;
    // Bob has no token, and may still withdraw his own call.
    let turn = turn_in(&runtime, "s1", Some(bob())).await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "grant_access", json!({ "repo": "tw" }))])
            .await
            .unwrap(),
    );
    let outcome = runtime
        .respond(InputResponse::cancel(&requests[0].request_id, Some(bob())))
        .await
        .unwrap();
    let RespondOutcome::Resumed(step) = outcome else {
        panic!("expected the turn to resume: {outcome:?}")
    };
    assert!(matches!(step, StepOutcome::Completed { .. }));
    let results = completed(step);
    assert_eq!(code(&results[0]), ErrorCode::Denied);
}
