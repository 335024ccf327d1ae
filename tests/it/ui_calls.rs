//! Calls from the user interface: tools run as the user (user-only tools allowed, no approval
//! asked for the user's own action, response policies still deciding who may, the user named as
//! caller in the turn and the events), and the shared result cache of read tools (canonical
//! input, one call for concurrent views, TTL on the runtime's clock, invalidated by writes of the
//! same toolset from anywhere, never serving a read that overlapped a write).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, Invoked, Permission, Runtime, RuntimeError, Session, SessionSpec, StepOutcome, ToolCall,
};
use toolwright::{Caller, Effect, ErrorCode, Principal};

use crate::support::clock::ManualClock;
use crate::support::{alice, builder};

/// The focus timer's store, with a count of reads.
#[derive(Default)]
struct Focus {
    minutes: AtomicU64,
    reads: AtomicUsize,
    /// Set: `today` waits for it before answering (a read that overlaps a write).
    gate: std::sync::Mutex<Option<Arc<tokio::sync::Notify>>>,
    started: tokio::sync::Notify,
    importing: tokio::sync::Notify,
    finish_import: tokio::sync::Notify,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Day {
    /// The day, `YYYY-MM-DD`; today when absent.
    #[serde(default)]
    day: Option<String>,
    /// Count breaks too.
    #[serde(default)]
    breaks: bool,
}

/// Minutes of focus on a day.
#[tool(toolset = "focus", effect = read)]
async fn today(args: Day, focus: State<Arc<Focus>>) -> Result<Value, ToolError> {
    focus.reads.fetch_add(1, Ordering::SeqCst);
    let gate = focus.gate.lock().unwrap().clone();
    if let Some(gate) = gate {
        focus.started.notify_one();
        gate.notified().await;
    }
    if args.day.as_deref() == Some("broken") {
        return Err(ToolError::new("the focus log for that day is unreadable"));
    }
    Ok(json!({ "minutes": focus.minutes.load(Ordering::SeqCst), "breaks": args.breaks }))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Start {
    /// What the session is for.
    label: String,
}

/// Starts a focus session (pages only).
#[tool(toolset = "focus", effect = write, user_only)]
async fn start(
    args: Start,
    ctx: ToolContext,
    focus: State<Arc<Focus>>,
) -> Result<Value, ToolError> {
    focus.minutes.fetch_add(25, Ordering::SeqCst);
    Ok(json!({
        "label": args.label,
        "caller": ctx.caller(),
        "by": ctx.session().current.as_ref().map(|p| p.principal_id.clone()),
    }))
}

/// Clears the focus log; asks every time.
#[tool(toolset = "focus", effect = write, approval = always)]
async fn reset(_args: NoInput, focus: State<Arc<Focus>>) -> Result<(), ToolError> {
    focus.minutes.store(0, Ordering::SeqCst);
    Ok(())
}

/// Deletes all focus data; only an admin may approve it.
#[tool(
    toolset = "focus",
    effect = write,
    approval(request = always, response = admins_only)
)]
async fn purge(_args: NoInput, focus: State<Arc<Focus>>) -> Result<(), ToolError> {
    focus.minutes.store(0, Ordering::SeqCst);
    Ok(())
}

fn admins_only(cx: &ResponseContext<'_, NoInput>) -> ResponseVerdict {
    match cx.responder.and_then(|p| p.attribute_str("role")) {
        Some("admin") => ResponseVerdict::Allowed,
        _ => ResponseVerdict::rejected("only admins approve purges"),
    }
}

/// Exports the focus log; never for the interns' pages.
#[tool(toolset = "focus", effect = public, approval = no_interns)]
async fn publish(_args: NoInput) -> Result<(), ToolError> {
    Ok(())
}

fn no_interns(cx: &ApprovalContext<'_, NoInput>) -> ApprovalDecision {
    match cx.current().map(|p| p.principal_id.as_str()) {
        Some("intern") => ApprovalDecision::denied("interns do not publish"),
        _ => ApprovalDecision::UserApproval,
    }
}

/// Imports a focus log slowly: it waits for the test's signal, having changed half the data.
#[tool(toolset = "focus", effect = write)]
async fn import(_args: NoInput, focus: State<Arc<Focus>>) -> Result<(), ToolError> {
    focus.minutes.store(1, Ordering::SeqCst);
    focus.importing.notify_one();
    focus.finish_import.notified().await;
    focus.minutes.store(2, Ordering::SeqCst);
    Ok(())
}

/// Summarizes the week in the background.
#[tool(toolset = "focus", effect = read, workflow = task)]
async fn weekly(_args: NoInput, _ctx: WorkflowContext) -> Result<u64, ToolError> {
    Ok(0)
}

/// Adds a note (another toolset: it leaves focus data alone).
#[tool(toolset = "notes", effect = write)]
async fn add(_args: NoInput) -> Result<(), ToolError> {
    Ok(())
}

struct Fixture {
    rt: Runtime,
    focus: Arc<Focus>,
    clock: ManualClock,
}

fn fixture() -> Fixture {
    let focus = Arc::new(Focus::default());
    let clock = ManualClock::at(1_000_000);
    let rt = builder([
        today::TOOL,
        start::TOOL,
        reset::TOOL,
        purge::TOOL,
        publish::TOOL,
        add::TOOL,
        import::TOOL,
        weekly::TOOL,
    ])
    .state(Arc::clone(&focus))
    .options(clock.options())
    .build()
    .unwrap();
    Fixture { rt, focus, clock }
}

async fn session(rt: &Runtime, id: &str) -> Session {
    rt.open_session(SessionSpec::new(id).initiator(alice()))
        .await
        .unwrap()
}

fn done(invoked: Invoked) -> toolwright::runtime::CallResult {
    match invoked {
        Invoked::Done { result, .. } => result,
        Invoked::Waiting { requests, .. } => panic!("expected a result, got requests {requests:?}"),
    }
}

#[tokio::test]
async fn the_user_runs_user_only_tools_as_the_caller_of_record() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    let mut events = f.rt.subscribe();
    let invoked = page
        .invoke(alice(), "focus__start", json!({ "label": "calculus" }))
        .await
        .unwrap();
    let Invoked::Done { result, turn } = invoked else {
        panic!("expected a result");
    };
    assert!(!result.is_error, "{result:?}");
    assert_eq!(
        result.output,
        json!({ "label": "calculus", "caller": "user", "by": "alice" })
    );
    // The turn is the audit record: the user is its caller and its actor; it is closed.
    let record = turn.record().await.unwrap();
    assert_eq!(record.caller, Caller::User);
    assert_eq!(record.current, Some(alice()));
    assert_eq!(
        record.status,
        toolwright::runtime::TurnStatus::Completed,
        "{record:?}"
    );
    let mut started = None;
    let mut requested = None;
    while let Ok(event) = events.try_recv() {
        match event {
            Event::TurnStarted {
                caller, principal, ..
            } => started = Some((caller, principal)),
            Event::ActionRequested {
                tool,
                caller,
                principal,
                ..
            } => requested = Some((tool, caller, principal)),
            _ => {}
        }
    }
    assert_eq!(started, Some((Caller::User, Some(alice()))));
    assert_eq!(
        requested,
        Some(("focus__start".to_owned(), Caller::User, Some(alice())))
    );
    // The id works as well as the model-facing name.
    let again = page
        .invoke(alice(), "focus.start", json!({ "label": "physics" }))
        .await
        .unwrap();
    assert!(!done(again).is_error);
    assert_eq!(f.focus.minutes.load(Ordering::SeqCst), 50);

    // The model cannot call it, and a model turn's events say the model called.
    let turn = page.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![ToolCall::new(
            "c1",
            "focus__start",
            r#"{"label":"x"}"#,
        )])
        .await
        .unwrap()
    else {
        panic!("expected a refusal");
    };
    assert_eq!(
        results[0].error.as_ref().unwrap().code(),
        ErrorCode::UnknownTool
    );
}

#[tokio::test]
async fn the_users_own_action_needs_no_approval_but_response_policies_still_decide() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    page.set_permission(Effect::Write, Permission::Ask)
        .await
        .unwrap();
    // `always`, in a session that asks before every write: the model is asked...
    let turn = page.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    let outcome = turn
        .step(vec![ToolCall::new("c1", "focus__reset", "{}")])
        .await
        .unwrap();
    assert!(
        matches!(outcome, StepOutcome::Waiting { .. }),
        "{outcome:?}"
    );
    turn.cancel().await.unwrap();
    // ...the user, acting, is not.
    let result = done(
        page.invoke(alice(), "focus__reset", json!({}))
            .await
            .unwrap(),
    );
    assert!(!result.is_error, "{result:?}");
    assert!(f.rt.waiting_turns().await.unwrap().is_empty());

    // Only admins may approve a purge, so only an admin may purge from a page.
    let denied = done(
        page.invoke(alice(), "focus__purge", json!({}))
            .await
            .unwrap(),
    );
    let error = denied.error.unwrap();
    assert_eq!(error.code(), ErrorCode::Denied);
    assert!(
        error.message().contains("only admins approve purges"),
        "{}",
        error.message()
    );
    let admin = Principal::user("oidc", "root").with_attribute("role", "admin");
    let purged = done(page.invoke(admin, "focus__purge", json!({})).await.unwrap());
    assert!(!purged.is_error, "{purged:?}");

    // A custom request policy's denial stays a denial; what it would ask, the user may do.
    let intern = Principal::user("oidc", "intern");
    let refused = done(
        page.invoke(intern, "focus__publish", json!({}))
            .await
            .unwrap(),
    );
    assert_eq!(refused.error.unwrap().code(), ErrorCode::Denied);
    let published = done(
        page.invoke(alice(), "focus__publish", json!({}))
            .await
            .unwrap(),
    );
    assert!(!published.is_error, "{published:?}");
}

#[tokio::test]
async fn what_cannot_be_called_from_the_user_interface_says_why() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    let error = page
        .invoke(alice(), "focus__strat", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(error, RuntimeError::UserCall { .. }));
    assert!(
        error
            .to_string()
            .starts_with("`focus__strat` cannot be called from the user interface: "),
        "{error}"
    );
    assert!(error.to_string().contains("focus__start"), "{error}");

    let error = page
        .tool_data(alice(), "focus__reset", json!({}), Duration::from_secs(60))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "`focus__reset` cannot be called from the user interface: its effect is `write`, and only `read` tools' results are cached; run it with `Session::invoke`"
    );
    let error = page
        .tool_data(
            alice(),
            "focus__today",
            json!({ "day": 7 }),
            Duration::from_secs(60),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("/day"), "{error}");
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 0);
    // Bad input through `invoke` is the call's error, as for the model.
    let result = done(
        page.invoke(alice(), "focus__start", json!({ "label": 3 }))
            .await
            .unwrap(),
    );
    assert_eq!(result.error.unwrap().code(), ErrorCode::InvalidInput);
}

#[tokio::test]
async fn views_share_one_call_until_the_ttl_runs_out() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    let minute = Duration::from_secs(60);
    let first = page
        .tool_data(
            alice(),
            "focus__today",
            json!({ "day": "2026-11-29", "breaks": false }),
            minute,
        )
        .await
        .unwrap();
    assert_eq!(first.output, json!({ "minutes": 0, "breaks": false }));
    // Key order and defaults do not make another entry.
    let second = page
        .tool_data(
            alice(),
            "focus.today",
            json!({ "breaks": false, "day": "2026-11-29" }),
            minute,
        )
        .await
        .unwrap();
    assert_eq!(second.output, first.output);
    let default = page
        .tool_data(alice(), "focus__today", json!({ "day": null }), minute)
        .await
        .unwrap();
    page.tool_data(alice(), "focus__today", json!({}), minute)
        .await
        .unwrap();
    assert_eq!(default.output, json!({ "minutes": 0, "breaks": false }));
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 2);

    // Five views at once: one call.
    let views =
        (0..5).map(|_| page.tool_data(alice(), "focus__today", json!({ "breaks": true }), minute));
    for result in futures_util::future::join_all(views).await {
        assert_eq!(result.unwrap().output["breaks"], true);
    }
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 3);

    // Another user, or another session, has entries of its own.
    page.tool_data(
        Principal::user("oidc", "bob"),
        "focus__today",
        json!({ "breaks": true }),
        minute,
    )
    .await
    .unwrap();
    let other = session(&f.rt, "other-page").await;
    other
        .tool_data(alice(), "focus__today", json!({ "breaks": true }), minute)
        .await
        .unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 5);

    // The TTL is the asker's, on the runtime's clock.
    f.clock.advance(30_000);
    page.tool_data(alice(), "focus__today", json!({ "breaks": true }), minute)
        .await
        .unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 5);
    page.tool_data(
        alice(),
        "focus__today",
        json!({ "breaks": true }),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 6);
    f.clock.advance(60_000);
    page.tool_data(alice(), "focus__today", json!({ "breaks": true }), minute)
        .await
        .unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 7);

    // Failures are not kept.
    for _ in 0..2 {
        let failed = page
            .tool_data(alice(), "focus__today", json!({ "day": "broken" }), minute)
            .await
            .unwrap();
        assert!(failed.is_error);
    }
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 9);
}

#[tokio::test]
async fn a_write_of_the_same_toolset_from_anywhere_invalidates_the_cache() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    let minute = Duration::from_secs(60);
    let read = || page.tool_data(alice(), "focus__today", json!({}), minute);
    assert_eq!(read().await.unwrap().output["minutes"], 0);
    // Another toolset's write leaves it alone.
    done(page.invoke(alice(), "notes__add", json!({})).await.unwrap());
    read().await.unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 1);
    // The user's own write.
    done(
        page.invoke(alice(), "focus__start", json!({ "label": "x" }))
            .await
            .unwrap(),
    );
    assert_eq!(read().await.unwrap().output["minutes"], 25);
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 2);
    // A model's write in another session, approved first.
    let chat = session(&f.rt, "chat").await;
    let turn = chat.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("c1", "focus__reset", "{}")])
        .await
        .unwrap()
    else {
        panic!("`reset` asks the model's user");
    };
    // Asking runs nothing: the cache still holds.
    read().await.unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 2);
    f.rt.respond(toolwright::runtime::InputResponse::approve(
        &requests[0].request_id,
        Some(alice()),
    ))
    .await
    .unwrap();
    assert_eq!(read().await.unwrap().output["minutes"], 0);
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_read_that_overlapped_a_write_is_not_served_again() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    let gate = Arc::new(tokio::sync::Notify::new());
    *f.focus.gate.lock().unwrap() = Some(Arc::clone(&gate));
    let reader = {
        let page = page.clone();
        tokio::spawn(async move {
            page.tool_data(alice(), "focus__today", json!({}), Duration::from_secs(60))
                .await
                .unwrap()
        })
    };
    // The read has started (and read 0 minutes' worth of state, say); a write runs now.
    f.focus.started.notified().await;
    *f.focus.gate.lock().unwrap() = None;
    done(
        page.invoke(alice(), "focus__start", json!({ "label": "x" }))
            .await
            .unwrap(),
    );
    gate.notify_one();
    reader.await.unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 1);
    // The overlapping read answered its asker, but the next view calls again.
    let fresh = page
        .tool_data(alice(), "focus__today", json!({}), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(fresh.output["minutes"], 25);
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn reads_during_a_write_are_neither_served_nor_kept() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    let minute = Duration::from_secs(60);
    // A model's import runs in another session and stops half-way.
    let chat = session(&f.rt, "chat").await;
    let turn = chat.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    let importing = tokio::spawn(async move {
        turn.step(vec![ToolCall::new("c1", "focus__import", "{}")])
            .await
            .unwrap()
    });
    f.focus.importing.notified().await;
    for _ in 0..2 {
        let half = page
            .tool_data(alice(), "focus__today", json!({}), minute)
            .await
            .unwrap();
        assert_eq!(half.output["minutes"], 1);
    }
    assert_eq!(
        f.focus.reads.load(Ordering::SeqCst),
        2,
        "nothing kept mid-write"
    );
    f.focus.finish_import.notify_one();
    importing.await.unwrap();
    for _ in 0..2 {
        let done = page
            .tool_data(alice(), "focus__today", json!({}), minute)
            .await
            .unwrap();
        assert_eq!(done.output["minutes"], 2);
    }
    assert_eq!(
        f.focus.reads.load(Ordering::SeqCst),
        3,
        "kept once the write ended"
    );
}

#[tokio::test]
async fn views_waiting_for_a_failing_call_share_its_failure() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    let gate = Arc::new(tokio::sync::Notify::new());
    *f.focus.gate.lock().unwrap() = Some(Arc::clone(&gate));
    let focus = Arc::clone(&f.focus);
    // Released once the first call is in the tool, with the other views queued behind it.
    let release = tokio::spawn(async move {
        focus.started.notified().await;
        tokio::task::yield_now().await;
        gate.notify_one();
    });
    let views = (0..3).map(|_| {
        page.tool_data(
            alice(),
            "focus__today",
            json!({ "day": "broken" }),
            Duration::from_secs(60),
        )
    });
    for result in futures_util::future::join_all(views).await {
        assert!(result.unwrap().is_error);
    }
    release.await.unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 1);
    // A later view calls again: failures are not kept.
    *f.focus.gate.lock().unwrap() = None;
    let again = page
        .tool_data(
            alice(),
            "focus__today",
            json!({ "day": "broken" }),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert!(again.is_error);
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn cache_edges_huge_ttls_task_tools_changed_roles_and_ended_sessions() {
    let f = fixture();
    let page = session(&f.rt, "page").await;
    // A TTL too large for milliseconds is "forever", not zero.
    for _ in 0..2 {
        page.tool_data(alice(), "focus__today", json!({}), Duration::MAX)
            .await
            .unwrap();
    }
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 1);
    // A principal's attributes are part of the key: new roles, new entry.
    page.tool_data(
        alice().with_attribute("role", "admin"),
        "focus__today",
        json!({}),
        Duration::MAX,
    )
    .await
    .unwrap();
    assert_eq!(f.focus.reads.load(Ordering::SeqCst), 2);
    // A task's result arrives later: nothing to cache.
    let error = page
        .tool_data(alice(), "focus__weekly", json!({}), Duration::MAX)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("starts a workflow task"),
        "{error}"
    );
    // An ended session serves nothing more.
    page.end().await.unwrap();
    let error = page
        .tool_data(alice(), "focus__today", json!({}), Duration::MAX)
        .await
        .unwrap_err();
    assert!(matches!(error, RuntimeError::SessionEnded(_)), "{error}");
}
