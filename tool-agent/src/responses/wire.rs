//! The Responses API wire format, as OpenAI's API reference documents it ("Create a model
//! response" and "Streaming events"): the request body this adapter writes and the parts of the
//! streamed events it reads. Output items stay JSON values: the adapter reads the fields it
//! needs from them and keeps the rest as they came, so that what it renders back is what the
//! API sent. Unknown fields are ignored and optional ones default.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The request body (`POST /responses`). Every field is optional so that a
/// [`Settings::extra`](crate::Settings::extra) field of the same name can replace it.
#[derive(Serialize)]
pub(crate) struct CreateResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) instructions: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) previous_response_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) store: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) include: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f32>,
    #[serde(flatten)]
    pub(crate) extra: &'a serde_json::Map<String, Value>,
}

/// `reasoning`: `effort` and `summary` of reasoning models.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct Reasoning {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<&'static str>,
}

impl Reasoning {
    pub(crate) fn is_empty(&self) -> bool {
        self.effort.is_none() && self.summary.is_none()
    }
}

/// One streamed event (`ResponseStreamEvent`), by its `type`; the events this adapter does not
/// read are [`Event::Other`].
#[derive(Deserialize)]
#[serde(tag = "type")]
pub(crate) enum Event {
    #[serde(rename = "response.created", alias = "response.in_progress")]
    Created { response: WireResponse },
    #[serde(rename = "response.output_item.added")]
    ItemAdded { output_index: usize, item: Value },
    #[serde(rename = "response.output_item.done")]
    ItemDone { output_index: usize, item: Value },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta {
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        output_index: usize,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone {
        output_index: usize,
        arguments: String,
    },
    #[serde(rename = "response.completed")]
    Completed { response: WireResponse },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: WireResponse },
    #[serde(rename = "response.failed")]
    Failed { response: WireResponse },
    /// `ResponseErrorEvent`: `code`, `message` and `param` at the top level.
    #[serde(rename = "error")]
    /// Documented with `code` and `message` at the top; the API has also been seen sending
    /// them in a nested `error` object (`{"type":"error","error":{"code","message"}}`).
    Error {
        #[serde(default)]
        code: Option<String>,
        #[serde(default)]
        message: String,
        #[serde(default)]
        error: Option<ResponseError>,
    },
    #[serde(other)]
    Other,
}

/// The response object, as the lifecycle events carry it.
#[derive(Default, Deserialize)]
pub(crate) struct WireResponse {
    #[serde(default)]
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) model: String,
    #[serde(default)]
    pub(crate) output: Vec<Value>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<ResponseError>,
    #[serde(default)]
    pub(crate) incomplete_details: Option<IncompleteDetails>,
}

/// `ResponseError`: why a response failed.
#[derive(Deserialize)]
pub(crate) struct ResponseError {
    #[serde(default)]
    pub(crate) code: Option<String>,
    #[serde(default)]
    pub(crate) message: String,
}

/// `incomplete_details`: `max_output_tokens` or `content_filter`.
#[derive(Deserialize)]
pub(crate) struct IncompleteDetails {
    #[serde(default)]
    pub(crate) reason: Option<String>,
}

/// `ResponseUsage`: `input_tokens` counts the whole prompt, the cached tokens among them.
#[derive(Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) input_tokens: u64,
    #[serde(default)]
    pub(crate) input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    pub(crate) output_tokens: u64,
}

#[derive(Deserialize)]
pub(crate) struct InputDetails {
    #[serde(default)]
    pub(crate) cached_tokens: u64,
    #[serde(default)]
    pub(crate) cache_write_tokens: u64,
}

/// A `function_call` output item (`FunctionToolCall`).
#[derive(Deserialize)]
pub(crate) struct FunctionCall {
    pub(crate) call_id: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) arguments: String,
    #[serde(default)]
    pub(crate) status: Option<String>,
}
