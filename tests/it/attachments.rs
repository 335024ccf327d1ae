//! Files tools return are stored once per session and named by id: in results, recorded
//! turns and events only the reference, the bytes once in the store (or in the sandbox), read
//! back whole where they leave the process, left out above the size limit, and deleted with the
//! session's attachments.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::attachments::id_of;
use toolwright::runtime::{
    AttachmentPlace, CallResult, Event, Options, Runtime, SqliteStore, Turn,
};
use toolwright::sandbox::LocalSandbox;

use crate::answer_cost::store_of_an_earlier_release;
use crate::support::{alice, builder, call, completed, drain, turn_in};

/// The bytes of a small PNG-like file: not text, a NUL inside.
fn png_bytes(seed: u8) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..=255u8).map(|b| b.wrapping_add(seed)));
    bytes
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct DrawArgs {
    /// Which picture (the same seed, the same bytes).
    seed: u8,
}

/// The raw output holds the file as a file part (not a base64 string of its own): stored once
/// there too.
#[derive(Serialize)]
struct Drawing {
    title: String,
    png: ContentPart,
}

fn drawing_for_model(drawing: &Drawing) -> ModelOutput {
    ModelOutput::content([
        ContentPart::text(drawing.title.clone()),
        drawing.png.clone(),
    ])
}

/// Draws a picture and shows it to the model.
#[tool(effect = read, to_model_output = drawing_for_model)]
async fn draw(args: DrawArgs) -> Drawing {
    Drawing {
        title: format!("Picture {}", args.seed),
        png: ContentPart::file(STANDARD.encode(png_bytes(args.seed)), "image/png"),
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct NoArgs {}

/// Returns a PDF as content parts, which are its raw output too.
#[tool(effect = read, to_model_output = shown)]
async fn export_pdf(_args: NoArgs) -> ModelOutput {
    ModelOutput::content([
        ContentPart::text("The report:"),
        ContentPart::file(STANDARD.encode(b"%PDF-1.7 report"), "application/pdf"),
    ])
}

fn shown(output: &ModelOutput) -> ModelOutput {
    output.clone()
}

/// The raw output carries the picture as a plain base64 string (no file part): only what the
/// model sees holds a file.
#[derive(Serialize)]
struct Chart {
    title: String,
    png_base64: String,
}

fn chart_for_model(chart: &Chart) -> ModelOutput {
    ModelOutput::content([
        ContentPart::text(chart.title.clone()),
        ContentPart::file(chart.png_base64.clone(), "image/png"),
    ])
}

/// Draws a chart and shows it to the model.
#[tool(effect = read, to_model_output = chart_for_model)]
async fn chart(args: DrawArgs) -> Chart {
    Chart {
        title: format!("Chart {}", args.seed),
        png_base64: STANDARD.encode(png_bytes(args.seed)),
    }
}

/// The attachment parts of a result's model output: (id, media type, size, path).
fn attachments_of(result: &CallResult) -> Vec<(String, String, u64, Option<String>)> {
    let model = result.model();
    let ModelOutput::Content(parts) = &*model else {
        return Vec::new();
    };
    parts
        .iter()
        .filter_map(|part| match part {
            ContentPart::Attachment {
                id,
                media_type,
                size,
                path,
            } => Some((id.clone(), media_type.clone(), *size, path.clone())),
            _ => None,
        })
        .collect()
}

/// The file parts of `output`: (base64, media type).
fn files_of(output: &ModelOutput) -> Vec<(String, String)> {
    let ModelOutput::Content(parts) = output else {
        return Vec::new();
    };
    parts
        .iter()
        .filter_map(|part| match part {
            ContentPart::File { data, media_type } => Some((data.clone(), media_type.clone())),
            _ => None,
        })
        .collect()
}

async fn step(turn: &Turn, id: &str, tool: &str, input: Value) -> CallResult {
    let mut results = completed(turn.step(vec![call(id, tool, input)]).await.unwrap());
    results.remove(0)
}

/// How many times `needle` occurs in `haystack`.
fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle)
        .count()
}

#[tokio::test]
async fn a_returned_file_is_stored_once_and_only_its_reference_is_recorded_and_sent_in_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let rt = builder([draw::TOOL])
        .store(SqliteStore::open(&path).unwrap())
        .build()
        .unwrap();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-files", Some(alice())).await;
    let bytes = png_bytes(7);
    let base64 = STANDARD.encode(&bytes);

    let first = step(&turn, "c1", "draw", json!({ "seed": 7 })).await;
    let second = step(&turn, "c2", "draw", json!({ "seed": 7 })).await;
    let expected = (
        id_of(&bytes),
        "image/png".to_owned(),
        bytes.len() as u64,
        None,
    );
    assert_eq!(attachments_of(&first), std::slice::from_ref(&expected));
    assert_eq!(
        attachments_of(&second),
        std::slice::from_ref(&expected),
        "the same file, the same id"
    );
    assert!(
        files_of(&first.model()).is_empty(),
        "no bytes in the result"
    );
    assert_eq!(first.model().to_text(), "Picture 7\n[image/png file]");

    // Events carry the reference, never the bytes.
    for event in drain(&mut events) {
        let json = serde_json::to_string(&event).unwrap();
        assert!(
            !json.contains(&base64),
            "an event carries the bytes: {json}"
        );
    }
    // The recorded turn holds the reference.
    let recorded = turn.last_results().await.unwrap().expect("a closed step");
    assert_eq!(
        attachments_of(&recorded.results[0]),
        std::slice::from_ref(&expected)
    );

    // The session reads it back whole; the output resolves to the file it replaced.
    let session = rt.session("s-files").await.unwrap();
    let attachment = session.attachment(&expected.0).await.unwrap().unwrap();
    assert_eq!(attachment.data, bytes);
    assert_eq!(attachment.media_type, "image/png");
    assert_eq!(
        files_of(&session.resolve_attachments(&first.model()).await),
        [(base64.clone(), "image/png".to_owned())]
    );
    assert_eq!(
        files_of(&turn.resolve_attachments(&second.model()).await),
        [(base64.clone(), "image/png".to_owned())]
    );
    assert!(
        rt.attachment("another session", &expected.0)
            .await
            .unwrap()
            .is_none()
    );

    assert_eq!(
        first.output["png"],
        json!({ "type": "attachment", "id": expected.0, "mediaType": "image/png", "size": 264 }),
        "the raw output names the same attachment"
    );

    // In the file: one row, the bytes once (as bytes), the base64 nowhere.
    drop(turn);
    drop(session);
    drop(rt);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM attachments", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 1);
    let results: String = conn
        .query_row(
            "SELECT group_concat(json, '') FROM turns WHERE session_id = 's-files'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(
        results.contains(&expected.0),
        "the turn names the attachment"
    );
    assert!(
        !results.contains(r#""type":"file""#),
        "no file part is left in the recorded turn"
    );
    drop(conn);
    let file = std::fs::read(&path).unwrap();
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
    for place in [&file, &wal] {
        assert_eq!(
            occurrences(place, base64.as_bytes()),
            0,
            "the base64 is not stored"
        );
    }
    assert!(
        occurrences(&file, &bytes) + occurrences(&wal, &bytes) >= 1,
        "the bytes are stored"
    );
}

#[tokio::test]
async fn a_file_only_in_what_the_model_sees_is_stored_too() {
    let rt = builder([chart::TOOL]).build().unwrap();
    let turn = turn_in(&rt, "s-view", Some(alice())).await;
    let bytes = png_bytes(3);
    let result = step(&turn, "c1", "chart", json!({ "seed": 3 })).await;
    assert_eq!(
        attachments_of(&result),
        [(
            id_of(&bytes),
            "image/png".to_owned(),
            bytes.len() as u64,
            None
        )],
        "the file part the model sees is stored, though the raw output holds none"
    );
    assert!(files_of(&result.model()).is_empty(), "no bytes in the view");
    assert_eq!(
        result.output["png_base64"],
        json!(STANDARD.encode(&bytes)),
        "the raw output, without file parts, is left as it was"
    );
}

#[tokio::test]
async fn file_parts_in_the_raw_output_are_stored_once_too() {
    let rt = builder([export_pdf::TOOL]).build().unwrap();
    let turn = turn_in(&rt, "s-raw", Some(alice())).await;
    let result = step(&turn, "c1", "export_pdf", json!({})).await;
    let id = id_of(b"%PDF-1.7 report");
    assert_eq!(
        attachments_of(&result),
        [(id.clone(), "application/pdf".to_owned(), 15, None)]
    );
    assert_eq!(
        result.output["value"][1],
        json!({ "type": "attachment", "id": id, "mediaType": "application/pdf", "size": 15 }),
        "the raw output's file part is the same reference"
    );
    assert_eq!(
        result.output["value"][0],
        json!({ "type": "text", "text": "The report:" })
    );
}

#[tokio::test]
async fn a_file_over_the_limit_is_left_out_with_a_warning() {
    let rt = builder([draw::TOOL])
        .options(Options {
            attachment_max_bytes: 100,
            ..Options::default()
        })
        .build()
        .unwrap();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-big", Some(alice())).await;
    let result = step(&turn, "big", "draw", json!({ "seed": 1 })).await;
    assert!(
        !result.is_error,
        "the call ran: its result is kept, without the file"
    );
    assert!(attachments_of(&result).is_empty());
    let text = result.model().to_text();
    assert!(
        text.contains("left out") && text.contains("attachment_max_bytes"),
        "{text}"
    );
    let warnings: Vec<String> = drain(&mut events)
        .into_iter()
        .filter_map(|event| match event {
            Event::Warning {
                call_id, message, ..
            } if call_id.as_deref() == Some("big") => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("image/png"), "{}", warnings[0]);
}

#[tokio::test]
async fn with_a_sandbox_the_file_is_kept_there_and_deleted_with_the_session_attachments() {
    let sandbox = tempfile::tempdir().unwrap();
    let rt = builder([draw::TOOL])
        .sandbox(LocalSandbox::open(sandbox.path()).unwrap())
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-sandbox", Some(alice())).await;
    let bytes = png_bytes(3);
    let result = step(&turn, "c1", "draw", json!({ "seed": 3 })).await;
    let [(id, _, size, Some(path))] = &attachments_of(&result)[..] else {
        panic!("one attachment with a sandbox path: {:?}", result.model())
    };
    assert_eq!(*size, bytes.len() as u64);
    assert!(
        path.starts_with(".toolwright/attachments/") && path.ends_with(".png"),
        "{path}"
    );
    assert_eq!(std::fs::read(sandbox.path().join(path)).unwrap(), bytes);
    let record = rt
        .store()
        .attachment("s-sandbox", id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record.place,
        AttachmentPlace::Sandbox(path.clone()),
        "the store keeps the record, not the bytes"
    );
    let session = rt.session("s-sandbox").await.unwrap();
    assert_eq!(session.attachment(id).await.unwrap().unwrap().data, bytes);

    // Changed in the sandbox: not sent as if it were the file the tool returned.
    std::fs::write(sandbox.path().join(path), b"changed").unwrap();
    let text = session.resolve_attachments(&result.model()).await.to_text();
    assert!(text.contains("changed in the sandbox"), "{text}");
    assert!(session.attachment(id).await.is_err());

    assert_eq!(session.delete_attachments().await.unwrap(), 1);
    assert!(!sandbox.path().join(path).exists());
    assert!(
        !sandbox.path().join(path).parent().unwrap().exists(),
        "the session's directory goes with it"
    );
    assert!(session.attachment(id).await.unwrap().is_none());
    let text = session.resolve_attachments(&result.model()).await.to_text();
    assert!(text.contains("no longer available"), "{text}");
}

#[tokio::test]
async fn deleting_a_session_attachments_leaves_other_sessions_alone() {
    let rt = builder([draw::TOOL]).build().unwrap();
    let mine = turn_in(&rt, "s-mine", Some(alice())).await;
    let theirs = turn_in(&rt, "s-theirs", Some(alice())).await;
    let a = step(&mine, "c1", "draw", json!({ "seed": 5 })).await;
    let b = step(&theirs, "c1", "draw", json!({ "seed": 5 })).await;
    assert_eq!(attachments_of(&a), attachments_of(&b));
    let id = attachments_of(&a)[0].0.clone();

    let session = rt.session("s-mine").await.unwrap();
    assert_eq!(session.delete_attachments().await.unwrap(), 1);
    assert!(rt.attachment("s-mine", &id).await.unwrap().is_none());
    assert!(rt.attachment("s-theirs", &id).await.unwrap().is_some());
    assert_eq!(session.delete_attachments().await.unwrap(), 0);
}

/// A runtime whose store keeps no attachments leaves files inline, as before attachments.
#[tokio::test]
async fn a_store_without_attachments_keeps_files_inline() {
    let rt = Runtime::builder(toolwright::Registry::from_tools([draw::TOOL]).unwrap())
        .store(store_of_an_earlier_release())
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-inline", Some(alice())).await;
    let result = step(&turn, "c1", "draw", json!({ "seed": 9 })).await;
    assert!(attachments_of(&result).is_empty());
    assert_eq!(
        files_of(&result.model()),
        [(STANDARD.encode(png_bytes(9)), "image/png".to_owned())]
    );
}
