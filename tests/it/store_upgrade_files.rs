//! Upgrades keep working across the release that stores returned files once (issue 26's
//! attachments): a SQLite store file written by the release before it, where files are inline
//! base64 in every stored result (committed as `tests/fixtures/store-inline-files.db`, see
//! `tests/fixtures/README.md`), opens with this build, its parked turn resumes, and the files it
//! recorded still reach the model.
//!
//! The file holds session `files`, opened by alice: a completed turn whose `render_chart` call
//! returned a PNG to the model, and a turn whose step completed another `render_chart` call and
//! parked on alice's approval of `publish_chart`.

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, completed, resumed, waiting};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-inline-files.db"
);

/// A 1×1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

static PUBLISHED: AtomicUsize = AtomicUsize::new(0);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ChartArgs {
    /// The metric to chart.
    metric: String,
}

#[derive(Serialize)]
struct Chart {
    metric: String,
    png: String,
}

fn chart_for_model(chart: &Chart) -> ModelOutput {
    ModelOutput::content([
        ContentPart::text(format!("Chart of {}:", chart.metric)),
        ContentPart::file(chart.png.clone(), "image/png"),
    ])
}

/// Renders a chart of one metric as a PNG.
#[tool(effect = read, to_model_output = chart_for_model)]
async fn render_chart(args: ChartArgs) -> Chart {
    Chart {
        metric: args.metric,
        png: PNG.to_owned(),
    }
}

/// Publishes the last chart to the team's channel.
#[tool(effect = public, approval = always)]
async fn publish_chart(args: ChartArgs) -> String {
    PUBLISHED.fetch_add(1, Ordering::SeqCst);
    format!("published {}", args.metric)
}

fn registry() -> Registry {
    Registry::from_tools([render_chart::TOOL, publish_chart::TOOL]).unwrap()
}

/// The file part of a chart's model output.
fn file_of(model: &ModelOutput) -> Option<(String, String)> {
    let ModelOutput::Content(parts) = model else {
        return None;
    };
    parts.iter().find_map(|part| match part {
        ContentPart::File { data, media_type } => Some((data.clone(), media_type.clone())),
        _ => None,
    })
}

/// Writes the fixture with the toolwright this test is built with. Run it only on the commit
/// named in `tests/fixtures/README.md` (the last one before files were stored once):
/// `cargo test --workspace --locked --all-features --test it store_upgrade_files::write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-inline-files.db; see tests/fixtures/README.md"]
async fn write_the_inline_files_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let runtime = Runtime::builder(registry())
            .store(SqliteStore::open(&path).unwrap())
            .build()
            .unwrap();
        let session = runtime
            .open_session(SessionSpec::new("files").initiator(alice()))
            .await
            .unwrap();
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let results = completed(
            turn.step(vec![call(
                "c1",
                "render_chart",
                json!({ "metric": "latency" }),
            )])
            .await
            .unwrap(),
        );
        assert_eq!(
            file_of(&results[0].model()),
            Some((PNG.to_owned(), "image/png".to_owned()))
        );
        turn.complete().await.unwrap();

        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let (results, requests) = waiting(
            turn.step(vec![
                call("c2", "render_chart", json!({ "metric": "errors" })),
                call("c3", "publish_chart", json!({ "metric": "errors" })),
            ])
            .await
            .unwrap(),
        );
        assert_eq!(requests.len(), 1);
        assert!(file_of(&results[0].model()).is_some(), "{results:?}");
    }
    // Leave one file in rollback mode, the log folded into it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    std::fs::copy(&path, FIXTURE).unwrap();
}

/// A copy of the fixture, opened (and migrated) by this build.
fn upgraded() -> (tempfile::TempDir, Runtime) {
    crate::support::upgraded(FIXTURE, registry())
}

#[tokio::test]
async fn a_turn_parked_with_inline_files_resumes_and_its_files_still_reach_the_model() {
    let (_dir, runtime) = upgraded();
    let waiting_turns = runtime.waiting_turns().await.unwrap();
    assert_eq!(waiting_turns.len(), 1);
    let turn = runtime.turn(&waiting_turns[0]).await.unwrap();
    let step = turn.record().await.unwrap().pending.expect("a parked step");
    let request = step
        .requests
        .iter()
        .find(|r| r.is_pending())
        .cloned()
        .unwrap();
    assert_eq!(request.tool.as_deref(), Some("publish_chart"));

    let published = PUBLISHED.load(Ordering::SeqCst);
    let answer = InputResponse::approve(&request.request_id, Some(alice()));
    let results = resumed(runtime.respond(answer.clone()).await.unwrap());
    assert_eq!(PUBLISHED.load(Ordering::SeqCst), published + 1);
    let chart = results.iter().find(|r| r.call_id == "c2").unwrap();
    assert_eq!(
        file_of(&chart.model()),
        Some((PNG.to_owned(), "image/png".to_owned())),
        "a file recorded inline before the upgrade still reaches the model"
    );
    let publish = results.iter().find(|r| r.call_id == "c3").unwrap();
    assert_eq!(publish.output, json!("published errors"));
    assert!(matches!(
        runtime.respond(answer).await.unwrap(),
        RespondOutcome::Dropped
    ));
}

#[tokio::test]
async fn after_the_upgrade_a_returned_file_is_stored_once_beside_the_inline_ones() {
    let (_dir, runtime) = upgraded();
    let session = runtime.session("files").await.unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let results = completed(
        turn.step(vec![call(
            "c4",
            "render_chart",
            json!({ "metric": "load" }),
        )])
        .await
        .unwrap(),
    );
    let model = results[0].model();
    let ModelOutput::Content(parts) = &*model else {
        panic!("content parts: {:?}", results[0].model())
    };
    assert!(
        matches!(&parts[1], ContentPart::Attachment { media_type, .. } if media_type == "image/png"),
        "a file returned after the upgrade is an attachment: {parts:?}"
    );
    let resolved = session.resolve_attachments(&results[0].model()).await;
    assert_eq!(
        file_of(&resolved),
        Some((PNG.to_owned(), "image/png".to_owned()))
    );
}
