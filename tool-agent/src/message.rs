//! The conversation, provider-neutral: what the loop sends a [`Model`](crate::Model) and stores
//! with the turn. Adapters translate it into their provider's message format; nothing here has
//! one provider's shape.

use serde::{Deserialize, Serialize};
use toolwright_core::{ContentPart, ModelOutput};

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
    },
    /// Text for the model that no person wrote: notices, task results, per-turn context.
    Context {
        /// The text.
        text: String,
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
        Message::Context { text: text.into() }
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
                call_id: "c1".into(),
                name: "restart".into(),
                output: ModelOutput::text("done"),
                is_error: false,
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
