//! The Chat Completions wire format, as OpenAI's API reference documents it ("Create chat
//! completion" and "The chat completion chunk object"): the request body this adapter writes
//! and the parts of the streamed chunks it reads. Unknown fields are ignored and optional ones
//! default, so OpenAI-compatible servers that send less (or more) still parse.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The request body (`POST /chat/completions`).
#[derive(Serialize)]
pub(crate) struct ChatRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) messages: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parallel_tool_calls: Option<bool>,
    pub(crate) stream: bool,
    pub(crate) stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub(crate) stop: &'a [String],
    #[serde(flatten)]
    pub(crate) extra: &'a Map<String, Value>,
}

/// `stream_options`: `include_usage` asks for a last chunk with the request's usage.
#[derive(Serialize)]
pub(crate) struct StreamOptions {
    pub(crate) include_usage: bool,
}

/// One streamed chunk (`chat.completion.chunk`), or an error a server sends inside the stream.
#[derive(Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) model: String,
    #[serde(default)]
    pub(crate) choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<crate::http::WireError>,
}

#[derive(Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub(crate) index: u32,
    #[serde(default)]
    pub(crate) delta: Delta,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Default, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) refusal: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Vec<ToolCallChunk>,
}

/// `ChatCompletionMessageToolCallChunk`: `index` is required; `id`, `type` and the function's
/// `name` come with a call's first chunk, `arguments` in pieces after it.
#[derive(Deserialize)]
pub(crate) struct ToolCallChunk {
    pub(crate) index: usize,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<FunctionChunk>,
}

#[derive(Deserialize)]
pub(crate) struct FunctionChunk {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
}

/// `CompletionUsage`.
#[derive(Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) prompt_tokens: u64,
    #[serde(default)]
    pub(crate) completion_tokens: u64,
    #[serde(default)]
    pub(crate) prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default)]
    pub(crate) cached_tokens: u64,
}
