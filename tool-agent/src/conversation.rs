//! A session's conversation as the store keeps it: read once when a turn starts or resumes,
//! then appended to, message by message, never rewritten.

use serde_json::Value;
use toolwright_runtime::{Runtime, RuntimeError, Store};

use crate::agent::AgentError;
use crate::message::{AssistantMessage, Message};

/// The messages of one session and where the next one goes.
#[derive(Debug)]
pub(crate) struct Conversation {
    session_id: String,
    messages: Vec<Message>,
    /// The turn that added each message.
    turns: Vec<String>,
}

impl Conversation {
    /// An empty conversation of session `session_id`, for tests that append to it.
    #[cfg(test)]
    pub(crate) fn empty(session_id: &str) -> Self {
        Conversation {
            session_id: session_id.to_owned(),
            messages: Vec::new(),
            turns: Vec::new(),
        }
    }

    /// Session `session_id`'s conversation from `store`.
    pub(crate) async fn load(store: &dyn Store, session_id: &str) -> Result<Self, AgentError> {
        let entries = store
            .conversation(session_id)
            .await
            .map_err(RuntimeError::from)?;
        let mut messages = Vec::with_capacity(entries.len());
        let mut turns = Vec::with_capacity(entries.len());
        for entry in entries {
            let message = serde_json::from_value(entry.message).map_err(|error| {
                AgentError::Corrupt(format!(
                    "message {} of session `{session_id}` cannot be read: {error}",
                    entry.position
                ))
            })?;
            messages.push(message);
            turns.push(entry.turn_id);
        }
        Ok(Conversation {
            session_id: session_id.to_owned(),
            messages,
            turns,
        })
    }

    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The turn that added the last message.
    pub(crate) fn last_turn(&self) -> Option<&str> {
        self.turns.last().map(String::as_str)
    }

    /// The messages with the turn that added each.
    pub(crate) fn by_turn(&self) -> impl Iterator<Item = (&str, &Message)> {
        self.turns.iter().map(String::as_str).zip(&self.messages)
    }

    /// Appends `messages` for turn `turn_id`: stored first, then kept here. A position another
    /// process took first is a conflict: two loops drove the same session at once.
    pub(crate) async fn append(
        &mut self,
        store: &dyn Store,
        turn_id: &str,
        messages: Vec<Message>,
    ) -> Result<(), AgentError> {
        if messages.is_empty() {
            return Ok(());
        }
        let (first, values) = self.encode(&messages)?;
        store
            .append_conversation(&self.session_id, turn_id, first, &values)
            .await
            .map_err(RuntimeError::from)?;
        self.appended(turn_id, messages);
        Ok(())
    }

    /// Where `messages` go (the next free position) and how they are stored, for a write that
    /// appends them elsewhere (a step's first record); then [`Conversation::appended`].
    pub(crate) fn encode(
        &self,
        messages: &[Message],
    ) -> Result<(u64, Vec<serde_json::Value>), AgentError> {
        let values = messages
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| AgentError::Corrupt(error.to_string()))?;
        Ok((self.messages.len() as u64, values))
    }

    /// Keeps `messages` of turn `turn_id`, stored by a write that succeeded.
    pub(crate) fn appended(&mut self, turn_id: &str, messages: Vec<Message>) {
        self.turns
            .extend(std::iter::repeat_n(turn_id.to_owned(), messages.len()));
        self.messages.extend(messages);
    }
}

/// Seals the sensitive values of `message`'s calls ([`Runtime::seal_arguments`]), in the calls
/// and in the provider's own items that repeat their arguments (a Responses `function_call`),
/// so the stored conversation never holds them. The model sees its calls so in later
/// requests; a call it repeats with a sealed value has it opened by the runtime.
pub(crate) fn seal_calls(runtime: &Runtime, session: &str, message: &mut AssistantMessage) {
    for call in &mut message.tool_calls {
        let sealed = runtime.seal_arguments(session, &call.name, &call.arguments);
        if sealed == call.arguments {
            continue;
        }
        for item in &mut message.items {
            let repeats = item.item.get("call_id").and_then(Value::as_str) == Some(&call.call_id)
                && item.item.get("arguments").is_some_and(Value::is_string);
            if repeats {
                item.item["arguments"] = Value::String(sealed.clone());
            }
        }
        call.arguments = sealed;
    }
}
