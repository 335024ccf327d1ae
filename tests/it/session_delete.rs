//! Deleting a session takes everything it holds, in the store and in the sandbox (turns and
//! their journals, the hooks its calls made, its conversation, its attachments), and is refused
//! while a turn of it waits; another session's parked turn is untouched and resumes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, Runtime, RuntimeError, SessionSpec, SqliteStore, StoreError,
};
use toolwright::sandbox::LocalSandbox;
use toolwright::{Caller, HookEvent, Registry};

use crate::support::{alice, call, completed, resumed, waiting};

static ARCHIVED: AtomicUsize = AtomicUsize::new(0);

fn tokens() -> &'static Mutex<HashMap<String, String>> {
    static TOKENS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    TOKENS.get_or_init(Mutex::default)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Invoice {
    /// The invoice, which names the hook.
    invoice: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Paid {
    cents: u64,
}

/// Waits for an invoice's payment, journaling each step.
#[tool(effect = write, workflow = execute)]
async fn await_invoice(args: Invoice, ctx: WorkflowContext) -> Result<String, ToolError> {
    let hook = ctx.hook::<Paid>(format!("paid-{}", args.invoice)).await?;
    let (invoice, token) = (args.invoice.clone(), hook.token().to_owned());
    ctx.step("hand-out", async move {
        tokens().lock().unwrap().insert(invoice, token);
        Ok(())
    })
    .await?;
    match ctx.wait_hook(&hook).await? {
        HookEvent::Received(paid) => Ok(format!("paid {}", paid.cents)),
        other => Ok(format!("{other:?}")),
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct NoArgs {}

fn shown(output: &ModelOutput) -> ModelOutput {
    output.clone()
}

/// Draws the invoice as a PNG.
#[tool(effect = read, to_model_output = shown)]
async fn draw_invoice(_: NoArgs) -> ModelOutput {
    ModelOutput::content([ContentPart::file(
        STANDARD.encode(b"\x89PNG invoice"),
        "image/png",
    )])
}

/// Archives the books (asks first).
#[tool(effect = write, approval = always)]
async fn archive_books(_: NoArgs) -> String {
    ARCHIVED.fetch_add(1, Ordering::SeqCst);
    "archived".into()
}

#[tokio::test]
async fn a_deleted_session_takes_its_turns_journals_hooks_conversation_and_files_and_nothing_else()
{
    let dir = tempfile::tempdir().unwrap();
    let sandbox = tempfile::tempdir().unwrap();
    let registry =
        Registry::from_tools([await_invoice::TOOL, draw_invoice::TOOL, archive_books::TOOL])
            .unwrap();
    let runtime = Runtime::builder(registry)
        .store(SqliteStore::open(dir.path().join("store.db")).unwrap())
        .sandbox(LocalSandbox::open(sandbox.path()).unwrap())
        .build()
        .unwrap();
    let store = runtime.store();

    // Another session, parked on an approval.
    let kept = runtime
        .open_session(SessionSpec::new("kept").initiator(alice()))
        .await
        .unwrap();
    let parked = kept.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    let (_, approvals) = waiting(
        parked
            .step(vec![call("a1", "archive_books", json!({}))])
            .await
            .unwrap(),
    );

    // The session to delete: a file in the sandbox, a workflow parked on its hook.
    let doomed = runtime
        .open_session(SessionSpec::new("doomed").initiator(alice()))
        .await
        .unwrap();
    let turn = doomed
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let drawn = completed(
        turn.step(vec![call("c1", "draw_invoice", json!({}))])
            .await
            .unwrap(),
    );
    let ContentPart::Attachment { id: file, path, .. } = (match &*drawn[0].model() {
        ModelOutput::Content(parts) => parts[0].clone(),
        other => panic!("{other:?}"),
    }) else {
        panic!("an attachment: {:?}", drawn[0].model())
    };
    let path = sandbox.path().join(path.expect("kept in the sandbox"));
    assert!(path.exists());
    store
        .append_conversation("doomed", turn.id(), 0, &[json!({ "role": "user" })])
        .await
        .unwrap();
    let (_, requests) = waiting(
        turn.step(vec![call(
            "c2",
            "await_invoice",
            json!({ "invoice": "i7" }),
        )])
        .await
        .unwrap(),
    );
    let hook = requests[0].input.as_ref().unwrap()["hook"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hook_journal = format!("hooks/{hook}");
    let run = format!("{}/c2", turn.id());
    assert!(!store.journal(&hook_journal).await.unwrap().is_empty());
    assert!(!store.journal(&run).await.unwrap().is_empty());

    // Refused while its turn waits: nothing goes.
    match doomed.delete().await {
        Err(RuntimeError::Store(StoreError::Busy { what, .. })) => {
            assert!(what.contains("waiting"), "{what}");
        }
        other => panic!("deleting a session whose turn waits: {other:?}"),
    }
    assert!(store.turn(turn.id()).await.unwrap().is_some());
    assert!(path.exists(), "a refused deletion keeps the files");

    let token = tokens().lock().unwrap()["i7"].clone();
    runtime
        .resume_hook(&token, json!({ "cents": 700 }))
        .await
        .unwrap();
    let record = turn.record().await.unwrap();
    assert!(record.pending.is_none(), "the wait is over: {record:?}");
    turn.complete().await.unwrap();

    let deleted = doomed.delete().await.unwrap();
    assert!(deleted.done && deleted.turns == 1, "{deleted:?}");
    assert!(matches!(
        runtime.session("doomed").await,
        Err(RuntimeError::UnknownSession(_))
    ));
    assert!(store.turn(turn.id()).await.unwrap().is_none());
    assert!(store.journal(&run).await.unwrap().is_empty());
    assert!(store.journal(&hook_journal).await.unwrap().is_empty());
    assert!(store.conversation("doomed").await.unwrap().is_empty());
    assert!(store.attachment("doomed", &file).await.unwrap().is_none());
    assert!(!path.exists(), "the file goes from the sandbox");
    assert!(!path.parent().unwrap().exists());
    let again = doomed.delete().await.unwrap();
    assert!(again.done && again.turns == 0, "{again:?}");

    // The other session's parked turn resumes, its call running once.
    let before = ARCHIVED.load(Ordering::SeqCst);
    let answer = InputResponse::approve(&approvals[0].request_id, Some(alice()));
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!("archived"));
    assert_eq!(ARCHIVED.load(Ordering::SeqCst), before + 1);
}
