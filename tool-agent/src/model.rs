//! The [`Model`] trait: one request answered as a stream of events ending in a response.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolwright_core::Format;

use crate::message::{AssistantMessage, Message, Usage};

/// A model the loop talks to: one [`Request`] answered as a stream of [`StreamEvent`]s whose
/// last item is [`StreamEvent::Completed`] with the whole [`Response`].
///
/// Adapters speak one provider's wire format ([`ChatCompletions`](crate::ChatCompletions));
/// [`ScriptedModel`](crate::ScriptedModel) answers from a script, for tests.
pub trait Model: Send + Sync + 'static {
    /// The registry export this model takes its tool definitions in (the loop asks the turn
    /// for that list: [`Turn::tool_list`](toolwright_runtime::Turn::tool_list)).
    fn tool_format(&self) -> Format;

    /// The provider, as the OpenTelemetry GenAI conventions name it (`gen_ai.provider.name`:
    /// `"openai"`, `"anthropic"`, ...), for the span of each request.
    fn provider(&self) -> &str {
        "unknown"
    }

    /// The model requests go to (`gen_ai.request.model`), when the adapter names one.
    fn model_name(&self) -> &str {
        ""
    }

    /// Sends `request`. The future fails when the request cannot be made or is refused (an
    /// HTTP error); the stream fails when the answer breaks off or cannot be read.
    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>>;
}

impl fmt::Debug for dyn Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Model")
    }
}

/// The events of one response, ending with [`StreamEvent::Completed`].
pub type ResponseStream = BoxStream<'static, Result<StreamEvent, ModelError>>;

/// Sends `request` to `model` and waits for the whole response, ignoring the events before it.
pub async fn complete(model: &dyn Model, request: Request) -> Result<Response, ModelError> {
    let mut stream = model.stream(request).await?;
    while let Some(event) = stream.next().await {
        if let StreamEvent::Completed(response) = event? {
            return Ok(response);
        }
    }
    Err(ModelError::Protocol(
        "the response ended before it completed".into(),
    ))
}

/// One request to a model.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Request {
    /// The system prompt.
    pub instructions: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tool definitions, in the model's [`Model::tool_format`].
    pub tools: ToolDefinitions,
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
    /// Sampling and length settings.
    pub settings: Settings,
}

impl Request {
    /// A request with `messages` and nothing else.
    pub fn new(messages: Vec<Message>) -> Self {
        Request {
            messages,
            ..Self::default()
        }
    }

    /// `self` with a system prompt.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// `self` with `settings`.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// `self` offering `tools`.
    pub fn tools(mut self, tools: ToolDefinitions) -> Self {
        self.tools = tools;
        self
    }
}

/// Tool definitions as a JSON array in one provider's format, kept as the text the registry
/// serialized: the same bytes at every step, which keeps a provider's prompt cache warm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolDefinitions(Arc<str>);

impl ToolDefinitions {
    /// Definitions from the JSON array `json` (e.g. [`Turn::tool_list`]'s answer).
    ///
    /// [`Turn::tool_list`]: toolwright_runtime::Turn::tool_list
    pub fn from_json(json: impl Into<Arc<str>>) -> Self {
        ToolDefinitions(json.into())
    }

    /// The JSON array.
    pub fn json(&self) -> &str {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        let json = self.0.trim();
        json.is_empty() || json == "[]"
    }
}

impl Default for ToolDefinitions {
    fn default() -> Self {
        ToolDefinitions(Arc::from("[]"))
    }
}

/// Whether the model must call a tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// A call of this tool.
    Tool(String),
}

/// Sampling and length settings of a request; `None` leaves the provider's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Settings {
    /// The most tokens the answer may have.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Whether the model may call several tools in one response.
    pub parallel_tool_calls: Option<bool>,
    /// Provider-specific fields, added to the request body as they are (e.g. `"seed"`).
    pub extra: Map<String, Value>,
}

impl Settings {
    /// The provider's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// `self` limiting the answer to `tokens`.
    pub fn max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
    }

    /// `self` sampling at `temperature`.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// `self` with the provider-specific field `name` set to `value`.
    pub fn extra(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(name.into(), value.into());
        self
    }
}

/// Something that happened while the model answered.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More of the answer's text.
    TextDelta(String),
    /// More of a refusal.
    RefusalDelta(String),
    /// A tool call began: its position in the response, id and tool name.
    ToolCallStart {
        /// Its position among the response's calls.
        index: usize,
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// More of a tool call's arguments (JSON text, cut anywhere).
    ToolCallDelta {
        /// Its position among the response's calls.
        index: usize,
        /// The fragment.
        arguments: String,
    },
    /// A tool call is complete.
    ToolCallDone(crate::message::ToolUse),
    /// Token counts for the request.
    Usage(Usage),
    /// The attempt so far failed and the request is sent again after `delay` (see
    /// [`RetryPolicy`](crate::RetryPolicy)): what it streamed is void, the next events are
    /// attempt `attempt`'s.
    Retrying {
        /// The attempt that begins, from 2.
        attempt: u32,
        /// How long it waits before sending again.
        delay: Duration,
        /// Why the previous attempt failed.
        error: ModelError,
    },
    /// The response is complete.
    Completed(Response),
}

/// A model's whole response.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Response {
    /// What the model said and called.
    pub message: AssistantMessage,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Token counts, when the provider reported them.
    pub usage: Option<Usage>,
    /// The model that answered, as the provider names it.
    pub model: String,
    /// The provider's id of the response.
    pub id: String,
}

impl Response {
    /// A response carrying `message`, finished for the reason its content implies.
    pub fn new(message: AssistantMessage) -> Self {
        let finish_reason = if !message.tool_calls.is_empty() {
            FinishReason::ToolCalls
        } else if message.refusal.is_some() {
            FinishReason::ContentFilter
        } else {
            FinishReason::Stop
        };
        Response {
            message,
            finish_reason,
            ..Self::default()
        }
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end, or a stop sequence.
    #[default]
    Stop,
    /// The token limit: the answer may be cut short.
    Length,
    /// It called tools.
    ToolCalls,
    /// Content was withheld by the provider's filter, or the model refused.
    ContentFilter,
    /// A reason the provider names another way.
    Other(String),
}

/// Why a model request failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider answered with an HTTP error.
    #[error("the model provider answered {status}: {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The provider's message (or the body, when it has none).
        message: String,
        /// The provider's error code or type, when it gives one.
        code: Option<String>,
        /// How long the provider asks to wait before trying again (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// The provider reported an error inside a streamed answer.
    #[error("the model provider failed while answering: {message}")]
    Provider {
        /// The provider's message.
        message: String,
        /// The provider's error code or type, when it gives one.
        code: Option<String>,
    },
    /// The request could not be sent, or the answer broke off.
    #[error("the model provider could not be reached: {0}")]
    Transport(String),
    /// The answer did not follow the provider's format.
    #[error("the model provider's answer could not be read: {0}")]
    Protocol(String),
    /// The model or adapter is not set up to answer (e.g. a script ran out).
    #[error("{0}")]
    Unavailable(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolUse;

    #[test]
    fn a_response_finishes_for_what_it_holds() {
        let calls = AssistantMessage::default().with_call(ToolUse::new("c", "t", "{}"));
        assert_eq!(Response::new(calls).finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            Response::new(AssistantMessage::text("hi")).finish_reason,
            FinishReason::Stop
        );
    }

    #[test]
    fn empty_tool_definitions_are_an_empty_array() {
        assert!(ToolDefinitions::default().is_empty());
        assert!(!ToolDefinitions::from_json(r#"[{"type":"function"}]"#).is_empty());
    }
}
