//! The conversation, provider-neutral: what the loop sends a [`Model`](crate::Model) and stores
//! with the turn. Adapters translate it into their provider's message format; nothing here has
//! one provider's shape.

use serde::{Deserialize, Serialize};
use toolwright_core::{ContentPart, ErrorCode, ModelOutput, ModelUsage};

use crate::budget::LimitAnswer;

/// One message of a conversation.
///
/// Besides the person's and the model's messages there are two kinds the loop writes: a tool's
/// [`Message::ToolResult`], and [`Message::Context`], text the runtime adds for the model (tool
/// change notices, delivered task results, the turn's context). Adapters render a context
/// message the way their provider takes text that is not from the person (Chat Completions: a
/// `user` message; providers that require it merge it with the tool results around it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Message {
    /// What the person wrote.
    User {
        /// Text, files, resources.
        content: Vec<ContentPart>,
    },
    /// The model's answer: text, tool calls, or a refusal.
    Assistant(AssistantMessage),
    /// The result of one tool call, as the model sees it.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The tool's name (the real name for deferred tools).
        name: String,
        /// What the model sees.
        output: ModelOutput,
        /// Whether the call failed.
        #[serde(default)]
        is_error: bool,
        /// Why it failed, when it did (e.g. [`ErrorCode::InvalidInput`]: the loop counts the
        /// model's retries of invalid input from it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorCode>,
        /// What the call's own model asks used (`ctx.model()`, a subagent), counted in the
        /// turn's budget; never sent to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<ModelUsage>,
    },
    /// Text for the model that no person wrote: notices, task results, per-turn context.
    Context {
        /// The text.
        text: String,
        /// When the text tells the model how a session-limit request was answered: the
        /// answer, which the budgets' ledger counts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<LimitAnswer>,
    },
}

impl Message {
    /// A person's text message.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User {
            content: vec![ContentPart::text(text)],
        }
    }

    /// A context message.
    pub fn context(text: impl Into<String>) -> Self {
        Message::Context {
            text: text.into(),
            limit: None,
        }
    }

    /// The assistant message, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Message::Assistant(message) => Some(message),
            _ => None,
        }
    }
}

/// What the model answered in one response.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AssistantMessage {
    /// The answer's text (empty when it only called tools).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The tools it called, in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolUse>,
    /// Why it declined to answer, when the provider reports refusals apart from text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// What only the provider that answered reads back: reasoning items, thinking blocks and
    /// their signatures, the response id a follow-up may chain to. Its adapter renders them
    /// back in the next request, in its format; other adapters leave them out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ProviderItem>,
    /// The tokens the response took, when the provider reported them: with `model`, the
    /// ledger budgets are counted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The model that answered, as the provider names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// An item of a provider's own format kept with the model's message, for that provider only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderItem {
    /// The adapter that wrote it (e.g. `"anthropic"`, `"openai-responses"`).
    pub provider: String,
    /// The item, as the provider sent it.
    pub item: serde_json::Value,
}

impl ProviderItem {
    /// `item` of `provider`.
    pub fn new(provider: impl Into<String>, item: serde_json::Value) -> Self {
        ProviderItem {
            provider: provider.into(),
            item,
        }
    }
}

/// Token counts of one request.
///
/// Adapters normalise what their provider reports: `input_tokens` counts the whole prompt,
/// including the tokens read from or written to the provider's prompt cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens of the prompt served from the provider's cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Tokens of the prompt written to the provider's cache (billed apart by some providers).
    #[serde(default)]
    pub cache_write_input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
}

impl Usage {
    /// `self` as what a tool's model asks used: `requests` requests that made `tool_calls`
    /// calls and cost `cost`.
    pub(crate) fn spent(self, requests: u64, tool_calls: u64, cost: f64) -> ModelUsage {
        ModelUsage {
            requests,
            tool_calls,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cached_input_tokens,
            cache_write_input_tokens: self.cache_write_input_tokens,
            cost,
        }
    }
}

/// The tokens of what a tool's model asks used.
impl From<&ModelUsage> for Usage {
    fn from(used: &ModelUsage) -> Usage {
        Usage {
            input_tokens: used.input_tokens,
            cached_input_tokens: used.cached_input_tokens,
            cache_write_input_tokens: used.cache_write_input_tokens,
            output_tokens: used.output_tokens,
        }
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        // Saturating: token counts come from the provider.
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_add(other.cached_input_tokens),
            cache_write_input_tokens: self
                .cache_write_input_tokens
                .saturating_add(other.cache_write_input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

impl From<AssistantMessage> for Message {
    fn from(message: AssistantMessage) -> Self {
        Message::Assistant(message)
    }
}

impl AssistantMessage {
    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        AssistantMessage {
            text: text.into(),
            ..Self::default()
        }
    }

    /// The items of `provider` among [`AssistantMessage::items`].
    pub fn items_of<'a>(
        &'a self,
        provider: &'a str,
    ) -> impl Iterator<Item = &'a serde_json::Value> {
        self.items
            .iter()
            .filter(move |i| i.provider == provider)
            .map(|i| &i.item)
    }

    /// `self` with one more tool call.
    pub fn with_call(mut self, call: ToolUse) -> Self {
        self.tool_calls.push(call);
        self
    }
}

/// One tool call the model made: its id, the tool's name and the arguments as JSON text (as
/// the model wrote them; the runtime validates them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolUse {
    /// The call id the model gave.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The arguments, JSON text.
    pub arguments: String,
}

impl ToolUse {
    /// A call `call_id` of `name` with `arguments` (JSON text).
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolUse {
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json_with_a_role_tag() {
        let messages = vec![
            Message::user("restart api"),
            Message::Assistant(
                AssistantMessage::text("on it").with_call(ToolUse::new("c1", "restart", "{}")),
            ),
            Message::ToolResult {
                usage: None,
                call_id: "c1".into(),
                name: "restart".into(),
                output: ModelOutput::text("done"),
                is_error: false,
                error: None,
            },
            Message::context("New tool available: publish"),
        ];
        let json = serde_json::to_value(&messages).unwrap();
        assert_eq!(json[0]["role"], "user");
        assert_eq!(json[1]["role"], "assistant");
        assert_eq!(json[1]["tool_calls"][0]["name"], "restart");
        assert_eq!(json[2]["role"], "tool_result");
        assert_eq!(json[3]["role"], "context");
        let back: Vec<Message> = serde_json::from_value(json).unwrap();
        assert_eq!(back, messages);
    }
}
