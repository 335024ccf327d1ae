//! Sensitive fields: the tool gets the real value (after a park too, in another process with
//! the same sealing key), while stored records, events, approval prompts, the `auto` decider,
//! validation errors, the runtime's logs and the model loop's stored conversation never hold it.

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::registry::REDACTED;
use toolwright::runtime::{
    AutoRequest, AutoVerdict, Decider, InputResponse, Options, Runtime, Sealing, SqliteStore,
};
use toolwright::{ErrorCode, Sensitive};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::{alice, builder, call, code, completed, drain, resumed, turn_in, waiting};

const PASSWORD: &str = "correct-horse-battery-staple-9f2";
const CARD: &str = "4111111111111111";

/// What the tools received, in order.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn seen_with(marker: &str) -> Vec<String> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|s| s.contains(marker))
        .cloned()
        .collect()
}

#[derive(Deserialize, JsonSchema)]
struct Card {
    /// The last four digits, shown to people.
    #[allow(dead_code)] // reason: only the schema and the approver read it
    last4: String,
    /// The whole number.
    number: Sensitive<String>,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct LoginArgs {
    /// Who logs in (also marks the call in `SEEN`).
    user: String,
    /// The password.
    #[toolwright(sensitive)]
    #[schemars(length(min = 20))]
    password: String,
    /// Cards to register.
    #[serde(default)]
    cards: Vec<Card>,
}

#[derive(Serialize, JsonSchema)]
struct LoggedIn {
    user: String,
    token: Sensitive<String>,
}

fn record(args: &LoginArgs) -> LoggedIn {
    let cards: Vec<&str> = args
        .cards
        .iter()
        .map(|c| c.number.expose().as_str())
        .collect();
    SEEN.lock().unwrap().push(format!(
        "{}:{}:{}",
        args.user,
        args.password,
        cards.join(",")
    ));
    LoggedIn {
        user: args.user.clone(),
        token: Sensitive::new(format!("tok-{}", args.password)),
    }
}

/// Logs a user in; a person approves each login.
#[tool(effect = write, approval = always, label(start = "Log in {user}"))]
async fn login(args: LoginArgs) -> LoggedIn {
    record(&args)
}

/// Logs a user in without asking (for the model loop).
#[tool(effect = read)]
async fn quick_login(args: LoginArgs) -> LoggedIn {
    record(&args)
}

/// Logs a user in; found through `tool_search`.
#[tool(effect = read, deferred)]
async fn hidden_login(args: LoginArgs) -> LoggedIn {
    record(&args)
}

/// Logs a user in; a person's approval is remembered for the same input.
#[tool(effect = write, approval = once, approval_key = input)]
async fn remembered_login(args: LoginArgs) -> LoggedIn {
    record(&args)
}

/// Fails, quoting its input as a careless tool would.
#[tool(effect = read)]
async fn careless_login(args: LoginArgs) -> Result<LoggedIn, ToolError> {
    Err(ToolError::new(format!(
        "no account `{}` with password `{}`",
        args.user, args.password
    )))
}

/// Logs a user in when the `auto` decider clears it.
#[tool(effect = write, approval = auto)]
async fn judged_login(args: LoginArgs) -> LoggedIn {
    record(&args)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RotateArgs {
    /// Which key.
    name: String,
    /// The key being replaced.
    #[toolwright(sensitive)]
    old_key: String,
}

#[derive(Serialize, JsonSchema)]
struct Rotated {
    name: String,
}

/// Rotates a key in the background.
#[tool(effect = write, workflow = task)]
async fn rotate(args: RotateArgs, _ctx: WorkflowContext) -> Result<Rotated, ToolError> {
    SEEN.lock()
        .unwrap()
        .push(format!("rotate:{}:{}", args.name, args.old_key));
    Ok(Rotated { name: args.name })
}

fn input(user: &str) -> Value {
    json!({
        "user": user,
        "password": PASSWORD,
        "cards": [{ "last4": "1111", "number": CARD }]
    })
}

fn leaks(text: &str) -> Vec<&'static str> {
    [PASSWORD, CARD, "tok-correct"]
        .into_iter()
        .filter(|secret| text.contains(secret))
        .collect()
}

fn assert_no_leak(what: &str, text: &str) {
    let found = leaks(text);
    assert!(found.is_empty(), "{what} holds {found:?}: {text}");
}

/// Every byte of a SQLite store: the file and its write-ahead log.
fn store_bytes(path: &std::path::Path) -> String {
    let mut bytes = std::fs::read(path).unwrap();
    bytes.extend(std::fs::read(path.with_extension("db-wal")).unwrap_or_default());
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A `tracing` layer writing every span's and event's fields into one string.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Captured {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut line = event.metadata().target().to_owned();
        event.record(&mut Fields(&mut line));
        let mut all = self.0.lock().unwrap();
        all.push_str(&line);
        all.push('\n');
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut line = format!("span {}", attrs.metadata().name());
        attrs.record(&mut Fields(&mut line));
        let mut all = self.0.lock().unwrap();
        all.push_str(&line);
        all.push('\n');
    }
}

fn sealed_runtime(path: &std::path::Path, sealing: Sealing) -> Runtime {
    builder([login::TOOL])
        .store(SqliteStore::open(path).unwrap())
        .options(Options {
            sealing,
            ..Options::default()
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_tool_gets_the_values_that_no_record_event_prompt_or_log_holds() {
    let logs = Captured::default();
    let _logging =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(logs.clone()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let rt = sealed_runtime(&path, Sealing::ephemeral());
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-sensitive", Some(alice())).await;

    // The schema says which fields are sensitive: the marked one and the wrapped one.
    let tool = rt.registry().get("login").unwrap().input_schema().clone();
    assert_eq!(tool["properties"]["password"]["writeOnly"], true);
    assert_eq!(
        tool["$defs"]["Card"]["properties"]["number"]["writeOnly"],
        true
    );

    // Providers' strict mode is not sent the runtime's annotation.
    let strict = toolwright::export::strict_schema(&tool).unwrap();
    assert!(!strict.to_string().contains("writeOnly"), "{strict}");

    let (_, requests) = waiting(
        turn.step(vec![call("c1", "login", input("ada"))])
            .await
            .unwrap(),
    );
    let request = &requests[0];
    assert_eq!(request.input.as_ref().unwrap()["password"], REDACTED);
    assert_eq!(
        request.input.as_ref().unwrap()["cards"][0]["number"],
        REDACTED
    );
    assert_eq!(request.input.as_ref().unwrap()["cards"][0]["last4"], "1111");
    assert_no_leak(
        "the approval request",
        &serde_json::to_string(request).unwrap(),
    );
    // Parked: the file and its log hold the call sealed, the request redacted.
    let (parked, _) = rt.store().turn(turn.id()).await.unwrap().unwrap();
    let parked = serde_json::to_string(&parked).unwrap();
    assert!(parked.contains("$sealed"), "{parked}");
    assert_no_leak("the parked turn", &parked);
    assert_no_leak("the SQLite file while parked", &store_bytes(&path));

    let results = resumed(
        rt.respond(InputResponse::approve(&request.request_id, Some(alice())))
            .await
            .unwrap(),
    );
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(
        seen_with("ada:"),
        [format!("ada:{PASSWORD}:{CARD}")],
        "the tool got the real values, once"
    );
    assert_eq!(results[0].output["token"], REDACTED);
    assert_eq!(results[0].output["user"], "ada");
    assert_no_leak("the result", &serde_json::to_string(&results[0]).unwrap());

    for event in drain(&mut events) {
        assert_no_leak("an event", &serde_json::to_string(&event).unwrap());
    }
    let recorded = turn.last_results().await.unwrap().expect("a closed step");
    assert_no_leak("the recorded step", &format!("{recorded:?}"));
    let logged = logs.0.lock().unwrap().clone();
    assert!(
        logged.contains("running an approved call"),
        "the capture works: {logged}"
    );
    assert_no_leak("the logs", &logged);

    drop(turn);
    drop(rt);
    assert_no_leak("the SQLite file", &store_bytes(&path));
}

#[tokio::test]
async fn a_parked_call_resumes_where_the_key_is_shared_and_asks_again_where_it_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let key = [42u8; 32];
    let parker = sealed_runtime(&path, Sealing::new(key));
    let turn = turn_in(&parker, "s-keys", Some(alice())).await;
    let (_, first) = waiting(
        turn.step(vec![call("c1", "login", input("bea"))])
            .await
            .unwrap(),
    );

    // Another instance with the same key (rotated: the old one kept to open) runs it.
    let same_key = sealed_runtime(&path, Sealing::new([7; 32]).with_previous(key));
    let results = resumed(
        same_key
            .respond(InputResponse::approve(&first[0].request_id, Some(alice())))
            .await
            .unwrap(),
    );
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(seen_with("bea:"), [format!("bea:{PASSWORD}:{CARD}")]);

    // An instance with a key of its own cannot open it: the call does not run, and the model
    // is told to call again.
    let (_, second) = waiting(
        turn.step(vec![call("c2", "login", input("cy"))])
            .await
            .unwrap(),
    );
    let stranger = sealed_runtime(&path, Sealing::ephemeral());
    let results = resumed(
        stranger
            .respond(InputResponse::approve(&second[0].request_id, Some(alice())))
            .await
            .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::Unavailable);
    let message = results[0].model().to_text();
    assert!(
        message.contains("sealed by another process") && message.contains("call the tool again"),
        "{message}"
    );
    assert!(seen_with("cy:").is_empty(), "the tool did not run");
    drop((turn, parker, same_key, stranger));
    assert_no_leak("the SQLite file", &store_bytes(&path));
}

#[tokio::test]
async fn a_refused_input_is_reported_without_its_sensitive_values() {
    let rt = builder([login::TOOL]).build().unwrap();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-short", Some(alice())).await;
    let short = "hunter2-secret";
    let results = completed(
        turn.step(vec![call(
            "c1",
            "login",
            json!({ "user": "dee", "password": short }),
        )])
        .await
        .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::InvalidInput);
    let text = serde_json::to_string(&results[0]).unwrap();
    assert!(text.contains("/password"), "the problem is named: {text}");
    assert!(!text.contains(short), "the value is not quoted: {text}");
    for event in drain(&mut events) {
        let json = serde_json::to_string(&event).unwrap();
        assert!(!json.contains(short), "an event holds it: {json}");
    }
    assert!(seen_with("dee:").is_empty());
}

#[tokio::test]
async fn a_task_keeps_its_input_sealed_and_its_body_gets_it_open() {
    let rt = builder([rotate::TOOL]).build().unwrap();
    let turn = turn_in(&rt, "s-task", Some(alice())).await;
    let results = completed(
        turn.step(vec![call(
            "c1",
            "rotate",
            json!({ "name": "signing", "old_key": PASSWORD }),
        )])
        .await
        .unwrap(),
    );
    let id = results[0].output["task_id"].as_str().unwrap().to_owned();
    let delivered = turn
        .wait_task_results(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(!delivered[0].result.is_error, "{delivered:?}");
    assert_eq!(
        seen_with("rotate:signing"),
        [format!("rotate:signing:{PASSWORD}")]
    );
    let (task, _) = rt.store().task(&id).await.unwrap().unwrap();
    let task = serde_json::to_string(&task).unwrap();
    assert!(task.contains("$sealed"), "{task}");
    assert_no_leak("the task record", &task);
}

#[tokio::test]
async fn refused_calls_quote_no_sensitive_value_whatever_their_shape() {
    let rt = builder([login::TOOL, hidden_login::TOOL]).build().unwrap();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-shapes", Some(alice())).await;
    let long = format!("{PASSWORD}-{}", "x".repeat(300));
    let calls = vec![
        // An object where a string belongs, the secret inside it.
        call(
            "c1",
            "login",
            json!({ "user": "fay", "password": { "p": PASSWORD } }),
        ),
        // A secret far longer than any message, next to a field of the wrong type.
        call("c2", "login", json!({ "user": 5, "password": long })),
        // A deferred tool through `tool_call`, refused for an extra key.
        call(
            "c3",
            "tool_call",
            json!({ "name": "hidden_login", "input": input("fay"), "why": 1 }),
        ),
        // A tool nobody registered.
        call("c4", "log_in", input("fay")),
    ];
    let results = completed(turn.step(calls).await.unwrap());
    assert!(results.iter().all(|r| r.is_error), "{results:?}");
    for result in &results {
        assert_no_leak("a refusal", &serde_json::to_string(result).unwrap());
    }
    let first = serde_json::to_string(&results[0]).unwrap();
    assert!(
        first.contains("/password") && first.contains("sensitive"),
        "{first}"
    );
    for event in drain(&mut events) {
        assert_no_leak("an event", &serde_json::to_string(&event).unwrap());
    }
    assert!(seen_with("fay:").is_empty());
}

#[tokio::test]
async fn an_error_quoting_the_input_reaches_nobody_with_its_sensitive_values() {
    let rt = builder([careless_login::TOOL]).build().unwrap();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-careless", Some(alice())).await;
    let results = completed(
        turn.step(vec![call("c1", "careless_login", input("gus"))])
            .await
            .unwrap(),
    );
    let message = results[0].model().to_text();
    assert_eq!(
        message,
        format!("no account `gus` with password `{REDACTED}`")
    );
    for event in drain(&mut events) {
        assert_no_leak("an event", &serde_json::to_string(&event).unwrap());
    }
}

#[tokio::test]
async fn a_remembered_approval_is_keyed_by_what_the_approver_saw() {
    let rt = builder([remembered_login::TOOL]).build().unwrap();
    let turn = turn_in(&rt, "s-once", Some(alice())).await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "remembered_login", input("hal"))])
            .await
            .unwrap(),
    );
    let key = requests[0].approval_key.clone().expect("a once key");
    resumed(
        rt.respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap(),
    );
    // Another password, the same input as the approver saw it: the grant covers it.
    let mut other = input("hal");
    other["password"] = json!("another-password-of-twenty-chars");
    let results = completed(
        turn.step(vec![call("c2", "remembered_login", other)])
            .await
            .unwrap(),
    );
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(seen_with("hal:").len(), 2);
    // The key is the digest of the redacted input, not of the secret.
    let registry = rt.registry();
    let tool = registry.get("remembered_login").unwrap();
    let mut redacted = input("hal");
    tool.sensitivity().input.redact(&mut redacted);
    assert_eq!(tool.approval_key(&redacted).unwrap(), key);
}

/// A decider that clears everything and remembers what it was shown.
#[derive(Clone, Default)]
struct Remembering(Arc<Mutex<Vec<Value>>>);

impl Decider for Remembering {
    fn decide<'a>(
        &'a self,
        request: AutoRequest<'a>,
    ) -> futures_util::future::BoxFuture<'a, Result<AutoVerdict, String>> {
        self.0.lock().unwrap().push(request.input.clone());
        Box::pin(async { Ok(AutoVerdict::Clear) })
    }
}

#[tokio::test]
async fn the_auto_decider_judges_the_input_without_its_sensitive_values() {
    let decider = Remembering::default();
    let rt = builder([judged_login::TOOL])
        .decider(decider.clone())
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-auto", Some(alice())).await;
    let results = completed(
        turn.step(vec![call("c1", "judged_login", input("eve"))])
            .await
            .unwrap(),
    );
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(seen_with("eve:"), [format!("eve:{PASSWORD}:{CARD}")]);
    let shown = decider.0.lock().unwrap().clone();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0]["user"], "eve");
    assert_eq!(shown[0]["password"], REDACTED);
    assert_no_leak("the decider's input", &shown[0].to_string());
}

#[tokio::test]
async fn a_tool_defined_from_data_is_redacted_by_its_schema() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&got);
    let tool = toolwright::DynamicTool::new("vault_put", toolwright::Effect::Write)
        .description("Stores a secret.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "secret": { "type": "string", "writeOnly": true }
            },
            "required": ["name", "secret"]
        }))
        .output_schema(json!({
            "type": "object",
            "properties": { "name": { "type": "string" }, "echo": { "type": "string", "writeOnly": true } }
        }))
        .handler(move |input: Value, _ctx: ToolContext| {
            let kept = Arc::clone(&kept);
            async move {
                kept.lock().unwrap().push(input["secret"].clone());
                Ok(json!({ "name": input["name"], "echo": input["secret"] }))
            }
        });
    let rt = crate::support::builder_over(toolwright::Registry::from_tools([]).unwrap())
        .tool(tool)
        .build()
        .unwrap();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-dyn", Some(alice())).await;
    let results = completed(
        turn.step(vec![call(
            "c1",
            "vault_put",
            json!({ "name": "db", "secret": PASSWORD }),
        )])
        .await
        .unwrap(),
    );
    assert_eq!(*got.lock().unwrap(), [json!(PASSWORD)]);
    assert_eq!(results[0].output["echo"], REDACTED);
    assert_no_leak("the result", &serde_json::to_string(&results[0]).unwrap());
    for event in drain(&mut events) {
        assert_no_leak("an event", &serde_json::to_string(&event).unwrap());
    }
}

#[cfg(feature = "agent")]
mod model_loop {
    use toolwright::agent::{AgentOutcome, LoopbackProvider, Reply, Wire};
    use toolwright::runtime::SessionSpec;

    use super::*;
    use crate::agent_files::agent;

    #[tokio::test]
    async fn the_stored_conversation_and_later_requests_carry_the_calls_sealed() {
        for wire in Wire::ALL {
            let user = format!("loop-{wire}");
            let provider = LoopbackProvider::start(
                wire,
                [
                    Reply::call("quick_login", input(&user)),
                    Reply::text("Logged in."),
                    Reply::text("Still logged in."),
                ],
            )
            .await
            .expect("the loopback provider starts");
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("agent.db");
            let runtime = builder([quick_login::TOOL])
                .store(SqliteStore::open(&path).unwrap())
                .build()
                .unwrap();
            let session = runtime
                .open_session(SessionSpec::new("logins").initiator(alice()))
                .await
                .unwrap();
            let agent = agent(wire, runtime.clone(), provider.base_url());
            for text in ["log me in", "and now?"] {
                let turn = agent.send(&session, Some(alice()), text).await.unwrap();
                assert!(
                    matches!(turn.outcome, AgentOutcome::Answered(_)),
                    "{wire}: {turn:?}"
                );
            }
            assert_eq!(
                seen_with(&format!("{user}:")),
                [format!("{user}:{PASSWORD}:{CARD}")],
                "{wire}: the tool got the real values, once"
            );
            let requests = provider.requests();
            assert_eq!(requests.len(), 3, "{wire}");
            for (round, request) in requests.iter().enumerate() {
                assert_no_leak(&format!("{wire}: request {round}"), &request.to_string());
            }
            assert!(
                requests[1].to_string().contains("$sealed"),
                "{wire}: the model sees its call sealed"
            );
            let stored = runtime.store().conversation("logins").await.unwrap();
            assert_no_leak(
                &format!("{wire}: the stored conversation"),
                &serde_json::to_string(&stored).unwrap(),
            );
            drop((session, agent, runtime));
            assert_no_leak(&format!("{wire}: the SQLite file"), &store_bytes(&path));
        }
    }
}
