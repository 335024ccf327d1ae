//! Conversions from toolwright's results and errors to MCP's.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelTaskParams, ContentBlock, CustomRequest,
    ErrorCode, GetTaskParams, PaginatedRequestParams, ResourceContents, UpdateTaskParams,
};
use serde_json::Value;
use toolwright_core::{ContentPart, ModelOutput};
use toolwright_runtime::attachments::id_of;
use toolwright_runtime::{CallResult, RuntimeError};

use crate::McpServer;

impl McpServer {
    /// A toolwright result of a call in session `session_id` as an MCP `CallToolResult`, its
    /// attachments read back as the blocks of the files they replaced.
    pub(crate) async fn to_mcp(&self, session_id: &str, result: &CallResult) -> CallToolResult {
        // Only a projection can hold attachments; the output itself is read as it is.
        let model = match &result.projection {
            Some(projection) => Cow::Owned(
                self.runtime()
                    .resolve_attachments(session_id, projection)
                    .await,
            ),
            None => result.model(),
        };
        let content = content_of(&model);
        if result.is_error {
            return CallToolResult::error(content);
        }
        let listing = self.listing();
        let has_output_schema = listing
            .tool(&result.tool)
            .is_some_and(|tool| tool.output_schema.is_some());
        let mut mcp = CallToolResult::success(content);
        if has_output_schema && result.output.is_object() {
            mcp.structured_content = Some(result.output.clone());
        }
        mcp
    }
}

/// The error for a request rmcp could not parse as any method it knows: `-32602` with what is
/// wrong when the method is one this server serves (so its params are malformed), `-32601`
/// otherwise.
pub(crate) fn unknown_or_malformed(request: CustomRequest) -> ErrorData {
    let CustomRequest { method, params, .. } = request;
    let params = params.unwrap_or(Value::Null);
    let problem = match method.as_str() {
        "tools/call" => match params.get("arguments") {
            Some(arguments) if !arguments.is_object() && !arguments.is_null() => Some(format!(
                "`arguments` must be a JSON object of the tool's input fields, not {}",
                kind(arguments)
            )),
            _ => parse_error::<CallToolRequestParams>(params),
        },
        "tools/list" => parse_error::<PaginatedRequestParams>(params),
        "tasks/get" => parse_error::<GetTaskParams>(params),
        "tasks/update" => parse_error::<UpdateTaskParams>(params),
        "tasks/cancel" => parse_error::<CancelTaskParams>(params),
        _ => return ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method, None),
    };
    let problem = problem.unwrap_or_else(|| "they do not fit the method".to_owned());
    ErrorData::invalid_params(
        format!(
            "the params of `{method}` are malformed: {problem}; see the MCP schema for `{method}`"
        ),
        None,
    )
}

/// Why `params` do not parse as `T` (`None` when they do).
fn parse_error<T: serde::de::DeserializeOwned>(params: Value) -> Option<String> {
    serde_json::from_value::<T>(params)
        .err()
        .map(|e| e.to_string())
}

/// What kind of JSON value `value` is, for a message.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn internal(error: RuntimeError) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}

pub(crate) fn first(
    results: Vec<Arc<CallResult>>,
    call_id: &str,
) -> Result<Arc<CallResult>, ErrorData> {
    results
        .into_iter()
        .find(|r| r.call_id == call_id)
        .ok_or_else(|| ErrorData::internal_error("the step returned no result for the call", None))
}

fn content_of(model: &ModelOutput) -> Vec<ContentBlock> {
    match model {
        ModelOutput::Text(text) => vec![ContentBlock::text(text.clone())],
        // A string is its text, not a quoted JSON string.
        ModelOutput::Json(Value::String(text)) => vec![ContentBlock::text(text.clone())],
        ModelOutput::Json(value) => vec![ContentBlock::text(value.to_string())],
        ModelOutput::Content(parts) => parts.iter().map(block_of).collect(),
    }
}

/// One content part as an MCP content block: images and audio as their blocks, embedded
/// resources as `resource` blocks, other files as embedded binary resources named by their
/// attachment id (MCP has no block for them).
fn block_of(part: &ContentPart) -> ContentBlock {
    match part {
        ContentPart::Text { text } => ContentBlock::text(text.clone()),
        ContentPart::File { data, media_type } if media_type.starts_with("image/") => {
            ContentBlock::image(data.clone(), media_type.clone())
        }
        ContentPart::File { data, media_type } if media_type.starts_with("audio/") => {
            ContentBlock::audio(data.clone(), media_type.clone())
        }
        ContentPart::File { data, media_type } => match STANDARD.decode(data.as_bytes()) {
            Ok(bytes) => ContentBlock::resource(ResourceContents::BlobResourceContents {
                uri: format!("attachment:{}", id_of(&bytes)),
                mime_type: Some(media_type.clone()),
                blob: data.clone(),
                meta: None,
            }),
            Err(_) => ContentBlock::text(format!("[a {media_type} file]")),
        },
        // Never left after resolving (one that cannot be read becomes text); named if it is.
        ContentPart::Attachment { media_type, .. } => {
            ContentBlock::text(format!("[a {media_type} file]"))
        }
        ContentPart::Resource {
            uri,
            media_type,
            text,
            data,
        } => ContentBlock::resource(match (text, data) {
            (_, Some(blob)) => ResourceContents::BlobResourceContents {
                uri: uri.clone(),
                mime_type: media_type.clone(),
                blob: blob.clone(),
                meta: None,
            },
            (text, None) => ResourceContents::TextResourceContents {
                uri: uri.clone(),
                mime_type: media_type.clone(),
                text: text.clone().unwrap_or_default(),
                meta: None,
            },
        }),
    }
}
