//! Durable plain tools: steps are journaled, replayed without re-running, and a call interrupted
//! by a real killed process resumes at its first unrecorded step.
//!
//! The crash tests re-run this test executable as a child (`--exact child_entry`) with
//! `TOOLWRIGHT_DURABLE_CHILD` naming what it does; every step appends one line to a shared file,
//! so how often each side effect happened is counted across processes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::{
    EntryKind, JournalEntry, Runtime, SessionSpec, SqliteStore, StepOutcome, Store, ToolCall,
    TurnStatus,
};
use toolwright::{Caller, ErrorCode};

mod support;

use support::builder;

const CHILD: &str = "TOOLWRIGHT_DURABLE_CHILD";
const DB: &str = "TOOLWRIGHT_DURABLE_DB";
const EFFECTS: &str = "TOOLWRIGHT_DURABLE_EFFECTS";
const TURN_FILE: &str = "TOOLWRIGHT_DURABLE_TURN";

/// Where steps append their side effects, and when this process should die.
struct Effects {
    path: PathBuf,
    /// `after:<step>`: exit right after the step is recorded; `inside:<step>`: exit after its
    /// side effect, before it is recorded.
    crash: Option<String>,
}

impl Effects {
    fn append(&self, line: &str) -> Result<(), ToolError> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(format!("{line}\n").as_bytes())?;
        Ok(())
    }

    fn crash_if(&self, point: &str) {
        if self.crash.as_deref() == Some(point) {
            // A real, abrupt end of the process: no destructor, no flush of anything else.
            std::process::exit(9);
        }
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ProvisionArgs {
    /// The customer to provision.
    customer: String,
}

#[derive(Serialize, JsonSchema)]
struct Provisioned {
    tenant: String,
    projects: Vec<String>,
}

const PROJECTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// Provisions a workspace: creates the tenant, then seeds each default project.
#[tool(effect = write, durable)]
async fn provision(
    args: ProvisionArgs,
    ctx: DurableContext,
    effects: State<Effects>,
) -> Result<Provisioned, ToolError> {
    let tenant: String = ctx
        .step("create-tenant", async {
            effects.append("create-tenant")?;
            effects.crash_if("inside:create-tenant");
            Ok(format!("tn_{}", args.customer))
        })
        .await?;
    effects.crash_if("after:create-tenant");
    let mut projects = Vec::new();
    for project in PROJECTS {
        let name = format!("seed:{project}");
        let seeded: String = ctx
            .step(&name, async {
                effects.append(&name)?;
                effects.crash_if(&format!("inside:{name}"));
                Ok(format!("{tenant}/{project}"))
            })
            .await?;
        effects.crash_if(&format!("after:{name}"));
        projects.push(seeded);
    }
    Ok(Provisioned { tenant, projects })
}

fn runtime(store: SqliteStore, effects: Effects) -> Runtime {
    builder([provision::TOOL])
        .store(store)
        .state(effects)
        .build()
        .unwrap()
}

fn counts(path: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        *counts.entry(line.to_owned()).or_insert(0) += 1;
    }
    counts
}

fn call() -> ToolCall {
    ToolCall::new("call-1", "provision", r#"{"customer":"acme"}"#)
}

fn expected_output() -> Value {
    json!({ "tenant": "tn_acme", "projects": ["tn_acme/alpha", "tn_acme/beta", "tn_acme/gamma"] })
}

#[tokio::test]
async fn steps_are_recorded_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let effects = dir.path().join("effects");
    let rt = runtime(
        SqliteStore::in_memory().unwrap(),
        Effects {
            path: effects.clone(),
            crash: None,
        },
    );
    let session = rt.open_session(SessionSpec::new("s")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn.step(vec![call()]).await.unwrap() else {
        panic!("expected completed")
    };
    assert_eq!(results[0].output, expected_output(), "{results:?}");
    let journal = rt
        .store()
        .journal(&format!("{}/call-1", turn.id()))
        .await
        .unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["create-tenant", "seed:alpha", "seed:beta", "seed:gamma"]
    );
    assert!(
        journal
            .iter()
            .enumerate()
            .all(|(i, e)| e.position as usize == i && e.kind == EntryKind::Step)
    );
    assert_eq!(counts(&effects).values().sum::<usize>(), 4);
    // The step left nothing running.
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
}

#[tokio::test]
async fn recorded_steps_return_their_values_without_running() {
    let dir = tempfile::tempdir().unwrap();
    let effects = dir.path().join("effects");
    let rt = runtime(
        SqliteStore::in_memory().unwrap(),
        Effects {
            path: effects.clone(),
            crash: None,
        },
    );
    let session = rt.open_session(SessionSpec::new("s")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let run = format!("{}/call-1", turn.id());
    for (position, (name, value)) in [
        ("create-tenant", "tn_recorded"),
        ("seed:alpha", "tn_recorded/alpha"),
    ]
    .into_iter()
    .enumerate()
    {
        rt.store()
            .append_journal(
                &run,
                &JournalEntry {
                    position: position as u32,
                    kind: EntryKind::Step,
                    name: name.into(),
                    value: json!(value),
                },
            )
            .await
            .unwrap();
    }
    let StepOutcome::Completed { results, .. } = turn.step(vec![call()]).await.unwrap() else {
        panic!("expected completed")
    };
    // The recorded tenant flows into the steps that run now.
    assert_eq!(
        results[0].output,
        json!({ "tenant": "tn_recorded", "projects": ["tn_recorded/alpha", "tn_recorded/beta", "tn_recorded/gamma"] })
    );
    let ran = counts(&effects);
    assert_eq!(ran.get("create-tenant"), None);
    assert_eq!(ran.get("seed:alpha"), None);
    assert_eq!(ran.get("seed:beta"), Some(&1));
    assert_eq!(ran.get("seed:gamma"), Some(&1));
}

#[tokio::test]
async fn a_replay_that_reaches_another_step_fails_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let effects = dir.path().join("effects");
    let rt = runtime(
        SqliteStore::in_memory().unwrap(),
        Effects {
            path: effects.clone(),
            crash: None,
        },
    );
    let session = rt.open_session(SessionSpec::new("s")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let run = format!("{}/call-1", turn.id());
    let entry = JournalEntry {
        position: 0,
        kind: EntryKind::Step,
        name: "charge-card".into(),
        value: json!(1),
    };
    rt.store().append_journal(&run, &entry).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn.step(vec![call()]).await.unwrap() else {
        panic!("expected completed")
    };
    let error = results[0].error.as_ref().expect("the call fails");
    assert_eq!(error.code(), ErrorCode::Journal);
    assert!(
        error.message().contains("`charge-card`"),
        "{}",
        error.message()
    );
    assert!(
        error.message().contains("`create-tenant`"),
        "{}",
        error.message()
    );
    assert!(
        counts(&effects).is_empty(),
        "nothing ran past the divergence"
    );
}

#[tokio::test]
async fn a_position_is_recorded_once() {
    let store = SqliteStore::in_memory().unwrap();
    let entry = JournalEntry {
        position: 0,
        kind: EntryKind::Step,
        name: "a".into(),
        value: json!(1),
    };
    store.append_journal("run", &entry).await.unwrap();
    let second = JournalEntry {
        value: json!(2),
        ..entry.clone()
    };
    assert!(matches!(
        store.append_journal("run", &second).await,
        Err(toolwright::runtime::StoreError::Conflict(_))
    ));
    assert_eq!(store.journal("run").await.unwrap(), [entry]);
}

/// The child: start the call (crashing where told), or recover what a crashed child left.
#[tokio::test]
async fn child_entry() {
    let Ok(role) = std::env::var(CHILD) else {
        return;
    };
    let store = SqliteStore::open(std::env::var(DB).unwrap()).unwrap();
    let effects = Effects {
        path: std::env::var(EFFECTS).unwrap().into(),
        crash: std::env::var("TOOLWRIGHT_DURABLE_CRASH").ok(),
    };
    let rt = runtime(store, effects);
    match role.as_str() {
        "start" => {
            let session = rt.open_session(SessionSpec::new("crash")).await.unwrap();
            let turn = session.begin_turn(None, Caller::Model).await.unwrap();
            std::fs::write(std::env::var(TURN_FILE).unwrap(), turn.id()).unwrap();
            let outcome = turn.step(vec![call()]).await.unwrap();
            println!(
                "OUTCOME {}",
                serde_json::to_string(&outcome_json(&outcome)).unwrap()
            );
        }
        "recover" => {
            let recovered = rt.recover().await.unwrap();
            let outcome = &recovered.first().expect("a turn to recover").1;
            println!(
                "OUTCOME {}",
                serde_json::to_string(&outcome_json(outcome)).unwrap()
            );
        }
        other => panic!("unknown role {other}"),
    }
}

fn outcome_json(outcome: &StepOutcome) -> Value {
    match outcome {
        StepOutcome::Completed { results, .. } => {
            json!({ "output": results[0].output, "is_error": results[0].is_error })
        }
        StepOutcome::Waiting { .. } => json!("waiting"),
    }
}

fn child(
    role: &str,
    db: &Path,
    effects: &Path,
    turn_file: &Path,
    crash: Option<&str>,
) -> std::process::Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, role)
        .env(DB, db)
        .env(EFFECTS, effects)
        .env(TURN_FILE, turn_file);
    match crash {
        Some(point) => command.env("TOOLWRIGHT_DURABLE_CRASH", point),
        None => command.env_remove("TOOLWRIGHT_DURABLE_CRASH"),
    };
    command.output().unwrap()
}

fn outcome_of(output: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("OUTCOME ").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            panic!(
                "no outcome in the child's output:\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

/// Kills the process at every step boundary, before and after recording, and checks that the
/// recovered call completes with every recorded side effect having happened once, and an
/// unrecorded one (the crash fell between its side effect and its record) at most twice.
#[test]
fn a_killed_process_resumes_at_the_first_unrecorded_step() {
    let steps = ["create-tenant", "seed:alpha", "seed:beta", "seed:gamma"];
    let mut twice = 0;
    for step in steps {
        for point in [format!("inside:{step}"), format!("after:{step}")] {
            let dir = tempfile::tempdir().unwrap();
            let (db, effects, turn_file) = (
                dir.path().join("db"),
                dir.path().join("effects"),
                dir.path().join("turn"),
            );
            let crashed = child("start", &db, &effects, &turn_file, Some(&point));
            assert_eq!(
                crashed.status.code(),
                Some(9),
                "the child died at {point}: {}",
                String::from_utf8_lossy(&crashed.stderr)
            );
            let recovered = child("recover", &db, &effects, &turn_file, None);
            assert!(
                recovered.status.success(),
                "{}",
                String::from_utf8_lossy(&recovered.stderr)
            );
            let outcome = outcome_of(&recovered);
            assert_eq!(
                outcome,
                json!({ "output": expected_output(), "is_error": false }),
                "crash at {point}"
            );
            let ran = counts(&effects);
            for name in steps {
                let n = ran.get(name).copied().unwrap_or(0);
                if point == format!("inside:{name}") {
                    // Side effect done, record lost: run again (at least once, here twice).
                    assert_eq!(n, 2, "{name} after a crash inside it: {ran:?}");
                    twice += 1;
                } else {
                    assert_eq!(n, 1, "{name} after a crash at {point}: {ran:?}");
                }
            }
        }
    }
    println!(
        "crash points: {}, steps run twice because the crash fell between effect and record: {twice}",
        steps.len() * 2
    );
    assert_eq!(twice, steps.len());
}

static FLAKY_ATTEMPTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static FATAL_ATTEMPTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct FlakyArgs {
    fatal: bool,
}

/// Calls an upstream that fails twice before it answers.
#[tool(effect = write, durable)]
async fn flaky(args: FlakyArgs, ctx: DurableContext) -> Result<u32, ToolError> {
    ctx.step_retrying(
        "upstream",
        Retry::attempts(3).backoff(std::time::Duration::from_millis(1)),
        || async {
            if args.fatal {
                FATAL_ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                return Err(ToolError::fatal(
                    "the account is closed; retrying cannot help",
                ));
            }
            let attempt = FLAKY_ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if attempt < 3 {
                Err(ToolError::new(format!(
                    "upstream returned 503 (attempt {attempt})"
                )))
            } else {
                Ok(attempt)
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_step_is_retried_per_its_policy_and_a_fatal_error_is_not() {
    let rt = builder([flaky::TOOL]).build().unwrap();
    let session = rt.open_session(SessionSpec::new("retry")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![
            ToolCall::new("ok", "flaky", r#"{"fatal":false}"#),
            ToolCall::new("fatal", "flaky", r#"{"fatal":true}"#),
        ])
        .await
        .unwrap()
    else {
        panic!("expected completed")
    };
    assert_eq!(results[0].output, json!(3), "{results:?}");
    assert_eq!(FLAKY_ATTEMPTS.load(std::sync::atomic::Ordering::SeqCst), 3);
    // Only the final value is on record.
    let journal = rt
        .store()
        .journal(&format!("{}/ok", turn.id()))
        .await
        .unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].value, json!(3));
    assert!(results[1].is_error);
    assert_eq!(
        FATAL_ATTEMPTS.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "fatal errors skip retries"
    );
    assert!(
        rt.store()
            .journal(&format!("{}/fatal", turn.id()))
            .await
            .unwrap()
            .is_empty()
    );
}

/// The built-in `task` tool is durable: a process killed while a subagent waits for the
/// person leaves the subagent's turn parked, and the call, recovered by another process, finds
/// it there instead of starting the subagent again.
#[cfg(feature = "agent")]
mod delegation {
    use std::path::Path;
    use std::process::Command;

    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;
    use toolwright::agent::{Agent, AgentOutcome, Reply, ScriptedModel, Subagent};
    use toolwright::prelude::*;
    use toolwright::registry::task;
    use toolwright::runtime::{
        Event, InputResponse, RequestKind, Runtime, SessionSpec, SqliteStore, StepOutcome,
    };

    use super::support::alice;
    use super::{Effects, outcome_json};

    const CHILD: &str = "TOOLWRIGHT_DELEGATE_CHILD";

    #[derive(Deserialize, JsonSchema, ToolInput)]
    struct NoteArgs {
        /// The note.
        note: String,
    }

    /// Publishes a note, with a person's approval.
    #[tool(effect = write, approval = always)]
    async fn publish_note(args: NoteArgs, effects: State<Effects>) -> Result<String, ToolError> {
        effects.append(&format!("published {}", args.note))?;
        Ok(format!("published {}", args.note))
    }

    fn agent(dir: &Path, model: ScriptedModel) -> (Runtime, Agent) {
        let registry = Registry::from_tools([publish_note::TOOL, task()]).unwrap();
        let runtime = Runtime::builder(registry)
            .store(SqliteStore::open(dir.join("agent.db")).unwrap())
            .state(Effects {
                path: dir.join("effects"),
                crash: None,
            })
            .build()
            .unwrap();
        let agent = Agent::new(runtime.clone(), model)
            .subagent(Subagent::new("writer", "Writes and publishes.").tools(["publish_note"]));
        agent.install().unwrap();
        (runtime, agent)
    }

    /// The child: the parent hands the note to the writer, whose call waits for the person;
    /// the process ends abruptly there, having written down the request.
    #[tokio::test]
    async fn delegate_child_entry() {
        let Ok(dir) = std::env::var(CHILD) else {
            return;
        };
        let dir = Path::new(&dir);
        let model = ScriptedModel::new([
            Reply::call(
                "task",
                json!({ "agent": "writer", "prompt": "Publish the notes" }),
            ),
            Reply::call("publish_note", json!({ "note": "v2" })),
        ]);
        let (runtime, agent) = agent(dir, model);
        let session = runtime
            .open_session(SessionSpec::new("crash").initiator(alice()))
            .await
            .unwrap();
        let mut events = runtime.subscribe();
        tokio::spawn(async move { agent.send(&session, Some(alice()), "publish").await });
        loop {
            if let Ok(Event::InputRequested { request }) = events.recv().await {
                std::fs::write(dir.join("request"), &request.request_id).unwrap();
                std::fs::write(dir.join("turn"), &request.turn_id).unwrap();
                // A real, abrupt end of the process: no destructor runs.
                std::process::exit(9);
            }
        }
    }

    #[tokio::test]
    async fn a_subagent_waiting_for_a_person_outlives_its_process() {
        let dir = tempfile::tempdir().unwrap();
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "delegation::delegate_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, dir.path())
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(9),
            "the child ends where the subagent waits: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let request_id = std::fs::read_to_string(dir.path().join("request")).unwrap();
        let child_turn = std::fs::read_to_string(dir.path().join("turn")).unwrap();

        // Another process on the same file: the model answers only what is left.
        let model = ScriptedModel::new([
            Reply::text("Published v2."),
            Reply::text("The writer published v2."),
        ]);
        let (runtime, agent) = agent(dir.path(), model.clone());
        let waiting = runtime
            .turn(&child_turn)
            .await
            .unwrap()
            .record()
            .await
            .unwrap();
        let request = waiting
            .pending
            .iter()
            .flat_map(|p| &p.requests)
            .find(|r| r.request_id == request_id)
            .expect("the subagent's request is still pending")
            .clone();
        assert_eq!(request.kind, RequestKind::ToolApproval);
        assert_eq!(request.requester, Some(alice()));

        // Recovery runs the parent's `task` call again; it finds the subagent's turn parked
        // and waits for the person, who answers meanwhile.
        let recovering = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.recover().await }
        });
        runtime
            .respond(InputResponse::approve(&request_id, Some(alice())))
            .await
            .unwrap();
        let recovered = recovering.await.unwrap().unwrap();
        assert_eq!(recovered.len(), 1, "the parent's turn is recovered");
        let (parent_turn, outcome) = &recovered[0];
        assert!(
            matches!(outcome, StepOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            outcome_json(outcome),
            json!({ "output": { "agent": "writer", "answer": "Published v2.", "session": format!("crash/{parent_turn}/call_1_1/writer#1") }, "is_error": false })
        );
        let run = agent.resume(parent_turn).await.unwrap();
        let AgentOutcome::Answered(response) = &run.outcome else {
            panic!("{:?}", run.outcome);
        };
        assert_eq!(response.message.text, "The writer published v2.");
        // The note was published once, by the answer; no request of the crashed process was
        // sent again.
        let effects = std::fs::read_to_string(dir.path().join("effects")).unwrap();
        assert_eq!(effects, "published v2\n");
        assert_eq!(model.requests().len(), 2);
    }
}
