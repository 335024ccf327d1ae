//! The conversation in Chat Completions messages (`system`, `user`, `assistant`, `tool`).

use serde_json::{Value, json};
use toolwright_core::{ContentPart, ModelOutput};

use crate::message::{AssistantMessage, Message};
use crate::model::ToolChoice;

/// The request's `messages`: the instructions as the `system` message, then the conversation.
pub(crate) fn messages(instructions: Option<&str>, conversation: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(conversation.len() + 1);
    if let Some(text) = instructions.filter(|t| !t.is_empty()) {
        out.push(json!({ "role": "system", "content": text }));
    }
    for message in conversation {
        match message {
            Message::User { content } => out.push(json!({
                "role": "user",
                "content": user_content(content),
            })),
            Message::Assistant(message) => out.push(assistant(message)),
            Message::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => tool_result(&mut out, call_id, output, *is_error),
            // Chat Completions has no role for text the runtime adds; a `user` message is what
            // every compatible server accepts between tool results and the next answer.
            Message::Context { text, .. } => out.push(json!({ "role": "user", "content": text })),
        }
    }
    out
}

/// `tool_choice`, or `None` for the default (`auto`), which is left out of the request.
pub(crate) fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::Tool(name) => Some(json!({ "type": "function", "function": { "name": name } })),
    }
}

fn assistant(message: &AssistantMessage) -> Value {
    let mut value = json!({ "role": "assistant" });
    // `content` is required unless `tool_calls` is given; `null` then.
    value["content"] = if message.text.is_empty() && !message.tool_calls.is_empty() {
        Value::Null
    } else {
        Value::String(message.text.clone())
    };
    if let Some(refusal) = &message.refusal {
        value["refusal"] = json!(refusal);
    }
    if !message.tool_calls.is_empty() {
        value["tool_calls"] = message
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.call_id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
    }
    value
}

/// A `tool` message with the result's text; images the result carries follow in a `user`
/// message, since a `tool` message holds text parts only.
fn tool_result(out: &mut Vec<Value>, call_id: &str, output: &ModelOutput, is_error: bool) {
    let text = output.to_text();
    let content = if is_error {
        format!("Error: {text}")
    } else {
        text
    };
    out.push(json!({ "role": "tool", "tool_call_id": call_id, "content": content }));
    if let ModelOutput::Content(parts) = output {
        let images: Vec<Value> = parts.iter().filter_map(image).collect();
        if !images.is_empty() {
            let mut content = vec![json!({
                "type": "text",
                "text": format!("The images returned by tool call {call_id}:"),
            })];
            content.extend(images);
            out.push(json!({ "role": "user", "content": content }));
        }
    }
}

/// A person's content: a string when it is one text part, content parts otherwise.
fn user_content(parts: &[ContentPart]) -> Value {
    if let [ContentPart::Text { text }] = parts {
        return json!(text);
    }
    parts
        .iter()
        .map(|part| {
            image(part).unwrap_or_else(|| match part {
                ContentPart::File { data, media_type } => json!({
                    "type": "file",
                    "file": { "file_data": format!("data:{media_type};base64,{data}") },
                }),
                other => json!({
                    "type": "text",
                    "text": ModelOutput::Content(vec![other.clone()]).to_text(),
                }),
            })
        })
        .collect()
}

/// An `image_url` part for an image file (as a data URL), `None` for anything else.
fn image(part: &ContentPart) -> Option<Value> {
    match part {
        ContentPart::File { data, media_type } if media_type.starts_with("image/") => Some(json!({
            "type": "image_url",
            "image_url": { "url": format!("data:{media_type};base64,{data}") },
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolUse;

    #[test]
    fn a_conversation_renders_in_chat_completions_roles() {
        let conversation = vec![
            Message::user("status of api?"),
            Message::Assistant(
                AssistantMessage::default().with_call(ToolUse::new("c1", "status", "{}")),
            ),
            Message::ToolResult {
                usage: None,
                call_id: "c1".into(),
                name: "status".into(),
                output: ModelOutput::content([
                    ContentPart::text("chart"),
                    ContentPart::file("iVBOR", "image/png"),
                ]),
                is_error: false,
                error: None,
            },
            Message::ToolResult {
                usage: None,
                call_id: "c2".into(),
                name: "restart".into(),
                output: ModelOutput::text("the user cancelled"),
                is_error: true,
                error: None,
            },
            Message::context("New tool available: publish"),
        ];
        let out = messages(Some("Be brief."), &conversation);
        assert_eq!(out[0], json!({ "role": "system", "content": "Be brief." }));
        assert_eq!(
            out[1],
            json!({ "role": "user", "content": "status of api?" })
        );
        assert_eq!(out[2]["content"], Value::Null);
        assert_eq!(out[2]["tool_calls"][0]["function"]["name"], "status");
        assert_eq!(out[3]["role"], "tool");
        assert_eq!(out[3]["tool_call_id"], "c1");
        assert_eq!(out[4]["content"][1]["type"], "image_url");
        assert_eq!(out[5]["content"], "Error: the user cancelled");
        assert_eq!(
            out[6],
            json!({ "role": "user", "content": "New tool available: publish" })
        );
    }

    #[test]
    fn the_default_tool_choice_is_left_out() {
        assert_eq!(tool_choice(&ToolChoice::Auto), None);
        assert_eq!(
            tool_choice(&ToolChoice::Tool("x".into())).unwrap()["function"]["name"],
            "x"
        );
    }
}
