//! A body's outcome as the model and the events see it: the output, its projection for the
//! model, the completion label, and its files stored once (see [`crate::attachments`]).

use futures_util::future::{BoxFuture, Either};
use serde_json::Value;
use toolwright_core::sensitive::{SensitivePaths, scrub};
use toolwright_core::{CallOutput, ContentPart, ModelOutput, Tool, ToolError, names};

use crate::attachments::{self, Origin};
use crate::engine::Engine;
use crate::record::CallResult;

/// The result of one execution of `tool` for call `call_id` of turn `turn_id` in session
/// `session_id`, its files stored once.
pub(crate) async fn call_result(
    engine: &Engine,
    session_id: &str,
    turn_id: &str,
    tool: &Tool,
    call_id: &str,
    outcome: Result<CallOutput, ToolError>,
) -> CallResult {
    let origin = Origin {
        session_id,
        turn_id,
        call_id,
    };
    match with_files(engine, origin, result_of(tool, call_id, outcome)) {
        Either::Left(result) => result,
        Either::Right(storing) => storing.await,
    }
}

/// `result` as it is when it holds no file ([`attachments::holds_files`]), as most do; else the
/// future that stores its files once (see [`attachments::keep`]), boxed. Not a future itself:
/// a call awaits nothing, and moves its result through nothing, when there is nothing to store.
pub(crate) fn with_files<'a>(
    engine: &'a Engine,
    origin: Origin<'a>,
    mut result: CallResult,
) -> Either<CallResult, BoxFuture<'a, CallResult>> {
    if !attachments::holds_files(&result) {
        return Either::Left(result);
    }
    Either::Right(Box::pin(async move {
        attachments::keep(engine, origin, &mut result).await;
        result
    }))
}

/// The result of one execution of `tool` for call `call_id`, before its files are stored
/// ([`with_files`]).
pub(crate) fn result_of(
    tool: &Tool,
    call_id: &str,
    outcome: Result<CallOutput, ToolError>,
) -> CallResult {
    match outcome {
        Ok(mut output) => {
            // What a published output schema marks sensitive (a remote tool's, one defined at
            // run time) is redacted before anything keeps it, and taken out of the text the
            // server wrote beside it. (A `Sensitive` field of a `#[tool]`'s output is redacted
            // as it serializes; its projection, which the tool's author wrote, is kept.)
            let paths = &tool.sensitivity().output;
            let secrets = paths.texts_in(&output.value);
            paths.redact(&mut output.value);
            // The model sees the tool's projection, or the output itself (not copied).
            let mut projection = output.model.take();
            if !secrets.is_empty() {
                let mut model =
                    projection.unwrap_or_else(|| ModelOutput::Json(output.value.clone()));
                scrub_model(&mut model, paths, &secrets);
                projection = Some(model);
            }
            let label = output.complete_label.take().or_else(|| {
                tool.label()
                    .complete
                    .then(|| names::humanize(tool.short_name()))
            });
            let mut result = CallResult {
                model_usage: None,
                call_id: call_id.to_owned(),
                tool: tool.name().to_owned(),
                is_error: false,
                output: output.value,
                projection: None,
                error: None,
                ends_turn: output.ends_turn,
                label,
            };
            // A view that is the output itself (a scrubbed one that found nothing, a tool's
            // projection to its own output) is not kept twice.
            if let Some(model) = projection {
                result.set_model(model);
            }
            result
        }
        Err(error) => CallResult::failed(call_id, tool.name(), error),
    }
}

/// Takes the sensitive values out of what the model sees: a JSON view (the structured output
/// again, as a server without text sends it) redacted by the output's paths, then every text
/// of `secrets` out of its strings, text parts and text resources.
fn scrub_model(model: &mut ModelOutput, paths: &SensitivePaths, secrets: &[String]) {
    match model {
        ModelOutput::Text(text) => *text = scrub(text, secrets),
        ModelOutput::Json(value) => {
            paths.redact(value);
            scrub_strings(value, secrets);
        }
        ModelOutput::Content(parts) => {
            for part in parts {
                match part {
                    ContentPart::Text { text }
                    | ContentPart::Resource {
                        text: Some(text), ..
                    } => *text = scrub(text, secrets),
                    _ => {}
                }
            }
        }
    }
}

fn scrub_strings(value: &mut Value, secrets: &[String]) {
    match value {
        Value::String(text) => *text = scrub(text, secrets),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_strings(v, secrets)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub_strings(v, secrets)),
        _ => {}
    }
}
