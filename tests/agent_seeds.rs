//! The model loop over the seeds' tools (`examples/seed`), driven by a scripted model: an
//! approval that parks the turn and resumes it in a fresh runtime on the same SQLite file, a
//! tool that ends the turn, and a deferred tool found through `tool_search`, then called.

use std::path::Path;

use serde_json::json;
use toolwright::Principal;
use toolwright::agent::{Agent, AgentOutcome, Message, Reply, ScriptedModel};
use toolwright::prelude::*;
use toolwright::runtime::{InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore};

#[path = "../examples/seed/mod.rs"]
#[allow(dead_code)] // reason: the loop drives a few seed tools, not every helper of the fakes
mod seed;

use seed::ops::OpsBackend;
use seed::release::Releases;
use seed::treehole::Treehole;
use seed::wallet::Wallet;

fn runtime_on(path: &Path) -> Runtime {
    Runtime::builder(Registry::collect().expect("the seed tools collect"))
        .store(SqliteStore::open(path).expect("the store opens"))
        .state(OpsBackend::default())
        .state(Releases::default())
        .state(Treehole::default())
        .state(Wallet::default())
        .build()
        .expect("every state the seed tools need is registered")
}

fn alice() -> Principal {
    Principal::user("oidc", "alice")
}

/// The results the model was shown in its last request.
fn last_results(model: &ScriptedModel) -> Vec<(String, String, bool)> {
    let requests = model.requests();
    let last = requests.last().expect("the model was asked");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult {
                name,
                output,
                is_error,
                ..
            } => Some((name.clone(), output.to_text(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_approval_parks_the_turn_and_a_fresh_runtime_resumes_it_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");

    // The first process: the model calls `restart_service`, which asks; the turn parks.
    let (turn_id, request_id) = {
        let runtime = runtime_on(&path);
        let session = runtime
            .open_session(SessionSpec::new("ops-1").initiator(alice()))
            .await
            .unwrap();
        let model = ScriptedModel::new([Reply::call(
            "restart_service",
            json!({ "service": "payment-api", "reason": "p99 latency doubled since the deploy" }),
        )
        .saying("I'll restart it.")]);
        let agent = Agent::new(runtime.clone(), model.clone()).instructions("You run ops.");
        let run = agent
            .send(&session, Some(alice()), "payment-api is slow, restart it")
            .await
            .unwrap();
        let AgentOutcome::Waiting(requests) = run.outcome else {
            panic!("the restart asks first: {:?}", run.outcome);
        };
        assert_eq!(requests.len(), 1);
        assert!(
            requests[0].prompt.starts_with("Restart payment-api?"),
            "{requests:?}"
        );
        let first = &model.requests()[0];
        assert!(
            first
                .instructions
                .as_deref()
                .unwrap()
                .starts_with("You run ops.")
        );
        assert!(first.tools.json().contains("restart_service"));
        // Asking again before anyone answered gives the same requests back.
        let again = agent.resume(&run.turn_id).await.unwrap();
        assert_eq!(again.outcome, AgentOutcome::Waiting(requests.clone()));
        (run.turn_id, requests[0].request_id.clone())
    };

    // Another runtime on the same file: the approval runs the call; the agent resumes the turn
    // with nothing replayed by the caller.
    let runtime = runtime_on(&path);
    let outcome = runtime
        .respond(InputResponse::approve(&request_id, Some(alice())).note("go ahead"))
        .await
        .unwrap();
    assert!(matches!(outcome, RespondOutcome::Resumed(_)), "{outcome:?}");
    let model = ScriptedModel::new([Reply::text("Restarted payment-api.")]);
    let agent = Agent::new(runtime.clone(), model.clone());
    let run = agent.resume(&turn_id).await.unwrap();
    assert_eq!(run.turn_id, turn_id);
    let AgentOutcome::Answered(response) = run.outcome else {
        panic!("the model answers after the restart: {:?}", run.outcome);
    };
    assert_eq!(response.message.text, "Restarted payment-api.");

    let request = &model.requests()[0];
    assert_eq!(
        request.messages[0],
        Message::user("payment-api is slow, restart it"),
        "the conversation came from the store"
    );
    let results = last_results(&model);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "restart_service");
    assert!(!results[0].2, "{results:?}");
    assert!(
        results[0].1.contains("Note from the approver: go ahead"),
        "{results:?}"
    );

    // The turn is over and its conversation is stored, one row per message.
    let stored = runtime.store().conversation("ops-1").await.unwrap();
    assert_eq!(
        stored.len(),
        4,
        "user, assistant with the call, result, answer"
    );
    assert!(stored.iter().all(|e| e.turn_id == turn_id));
    assert!(
        agent.resume(&turn_id).await.is_err(),
        "a completed turn has nothing left to run"
    );
}

#[tokio::test]
async fn a_tool_that_ends_the_turn_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));
    let session = runtime
        .open_session(SessionSpec::new("chat-1"))
        .await
        .unwrap();
    let model = ScriptedModel::new([Reply::call("react", json!({ "emoji": "👍" }))]);
    let agent = Agent::new(runtime.clone(), model.clone());
    let run = agent
        .send(&session, Some(alice()), "thanks!")
        .await
        .unwrap();
    let AgentOutcome::Ended(results) = run.outcome else {
        panic!("react ends the turn: {:?}", run.outcome);
    };
    assert_eq!(results[0].tool, "react");
    assert_eq!(model.remaining(), 0);
    assert_eq!(
        model.requests().len(),
        1,
        "no request after the ending tool"
    );
    // The tool's description tells the model that calling it ends the turn.
    assert!(
        model.requests()[0]
            .tools
            .json()
            .contains("Calling this tool ends your turn.")
    );
}

#[tokio::test]
async fn a_deferred_tool_is_found_through_tool_search_and_then_called() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));
    let session = runtime
        .open_session(SessionSpec::new("reports-1"))
        .await
        .unwrap();
    let model = ScriptedModel::new([
        Reply::call("tool_search", json!({ "query": "export a report as pdf" })),
        Reply::call("export_report", json!({ "report_id": "rpt_storefront" })),
        Reply::text("Exported to reports/rpt_storefront.pdf."),
    ]);
    let agent = Agent::new(runtime.clone(), model.clone());
    let first_list = {
        let run = agent
            .send(
                &session,
                Some(alice()),
                "export the storefront report as PDF",
            )
            .await
            .unwrap();
        assert!(
            matches!(run.outcome, AgentOutcome::Answered(_)),
            "{:?}",
            run.outcome
        );
        model.requests()[0].tools.json().to_owned()
    };
    assert!(
        !first_list.contains("\"export_report\""),
        "deferred tools are not listed"
    );
    let requests = model.requests();
    let found = requests[1]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult { name, output, .. } if name == "tool_search" => Some(output),
            _ => None,
        })
        .expect("the search result reached the model");
    assert!(found.to_text().contains("export_report"), "{found:?}");
    let results = last_results(&model);
    let (name, text, is_error) = &results[1];
    assert_eq!(name, "export_report");
    assert!(
        !is_error && text.contains("rpt_storefront.pdf"),
        "{results:?}"
    );
}
