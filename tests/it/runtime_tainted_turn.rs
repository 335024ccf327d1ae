//! `Session::begin_tainted_turn`: a turn that starts tainted, for hosts (the MCP server) whose
//! taint must outlive the turn it was noted in.

use serde_json::json;
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::runtime::{InputResponse, SessionSpec};

use crate::support::{alice, call, completed, resumed, runtime, waiting};

/// Writes a note.
#[tool(effect = write)]
async fn jot(_: NoInput) -> String {
    "jotted".into()
}

/// Reads the weather.
#[tool(effect = read)]
async fn weather(_: NoInput) -> String {
    "sunny".into()
}

#[tokio::test]
async fn a_turn_begun_tainted_asks_before_writes_and_names_its_source_until_it_ends() {
    let rt = runtime([jot::TOOL, weather::TOOL]);
    let session = rt
        .open_session(SessionSpec::new("s-tainted").initiator(alice()))
        .await
        .unwrap();

    // Untainted, the write runs at once.
    let clean = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    assert_eq!(clean.record().await.unwrap().tainted_by, None);
    let results = completed(
        clean
            .step(vec![call("c0", "jot", json!({}))])
            .await
            .unwrap(),
    );
    assert_eq!(results[0].output, json!("jotted"));

    // Begun tainted: the record says so, reads still run, the write asks and names the source.
    let turn = session
        .begin_tainted_turn(Some(alice()), Caller::Model, "web.fetch")
        .await
        .unwrap();
    assert_eq!(
        turn.record().await.unwrap().tainted_by.as_deref(),
        Some("web.fetch")
    );
    let read = completed(
        turn.step(vec![call("c1", "weather", json!({}))])
            .await
            .unwrap(),
    );
    assert_eq!(read[0].output, json!("sunny"));
    let (_, requests) = waiting(turn.step(vec![call("c2", "jot", json!({}))]).await.unwrap());
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .reasons
            .iter()
            .any(|r| r.contains("`web.fetch`")),
        "{:?}",
        requests[0].reasons
    );

    // Approving the call runs it and does not clear the taint: the next write asks again.
    let ran = resumed(
        rt.respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap(),
    );
    assert_eq!(ran[0].output, json!("jotted"));
    assert_eq!(
        turn.record().await.unwrap().tainted_by.as_deref(),
        Some("web.fetch")
    );
    let (_, again) = waiting(turn.step(vec![call("c3", "jot", json!({}))]).await.unwrap());
    assert_eq!(again.len(), 1);
}
