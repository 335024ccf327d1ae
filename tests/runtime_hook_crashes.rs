//! Crashes around hooks: child processes killed while a workflow task waits on a hook, and
//! killed between recording a delivery and handing it to the waiting run — the one window
//! where a delivery is on record and the run does not know it. Fresh processes then heal the
//! run two ways: the sender's retry (refused as a second delivery, but it wakes the run) and
//! `Runtime::recover` at start. Each scenario checks what the store and the effects file hold
//! after every child: the task waits with the delivery recorded and nothing shipped, then
//! ships exactly once with the first payload. Unix only: it SIGKILLs its children.

#![cfg(unix)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::runtime::{
    EntryKind, JournalEntry, Runtime, RuntimeError, SessionSpec, SqliteStore, Store, TaskStatus,
    ToolCall,
};

mod support;

use support::crash::{self, ChildEnd, Crash, CrashPoints, CrashStore};
use support::{alice, builder};

const CHILD: &str = "TOOLWRIGHT_HOOK_CRASH_CHILD";
const ACTION: &str = "TOOLWRIGHT_HOOK_CRASH_ACTION";

/// The run's directory, where the body hands its token out and logs its side effect.
struct Dir(PathBuf);

#[derive(Debug, Deserialize, JsonSchema)]
struct Payment {
    amount: u64,
}

/// Waits for a payment on a task of its own, then ships once.
#[tool(effect = write, workflow = task)]
async fn fulfil(_: NoInput, ctx: WorkflowContext, dir: State<Dir>) -> Result<String, ToolError> {
    let hook = ctx.hook::<Payment>("payment").await?;
    let (token, path) = (hook.token().to_owned(), dir.0.0.join("token"));
    ctx.step("hand-out", async move { Ok(std::fs::write(path, token)?) })
        .await?;
    let HookEvent::Received(payment) = ctx.wait_hook(&hook).await? else {
        return Err(ToolError::new("no payment"));
    };
    let effects = dir.0.0.join("effects");
    ctx.step("ship", async move {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(effects)?;
        // One `write` per line: whole, whatever kills the process.
        file.write_all(format!("ship {}\n", std::process::id()).as_bytes())?;
        Ok(())
    })
    .await?;
    Ok(format!("paid {}", payment.amount))
}

/// The store dies right after a delivery is recorded, before the run hears of it.
const POINTS: CrashPoints = CrashPoints {
    record_journal: delivery_recorded,
    ..CrashPoints::NONE
};

fn delivery_recorded(crash: &Crash, entry: &JournalEntry) {
    if entry.kind == EntryKind::Delivery {
        crash.point("after:delivery");
    }
}

fn runtime(store: impl Store, dir: &Path) -> Runtime {
    builder([fulfil::TOOL])
        .store(store)
        .state(Dir(dir.to_owned()))
        .build()
        .unwrap()
}

/// Waits until the task of session `crash` leaves `running`; its status.
async fn settled(rt: &Runtime) -> Option<TaskStatus> {
    for _ in 0..3000 {
        if let Some(task) = rt.tasks("crash").await.unwrap().into_iter().next()
            && task.status != TaskStatus::Running
        {
            return Some(task.status);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

#[tokio::test]
async fn child_entry() {
    let Some(dir) = std::env::var_os(CHILD).map(PathBuf::from) else {
        return;
    };
    let action = std::env::var(ACTION).unwrap();
    let plan = vec!["kill:parked:hook".to_owned(), "after:delivery".to_owned()];
    let crash = Arc::new(Crash::new(dir.clone(), plan, "child"));
    let store = CrashStore::new(
        SqliteStore::open(dir.join("db")).unwrap(),
        crash.clone(),
        POINTS,
    );
    let rt = runtime(store, &dir);
    let token = || std::fs::read_to_string(dir.join("token")).unwrap();
    let payment = serde_json::json!({ "amount": 5 });
    match action.as_str() {
        "start" => {
            let session = rt
                .open_session(SessionSpec::new("crash").initiator(alice()))
                .await
                .unwrap();
            let turn = session
                .begin_turn(Some(alice()), Caller::Model)
                .await
                .unwrap();
            turn.step(vec![ToolCall::new("c1", "fulfil", "{}")])
                .await
                .unwrap();
            assert_eq!(settled(&rt).await, Some(TaskStatus::Waiting));
            crash.hold("kill:parked:hook");
        }
        "deliver" => {
            // Dies inside, right after the delivery is recorded.
            let _ = rt.resume_hook(&token(), payment).await;
        }
        "redeliver" => {
            let again = rt
                .resume_hook(&token(), serde_json::json!({ "amount": 6 }))
                .await;
            assert!(
                matches!(
                    again,
                    Err(RuntimeError::Hook(
                        toolwright::runtime::HookRefused::Delivered { .. }
                    ))
                ),
                "{again:?}"
            );
        }
        "recover" => {
            rt.recover().await.unwrap();
        }
        other => panic!("no action {other}"),
    }
    let status = settled(&rt).await;
    let task = rt.tasks("crash").await.unwrap().into_iter().next().unwrap();
    let output = task.calls[0].result.as_ref().map(|r| r.output.clone());
    println!("OUTCOME {status:?} {output:?}");
}

fn run_child(dir: &Path, action: &str) -> ChildEnd {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, dir)
        .env(ACTION, action);
    crash::run_child(dir, &mut command, Duration::from_secs(60))
}

fn shipped(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("effects"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("ship "))
        .count()
}

async fn state(dir: &Path) -> (TaskStatus, bool) {
    let store = SqliteStore::open(dir.join("db")).unwrap();
    let rt = runtime(store, dir);
    let task = rt.tasks("crash").await.unwrap().into_iter().next().unwrap();
    let hook = task
        .requests
        .iter()
        .find_map(|r| r.input.as_ref()?["hook"]["id"].as_str().map(str::to_owned))
        .unwrap();
    let delivered = rt
        .store()
        .journal(&format!("hooks/{hook}"))
        .await
        .unwrap()
        .iter()
        .any(|e| e.kind == EntryKind::Delivery);
    (task.status, delivered)
}

#[tokio::test]
async fn a_delivery_cut_short_by_a_crash_reaches_its_run_once_by_retry_or_recovery() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    for heal in ["redeliver", "recover"] {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let started = run_child(dir, "start");
        assert!(
            matches!(&started, ChildEnd::Killed(p) if p == "kill:parked:hook"),
            "{started:?}"
        );
        assert_eq!(state(dir).await, (TaskStatus::Waiting, false));

        let delivered = run_child(dir, "deliver");
        assert!(
            matches!(&delivered, ChildEnd::Exited(p) if p == "after:delivery"),
            "{delivered:?}"
        );
        // On record, not handed over: the run still waits, nothing shipped.
        assert_eq!(state(dir).await, (TaskStatus::Waiting, true));
        assert_eq!(shipped(dir), 0);

        let healed = run_child(dir, heal);
        let ChildEnd::Normal(out) = &healed else {
            panic!("{heal}: {healed:?}");
        };
        assert!(
            out.contains(r#"OUTCOME Some(Finished) Some(String("paid 5"))"#),
            "{heal}: {out}"
        );
        assert_eq!(shipped(dir), 1, "{heal}: shipped once");
    }
}
