//! Steering the model loop: a user's message sent into a running agent turn interrupts the
//! step's slow call through its real cancellation token, leaves a `workflow = task` body
//! running, and reaches the model in the next request right after the step's results; a parked
//! turn has its approvals revoked; an ended turn refuses the message.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use toolwright::agent::{Agent, AgentError, AgentOutcome, Message, Reply, ScriptedModel};
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, Outcome, RespondOutcome, Runtime, RuntimeError, SessionSpec, SqliteStore, Steered,
    TurnStatus,
};
use toolwright::{ErrorCode, Principal};

/// What the tools tell the test (`<tool> started`, `<tool> cancelled`, `<tool> finished`).
#[derive(Clone)]
struct Probe {
    said: mpsc::UnboundedSender<String>,
    /// Holds `digest` until the test adds a permit.
    gate: Arc<Semaphore>,
}

impl Probe {
    fn say(&self, what: &str) {
        let _ = self.said.send(what.to_owned());
    }
}

/// Says `<tool> cancelled` when the body is dropped with its token fired.
struct Cancelled {
    tool: &'static str,
    ctx: Option<ToolContext>,
    probe: Probe,
}

impl Drop for Cancelled {
    fn drop(&mut self) {
        if self.ctx.as_ref().is_some_and(ToolContext::is_cancelled) {
            self.probe.say(&format!("{} cancelled", self.tool));
        }
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Nothing {}

/// Looks something up at once.
#[tool(effect = read)]
async fn lookup(_: Nothing, probe: State<Probe>) -> Result<String, ToolError> {
    probe.say("lookup finished");
    Ok("found it".into())
}

/// Scans every log line; slow.
#[tool(effect = read)]
async fn scan(_: Nothing, ctx: ToolContext, probe: State<Probe>) -> Result<String, ToolError> {
    let _cancelled = Cancelled {
        tool: "scan",
        ctx: Some(ctx.clone()),
        probe: (*probe).clone(),
    };
    probe.say("scan started");
    ctx.cancelled().await;
    Err(ToolError::new("scan stopped"))
}

/// Builds the weekly digest in the background.
#[tool(effect = write, workflow = task)]
async fn digest(
    _: Nothing,
    ctx: WorkflowContext,
    probe: State<Probe>,
) -> Result<String, ToolError> {
    probe.say("digest started");
    tokio::select! {
        permit = probe.gate.acquire() => permit.map_err(|e| ToolError::new(e.to_string()))?.forget(),
        () = ctx.cancelled() => {
            probe.say("digest cancelled");
            return Err(ToolError::new("digest cancelled"));
        }
    }
    probe.say("digest finished");
    Ok("digest built".into())
}

/// Publishes a post, with a person's approval.
#[tool(effect = write, approval = always)]
async fn publish(_: Nothing) -> Result<String, ToolError> {
    Ok("published".into())
}

fn alice() -> Principal {
    Principal::user("test", "alice")
}

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    probe: Probe,
    heard: mpsc::UnboundedReceiver<String>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (said, heard) = mpsc::unbounded_channel();
        let probe = Probe {
            said,
            gate: Arc::new(Semaphore::new(0)),
        };
        let registry =
            Registry::from_tools([lookup::TOOL, scan::TOOL, digest::TOOL, publish::TOOL]).unwrap();
        let runtime = Runtime::builder(registry)
            .store(SqliteStore::open(dir.path().join("steer.db")).unwrap())
            .state(probe.clone())
            .build()
            .unwrap();
        Fixture {
            _dir: dir,
            runtime,
            probe,
            heard,
        }
    }

    async fn session(&self, id: &str) -> toolwright::runtime::Session {
        self.runtime
            .open_session(SessionSpec::new(id).initiator(alice()))
            .await
            .unwrap()
    }

    /// Waits until a tool says `expected`, returning what was said on the way. The timeout
    /// only turns a hang into a failure.
    async fn until(&mut self, expected: &str) -> Vec<String> {
        let mut seen = Vec::new();
        let heard = &mut self.heard;
        let wait = async {
            while let Some(said) = heard.recv().await {
                let done = said == expected;
                seen.push(said);
                if done {
                    return;
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(120), wait)
            .await
            .is_err()
        {
            panic!("never heard `{expected}`; heard {seen:?}");
        }
        seen
    }

    /// The turn that last wrote session `session`'s conversation.
    async fn last_turn(&self, session: &str) -> String {
        let entries = self.runtime.store().conversation(session).await.unwrap();
        entries.last().unwrap().turn_id.clone()
    }
}

/// The tool results and user messages of `messages`, as `(kind, detail)` in order.
fn shape(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult {
                name,
                is_error,
                error,
                ..
            } => Some((
                format!("result {name}"),
                if *is_error {
                    format!("{error:?}")
                } else {
                    "ok".into()
                },
            )),
            Message::User { content } => Some(("user".into(), format!("{content:?}"))),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_message_interrupts_the_slow_call_and_reaches_the_model_next() {
    let mut fx = Fixture::new();
    let session = fx.session("steer").await;
    let model = ScriptedModel::new([
        Reply::call("lookup", json!({}))
            .and_call("scan", json!({}))
            .and_call("digest", json!({})),
        Reply::text("Looking at the payments logs instead."),
        Reply::text("And the digest is built."),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    let mut events = fx.runtime.subscribe();
    let running = {
        let agent = agent.clone();
        let session = session.clone();
        tokio::spawn(async move { agent.send(&session, Some(alice()), "scan the logs").await })
    };
    let mut said = fx.until("scan started").await;
    if !said.contains(&"digest started".to_owned()) {
        said.extend(fx.until("digest started").await);
    }
    assert!(said.contains(&"lookup finished".to_owned()), "{said:?}");
    let turn_id = fx.last_turn("steer").await;

    let steered = agent
        .steer(&turn_id, "only the payments service, please")
        .await
        .unwrap();
    assert_eq!(steered, Steered::Interrupted);
    fx.until("scan cancelled").await;
    // The task's body was not interrupted: it finishes once the gate opens.
    fx.probe.gate.add_permits(1);
    let said = fx.until("digest finished").await;
    assert!(!said.contains(&"digest cancelled".to_owned()), "{said:?}");

    let run = running.await.unwrap().unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );
    let requests = model.requests();
    let second = shape(&requests[1].messages);
    let kinds: Vec<&str> = second.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "user",
            "result lookup",
            "result scan",
            "result digest",
            "user"
        ],
        "the results, then the message: {second:?}"
    );
    assert_eq!(second[1].1, "ok", "a call that finished keeps its result");
    assert_eq!(second[2].1, format!("{:?}", Some(ErrorCode::Interrupted)));
    assert_eq!(second[3].1, "ok", "the task's receipt");
    assert!(
        second[4].1.contains("only the payments service"),
        "{second:?}"
    );
    assert!(
        matches!(requests[1].messages.last(), Some(Message::User { .. })),
        "the message is the last thing the model reads: {:?}",
        requests[1].messages.last()
    );

    let turn = fx.runtime.turn(&turn_id).await.unwrap();
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Completed);
    let mut saw_steered = false;
    let mut cancelled = false;
    while let Ok(event) = events.try_recv() {
        saw_steered |= matches!(
            event,
            Event::TurnSteered {
                interrupted: true,
                ..
            }
        );
        cancelled |= matches!(
            event,
            Event::TurnCompleted {
                reason: toolwright::runtime::CompletionReason::Cancelled,
                ..
            }
        );
    }
    assert!(saw_steered);
    assert!(!cancelled, "steering does not cancel the turn");

    // The turn is over: a late message is refused, not lost.
    let late = agent.steer(&turn_id, "and the auth service").await;
    assert!(
        matches!(
            late,
            Err(AgentError::Runtime(RuntimeError::TurnState {
                status: TurnStatus::Completed,
                ..
            }))
        ),
        "{late:?}"
    );
}

#[tokio::test]
async fn a_message_to_a_parked_turn_revokes_its_approvals_and_follows_the_results() {
    let fx = Fixture::new();
    let session = fx.session("parked").await;
    let model = ScriptedModel::new([
        Reply::call("lookup", json!({})).and_call("publish", json!({})),
        Reply::text("Not publishing; drafting instead."),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    let run = agent
        .send(&session, Some(alice()), "publish the post")
        .await
        .unwrap();
    let AgentOutcome::Waiting(requests) = &run.outcome else {
        panic!("the turn parks on the approval: {:?}", run.outcome);
    };
    assert_eq!(requests.len(), 1);
    let mut events = fx.runtime.subscribe();
    let steered = agent
        .steer(&run.turn_id, "don't publish, make it a draft")
        .await
        .unwrap();
    assert!(
        matches!(steered, Steered::Revoked(RespondOutcome::Resumed(_))),
        "{steered:?}"
    );
    let mut ignored = false;
    while let Ok(event) = events.try_recv() {
        ignored |= matches!(
            event,
            Event::InputResolved {
                outcome: Outcome::Ignored,
                ..
            }
        );
    }
    assert!(ignored, "the approval is revoked as `ignored`");

    let run = agent.resume(&run.turn_id).await.unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );
    let requests = model.requests();
    let second = shape(&requests[1].messages);
    let kinds: Vec<&str> = second.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        ["user", "result lookup", "result publish", "user"],
        "{second:?}"
    );
    assert_eq!(second[1].1, "ok", "the call that ran keeps its result");
    assert_eq!(second[2].1, format!("{:?}", Some(ErrorCode::Denied)));
    assert!(second[3].1.contains("make it a draft"), "{second:?}");
}
