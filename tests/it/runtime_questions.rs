//! `ask_question`: the model asks, the turn parks on a question, an answer (an option, free
//! text, or a plain message) resumes it.

use serde_json::json;
use toolwright::registry::ask_question;
use toolwright::runtime::{
    Event, InputResponse, RequestKind, RespondOutcome, Runtime, SessionSpec, StepOutcome, ToolCall,
};
use toolwright::{Caller, ErrorCode, Principal};

use crate::support::{self, alice, turn_in};

fn runtime() -> Runtime {
    support::runtime([ask_question()])
}

const QUESTION: &str = r#"{"question":"Deploy to which environment?","options":[{"label":"preview","description":"Safe to try"},{"label":"production","description":"Live users"}]}"#;

async fn parked(runtime: &Runtime, session: &str) -> (toolwright::runtime::Turn, String) {
    let turn = turn_in(runtime, session, Some(alice())).await;
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("q1", "ask_question", QUESTION)])
        .await
        .unwrap()
    else {
        panic!("expected waiting")
    };
    assert_eq!(requests[0].kind, RequestKind::Question);
    assert_eq!(requests[0].prompt, "Deploy to which environment?");
    (turn, requests[0].request_id.clone())
}

fn answer_of(outcome: RespondOutcome) -> serde_json::Value {
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("expected resumed: {outcome:?}")
    };
    assert!(!results[0].is_error, "{results:?}");
    results[0].output.clone()
}

#[tokio::test]
async fn choosing_an_option_answers_with_its_label() {
    let runtime = runtime();
    let mut events = runtime.subscribe();
    let (_turn, request) = parked(&runtime, "choose").await;
    let outcome = runtime
        .respond(InputResponse::choose(&request, Some(alice()), "production"))
        .await
        .unwrap();
    assert_eq!(
        answer_of(outcome),
        json!({ "status": "answered", "answer": "production" })
    );
    let mut kinds = Vec::new();
    while let Ok(event) = events.try_recv() {
        kinds.push(
            serde_json::to_value(&event).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        let _: Event = event;
    }
    assert!(kinds.contains(&"input.requested".to_owned()));
    assert!(kinds.contains(&"input.resolved".to_owned()));
    assert!(
        !kinds.iter().any(|k| k.starts_with("approval.")),
        "{kinds:?}"
    );
}

#[tokio::test]
async fn a_plain_message_answers_the_first_unanswered_question() {
    let runtime = runtime();
    let (turn, _) = parked(&runtime, "message").await;
    let outcome = turn
        .message("preview first, then production tomorrow")
        .await
        .unwrap();
    assert_eq!(
        answer_of(outcome),
        json!({ "status": "answered", "answer": "preview first, then production tomorrow" })
    );
}

#[tokio::test]
async fn an_unknown_option_keeps_the_question_pending() {
    let runtime = runtime();
    let (_turn, request) = parked(&runtime, "unknown-option").await;
    let rejected = runtime
        .respond(InputResponse::choose(&request, Some(alice()), "staging"))
        .await
        .unwrap();
    let RespondOutcome::Rejected { reason } = rejected else {
        panic!("{rejected:?}")
    };
    assert!(
        reason.contains("preview") && reason.contains("production"),
        "{reason}"
    );
    // Another person may not answer Alice's question; Alice still can.
    let bob = runtime
        .respond(InputResponse::answer(
            &request,
            Some(Principal::user("oidc", "bob")),
            "production",
        ))
        .await
        .unwrap();
    assert!(matches!(bob, RespondOutcome::Rejected { .. }));
    let outcome = runtime
        .respond(InputResponse::answer(&request, Some(alice()), "production"))
        .await
        .unwrap();
    assert_eq!(answer_of(outcome)["answer"], "production");
}

#[tokio::test]
async fn a_cancelled_question_says_so() {
    let runtime = runtime();
    let (_turn, request) = parked(&runtime, "cancel").await;
    let outcome = runtime
        .respond(InputResponse::cancel(&request, Some(alice())))
        .await
        .unwrap();
    assert_eq!(answer_of(outcome), json!({ "status": "cancelled" }));
}

#[tokio::test]
async fn nobody_to_ask_means_unavailable_at_once() {
    let runtime = runtime();
    let session = runtime
        .open_session(SessionSpec::new("schedule").non_interactive())
        .await
        .unwrap();
    let turn = session.begin_turn(None, Caller::Schedule).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![ToolCall::new("q1", "ask_question", QUESTION)])
        .await
        .unwrap()
    else {
        panic!("expected completed")
    };
    assert_eq!(results[0].output, json!({ "status": "unavailable" }));
}

#[tokio::test]
async fn options_are_checked_like_any_input() {
    let runtime = runtime();
    let session = runtime.open_session(SessionSpec::new("bad")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let four = json!({
        "question": "Pick",
        "options": [
            { "label": "a", "description": "" }, { "label": "b", "description": "" },
            { "label": "c", "description": "" }, { "label": "d", "description": "" }
        ]
    });
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![ToolCall::new("q1", "ask_question", four.to_string())])
        .await
        .unwrap()
    else {
        panic!("expected completed")
    };
    let error = results[0].error.as_ref().unwrap();
    assert_eq!(error.code(), ErrorCode::InvalidInput);
    assert!(error.message().contains("/options"), "{}", error.message());
}
