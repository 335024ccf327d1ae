//! Steering without a model loop: a host drives `Turn::step` on a task and sends a new message
//! from the user while the step's calls run. Plain, durable and `workflow = execute` calls are
//! interrupted through their real cancellation tokens; a `workflow = task` body keeps running;
//! a call that finished keeps its result; the turn goes on; another process is refused; a turn
//! between steps queues the message until the host delivers it.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use toolwright::ErrorCode;
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, Runtime, RuntimeError, SqliteStore, Steered, StepOptions, StepOutcome, TurnStatus,
};

use crate::support::{alice, builder, call, code, completed_ending, drain, turn_in};

/// What the tools tell the test: `<tool> started`, and how each body ended: `<tool> cancelled`
/// (dropped with its token fired), `<tool> dropped` (dropped otherwise) or `<tool> finished`.
#[derive(Clone)]
struct Probe {
    said: mpsc::UnboundedSender<String>,
    /// Holds `background` until the test adds a permit.
    gate: Arc<Semaphore>,
}

impl Probe {
    fn say(&self, what: String) {
        let _ = self.said.send(what);
    }
}

/// Tells the probe how a body ended when it is dropped: the runtime drops a cancelled body
/// after its token fired.
struct Ending {
    tool: &'static str,
    probe: Probe,
    cancelled: Box<dyn Fn() -> bool + Send + Sync>,
    finished: bool,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let how = if self.finished {
            "finished"
        } else if (self.cancelled)() {
            "cancelled"
        } else {
            "dropped"
        };
        self.probe.say(format!("{} {how}", self.tool));
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Nothing {}

/// Answers at once.
#[tool(effect = read)]
async fn quick(_: Nothing, probe: State<Probe>) -> Result<String, ToolError> {
    probe.say("quick finished".into());
    Ok("quick answer".into())
}

/// Gives the final answer.
#[tool(effect = read, ends_turn)]
async fn answer(_: Nothing) -> Result<String, ToolError> {
    Ok("the answer".into())
}

/// Waits for an upstream until its call is cancelled.
#[tool(effect = read)]
async fn slow(_: Nothing, ctx: ToolContext, probe: State<Probe>) -> Result<String, ToolError> {
    let watch = ctx.clone();
    let _ending = Ending {
        tool: "slow",
        probe: (*probe).clone(),
        cancelled: Box::new(move || watch.is_cancelled()),
        finished: false,
    };
    probe.say("slow started".into());
    ctx.cancelled().await;
    Err(ToolError::new("slow saw its token fire"))
}

/// Waits like `slow`, as a durable call.
#[tool(effect = write, durable)]
async fn slow_durable(
    _: Nothing,
    ctx: DurableContext,
    probe: State<Probe>,
) -> Result<String, ToolError> {
    let watch = (*ctx).clone();
    let _ending = Ending {
        tool: "slow_durable",
        probe: (*probe).clone(),
        cancelled: Box::new(move || watch.is_cancelled()),
        finished: false,
    };
    ctx.step("prepare", async { Ok(1) }).await?;
    probe.say("slow_durable started".into());
    ctx.cancelled().await;
    Err(ToolError::new("slow_durable saw its token fire"))
}

/// Waits like `slow`, as a `workflow = execute` body.
#[tool(effect = write, workflow = execute)]
async fn slow_flow(
    _: Nothing,
    ctx: WorkflowContext,
    probe: State<Probe>,
) -> Result<String, ToolError> {
    let watch = ctx.clone();
    let _ending = Ending {
        tool: "slow_flow",
        probe: (*probe).clone(),
        cancelled: Box::new(move || watch.is_cancelled()),
        finished: false,
    };
    probe.say("slow_flow started".into());
    ctx.cancelled().await;
    Err(ToolError::new("slow_flow saw its token fire"))
}

/// Works in the background until the test opens the gate.
#[tool(effect = write, workflow = task)]
async fn background(
    _: Nothing,
    ctx: WorkflowContext,
    probe: State<Probe>,
) -> Result<String, ToolError> {
    let watch = ctx.clone();
    let mut ending = Ending {
        tool: "background",
        probe: (*probe).clone(),
        cancelled: Box::new(move || watch.is_cancelled()),
        finished: false,
    };
    probe.say("background started".into());
    tokio::select! {
        permit = probe.gate.acquire() => permit.map_err(|e| ToolError::new(e.to_string()))?.forget(),
        () = ctx.cancelled() => return Err(ToolError::new("background was cancelled")),
    }
    ending.finished = true;
    Ok("background done".into())
}

fn instance(path: &std::path::Path, probe: &Probe) -> Runtime {
    builder([
        answer::TOOL,
        quick::TOOL,
        slow::TOOL,
        slow_durable::TOOL,
        slow_flow::TOOL,
        background::TOOL,
    ])
    .store(SqliteStore::open(path).unwrap())
    .state(probe.clone())
    .build()
    .unwrap()
}

fn probe() -> (Probe, mpsc::UnboundedReceiver<String>) {
    let (said, heard) = mpsc::unbounded_channel();
    let probe = Probe {
        said,
        gate: Arc::new(Semaphore::new(0)),
    };
    (probe, heard)
}

/// Receives what the tools say until `expected`, returning everything heard on the way. The
/// timeout only turns a hang into a failure; nothing waits on it.
async fn until(heard: &mut mpsc::UnboundedReceiver<String>, expected: &str) -> Vec<String> {
    let mut seen = Vec::new();
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

#[tokio::test]
async fn steering_interrupts_the_running_calls_and_the_turn_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steer.db");
    let (probe, mut heard) = probe();
    let rt = instance(&path, &probe);
    let turn = turn_in(&rt, "steer", Some(alice())).await;
    let stepping = {
        let turn = turn.clone();
        tokio::spawn(async move {
            turn.step(vec![
                call("c1", "quick", json!({})),
                call("c2", "slow", json!({})),
                call("c3", "slow_durable", json!({})),
                call("c4", "slow_flow", json!({})),
                call("c5", "background", json!({})),
            ])
            .await
        })
    };
    let mut said = Vec::new();
    for tool in ["slow", "slow_durable", "slow_flow", "background"] {
        if !said.contains(&format!("{tool} started")) {
            said.extend(until(&mut heard, &format!("{tool} started")).await);
        }
    }
    assert!(said.contains(&"quick finished".to_owned()), "{said:?}");

    // Another instance on the same store does not hold the calls' tokens: refused, and
    // nothing is recorded.
    let other = instance(&path, &probe);
    let refused = other
        .turn(turn.id())
        .await
        .unwrap()
        .steer("elsewhere")
        .await;
    assert!(
        matches!(
            &refused,
            Err(RuntimeError::TurnState {
                status: TurnStatus::Running,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("its calls run in another process")
    );

    let mut events = rt.subscribe();
    let steered = turn.steer("stop that, look at the logs").await.unwrap();
    assert_eq!(steered, Steered::Interrupted);
    let (results, ends) = completed_ending(stepping.await.unwrap().unwrap());
    assert!(!ends);
    assert!(!results[0].is_error, "a finished call keeps its result");
    assert_eq!(results[0].output, json!("quick answer"));
    for interrupted in &results[1..4] {
        assert_eq!(code(interrupted), ErrorCode::Interrupted, "{interrupted:?}");
        assert!(
            crate::support::model_text(interrupted)
                .contains("was interrupted by a new message from the user"),
            "{interrupted:?}"
        );
    }
    assert!(!results[4].is_error, "the task's receipt: {:?}", results[4]);

    // Each interrupted body saw its own token fire; the task's body runs on.
    let mut ends_heard = Vec::new();
    for tool in ["slow", "slow_durable", "slow_flow"] {
        let heard_now = until(&mut heard, &format!("{tool} cancelled")).await;
        ends_heard.extend(heard_now);
    }
    assert!(
        !ends_heard.iter().any(|s| s.starts_with("background")),
        "{ends_heard:?}"
    );
    let events = drain(&mut events);
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::TurnSteered {
                interrupted: true,
                ..
            }
        )),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::TurnCompleted { .. })),
        "the turn is not cancelled: {events:?}"
    );
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
    assert_eq!(
        turn.steering().await.unwrap(),
        ["stop that, look at the logs"]
    );

    // The task still runs, and delivers its result once the gate opens.
    assert_eq!(turn.open_tasks().await.unwrap().len(), 1);
    probe.gate.add_permits(1);
    until(&mut heard, "background finished").await;
    let delivered = turn
        .wait_task_results(Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(delivered.len(), 1, "{delivered:?}");

    // The host delivered the message: the turn may end, and then takes no more.
    assert!(turn.complete_after(1).await.unwrap().is_empty());
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Completed);
    let late = turn.steer("one more thing").await;
    assert!(
        matches!(
            late,
            Err(RuntimeError::TurnState {
                status: TurnStatus::Completed,
                ..
            })
        ),
        "{late:?}"
    );
}

#[tokio::test]
async fn a_message_between_steps_waits_for_the_host_and_keeps_the_turn_going() {
    let dir = tempfile::tempdir().unwrap();
    let (probe, _heard) = probe();
    let rt = instance(&dir.path().join("queued.db"), &probe);
    let turn = turn_in(&rt, "queued", Some(alice())).await;
    // Nothing runs: the host is asking its model.
    assert_eq!(
        turn.steer("also check prod").await.unwrap(),
        Steered::Queued
    );

    // A step that would end the turn does not while the message waits for the host.
    let outcome = turn
        .step_with(
            vec![call("c1", "answer", json!({}))],
            StepOptions::new().steering(0),
        )
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            StepOutcome::Completed {
                ends_turn: false,
                ..
            }
        ),
        "{outcome:?}"
    );

    // Ending the turn hands the message back instead.
    assert_eq!(turn.complete_after(0).await.unwrap(), ["also check prod"]);
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
    // The host delivered it with the results; the model's next answer ends the turn.
    let outcome = turn
        .step_with(
            vec![call("c2", "answer", json!({}))],
            StepOptions::new().steering(1),
        )
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            StepOutcome::Completed {
                ends_turn: true,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Completed);
    let late = turn.steer("too late").await;
    assert!(late.is_err(), "{late:?}");
    assert_eq!(turn.steering().await.unwrap(), ["also check prod"]);
}
