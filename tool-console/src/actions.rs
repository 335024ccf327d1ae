//! What an operator does: answer a request (approve, deny with a note, answer a question),
//! cancel a task or a turn, approve a remote tool's changed definition. Each goes through the
//! runtime's own API, so its rules hold exactly: [`Runtime::respond`]'s response policies and
//! first-answer-wins, [`Runtime::cancel_task`]'s cleanup window. The web console and a CLI
//! call these and show the [`ActionReport`].

use serde::Serialize;
use serde_json::Value;
use toolwright_core::Principal;
use toolwright_runtime::{InputResponse, RespondOutcome, Runtime, RuntimeError, StepOutcome};

/// An operator's answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// Approve the call.
    Approve,
    /// Deny (cancel) the call; the note tells the model why.
    Deny,
    /// Answer a question in the person's own words (an option's label picks that option).
    Text(String),
    /// Answer a question by choosing the option with this label.
    Choose(String),
    /// Fill in a form question's fields (a JSON object).
    Fill(Value),
}

/// What an action did, for a person and for a script.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ActionReport {
    /// Whether the action took effect (`false`: refused or dropped; nothing changed).
    pub accepted: bool,
    /// What happened, in a sentence.
    pub message: String,
    /// The turn the action concerned, when there is one.
    pub turn_id: Option<String>,
    /// The task the action concerned, when there is one.
    pub task_id: Option<String>,
    /// The results of calls that ran because of it.
    pub results: Vec<(String, bool, Value)>,
}

/// Answers request `request_id` as `principal` with `answer` and an optional `note` (it
/// reaches the model with the decision).
pub async fn respond(
    runtime: &Runtime,
    principal: &Principal,
    request_id: &str,
    answer: Answer,
    note: Option<String>,
) -> Result<ActionReport, RuntimeError> {
    let request = crate::views::find_request(runtime, request_id).await?;
    let who = Some(principal.clone());
    let mut response = match answer {
        Answer::Approve => InputResponse::approve(request_id, who),
        Answer::Deny => InputResponse::cancel(request_id, who),
        Answer::Text(text) => InputResponse::answer(request_id, who, text),
        Answer::Choose(label) => InputResponse::choose(request_id, who, label),
        Answer::Fill(fields) => InputResponse::fill(request_id, who, fields),
    };
    if let Some(note) = note.filter(|n| !n.trim().is_empty()) {
        response = response.note(note);
    }
    let outcome = runtime.respond(response).await?;
    let mut report = ActionReport {
        accepted: true,
        message: String::new(),
        turn_id: Some(request.turn_id.clone()),
        task_id: request.task_id.clone(),
        results: Vec::new(),
    };
    match outcome {
        RespondOutcome::Rejected { reason } => {
            report.accepted = false;
            report.message = format!("Not accepted: {reason}. The request stays pending.");
        }
        RespondOutcome::Dropped => {
            report.accepted = false;
            report.message = "The request was already settled (the first answer wins); \
                              this answer was dropped and nothing ran."
                .into();
        }
        RespondOutcome::Settled { pending } => {
            report.message = format!(
                "Recorded. The step waits for {} more request(s) before it resumes.",
                pending.len()
            );
        }
        RespondOutcome::TaskResumed { task_id } => {
            report.message = format!("Recorded. Task {task_id} runs again with the answer.");
            report.task_id = Some(task_id);
        }
        RespondOutcome::Resumed(step) => {
            report.message = resumed(&step, &mut report.results);
        }
    }
    Ok(report)
}

/// A sentence for the step an answer resumed, with its results collected.
fn resumed(step: &StepOutcome, results: &mut Vec<(String, bool, Value)>) -> String {
    match step {
        StepOutcome::Completed { results: done, .. } => {
            results.extend(
                done.iter()
                    .map(|r| (r.tool.clone(), r.is_error, r.output.clone())),
            );
            let ran: Vec<String> = done
                .iter()
                .map(|r| {
                    let how = if r.is_error { "failed" } else { "ran" };
                    format!("{} {how}", r.tool)
                })
                .collect();
            if ran.is_empty() {
                "Recorded. The turn resumed.".into()
            } else {
                format!("Recorded. The turn resumed: {}.", ran.join(", "))
            }
        }
        StepOutcome::Waiting { requests, .. } => format!(
            "Recorded. The turn resumed and now waits on {} new request(s).",
            requests.len()
        ),
    }
}

/// Cancels task `id`: its body gets the runtime's cleanup window; its questions are revoked.
pub async fn cancel_task(runtime: &Runtime, id: &str) -> Result<ActionReport, RuntimeError> {
    let task = runtime.task(id).await?;
    if task.status.is_over() {
        return Ok(ActionReport {
            accepted: false,
            message: format!(
                "Task {id} already ended ({}); nothing to cancel.",
                task.status.describe()
            ),
            turn_id: Some(task.turn_id),
            task_id: Some(task.id),
            results: Vec::new(),
        });
    }
    let after = runtime.cancel_task(id).await?;
    Ok(ActionReport {
        accepted: true,
        message: format!(
            "Task {id} was cancelled; after its cleanup window it is {}.",
            after.status.describe()
        ),
        turn_id: Some(after.turn_id),
        task_id: Some(after.id),
        results: Vec::new(),
    })
}

/// Cancels turn `id`: running calls see their token fire, pending requests are revoked and the
/// tasks it started are cancelled.
pub async fn cancel_turn(runtime: &Runtime, id: &str) -> Result<ActionReport, RuntimeError> {
    let turn = runtime.turn(id).await?;
    turn.cancel().await?;
    Ok(ActionReport {
        accepted: true,
        message: format!("Turn {id} was cancelled; its pending requests were revoked."),
        turn_id: Some(id.to_owned()),
        task_id: None,
        results: Vec::new(),
    })
}

/// Approves the definition the server of withheld tool `name` lists now, as `principal`.
pub async fn approve_definition(
    runtime: &Runtime,
    principal: &Principal,
    name: &str,
) -> Result<ActionReport, RuntimeError> {
    let approved = runtime
        .approve_definition(name, Some(principal.clone()))
        .await?;
    Ok(ActionReport {
        accepted: approved,
        message: if approved {
            format!("The definition of {name} was approved; the tool is listed again.")
        } else {
            format!("{name} is not withheld (any more); nothing was approved.")
        },
        turn_id: None,
        task_id: None,
        results: Vec::new(),
    })
}
