//! The model handle through the runtime: the runtime's model and a step's own, which wins for
//! that step's calls, and the journal of workflow bodies, whose replay returns the recorded
//! answer without asking the model again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::model::{ModelBackend, ModelReply, ModelRequest};
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, RespondOutcome, SessionSpec, StepOptions, StepOutcome, ToolCall,
};
use toolwright::{Caller, ErrorCode};

use crate::support::{alice, builder};

/// A model that answers with its name and counts what it was asked.
#[derive(Clone)]
struct Counting {
    name: &'static str,
    asked: Arc<AtomicUsize>,
}

impl Counting {
    fn new(name: &'static str) -> Self {
        Counting {
            name,
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl ModelBackend for Counting {
    fn complete(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let asked = request.messages[0].text.clone();
        let answer = json!({ "plan": format!("{} plans: {asked}", self.name) }).to_string();
        Box::pin(async move { Ok(ModelReply::new(self.name, answer)) })
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ReleaseArgs {
    version: String,
}

#[derive(Deserialize, JsonSchema)]
struct Plan {
    plan: String,
}

/// Plans a release with the model, then asks the operator to go ahead.
#[tool(effect = write, workflow = execute)]
async fn plan_release(args: ReleaseArgs, ctx: WorkflowContext) -> Result<String, ToolError> {
    let plan: Plan = ctx
        .model()
        .prompt(format!("release {}", args.version))
        .result()
        .await?;
    let go = ctx
        .ask(AskRequest::new(format!("{}. Go?", plan.plan)).option(AskOption::new("go", "Go")))
        .await?;
    Ok(format!(
        "{} ({})",
        plan.plan,
        if go.chose("go") { "going" } else { "held" }
    ))
}

#[tokio::test]
async fn a_workflows_answer_is_journaled_and_its_replay_does_not_ask_again() {
    let house = Counting::new("house");
    let runtime = builder([plan_release::TOOL])
        .model(house.clone())
        .build()
        .unwrap();
    assert!(runtime.has_model());
    let session = runtime
        .open_session(SessionSpec::new("release").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();

    // The step brings its own model (as the MCP server brings the client's): it answers.
    let client = Counting::new("client");
    let call = ToolCall::new("c1", "plan_release", r#"{"version":"2.4"}"#);
    let outcome = turn
        .step_with(vec![call], StepOptions::new().model(client.clone()))
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("expected the question: {outcome:?}")
    };
    assert_eq!(requests[0].prompt, "client plans: release 2.4. Go?");
    assert_eq!((client.asked(), house.asked()), (1, 0));

    // The answer resumes the body, which replays: the plan comes from the journal, and neither
    // model is asked again, whoever carries the answer.
    let carrier = Counting::new("carrier");
    let outcome = runtime
        .respond_with(
            InputResponse::choose(&requests[0].request_id, Some(alice()), "go"),
            StepOptions::new().model(carrier.clone()),
        )
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("expected the result: {outcome:?}")
    };
    assert_eq!(
        results[0].output,
        json!("client plans: release 2.4 (going)")
    );
    assert_eq!((client.asked(), house.asked(), carrier.asked()), (1, 0, 0));

    // Without a model of its own, a step's calls ask the runtime's.
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let call = ToolCall::new("c2", "plan_release", r#"{"version":"2.5"}"#);
    let StepOutcome::Waiting { requests, .. } = turn.step(vec![call]).await.unwrap() else {
        panic!("expected the question")
    };
    assert_eq!(requests[0].prompt, "house plans: release 2.5. Go?");
    assert_eq!(house.asked(), 1);
}

#[tokio::test]
async fn without_a_model_the_call_fails_saying_how_to_install_one() {
    let runtime = builder([plan_release::TOOL]).build().unwrap();
    assert!(!runtime.has_model());
    let session = runtime
        .open_session(SessionSpec::new("bare").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let call = ToolCall::new("c1", "plan_release", r#"{"version":"1"}"#);
    let StepOutcome::Completed { results, .. } = turn.step(vec![call]).await.unwrap() else {
        panic!("expected a result")
    };
    let error = results[0].error.as_ref().unwrap();
    assert_eq!(error.code(), ErrorCode::MissingState);
    assert!(
        error
            .message()
            .starts_with("`plan_release` asks a model, and none is available to it"),
        "{}",
        error.message()
    );
}
