//! The conversation as Responses `input` items: a person's messages and context as `user`
//! messages, the model's answers as the output items it was sent in, tool results as
//! `function_call_output` items.
//!
//! An assistant message this adapter wrote carries the response's output items (reasoning,
//! messages, function calls, built-in tools' calls) as [`ProviderItem`](crate::ProviderItem)s, in output order.
//! They are sent back as they came, which is what keeps a reasoning model's reasoning across
//! its tool calls, and what keeps a message's `phase`; a message or call item is sent only
//! while it still says what the neutral message says (its text, its call's id, name and
//! arguments), else the neutral fields are rendered instead. Without `store` the API kept
//! nothing to match an item's `id` against, so ids are left out (as OpenAI's Codex does), and
//! a reasoning item without `encrypted_content` (written while `store` was on) is left out.

use serde_json::{Value, json};
use toolwright_core::{ContentPart, ModelOutput};

use crate::message::{AssistantMessage, Message, ToolUse};
use crate::model::ToolChoice;

/// The provider name of this adapter's [`ProviderItem`](crate::ProviderItem)s.
pub(crate) const PROVIDER: &str = "openai-responses";

/// The `type` of the item that keeps a stored response's id (never sent as an input item).
pub(crate) const RESPONSE_ID: &str = "response_id";

/// The request's `input` and, when chaining, the response it continues.
pub(crate) struct Input<'a> {
    pub(crate) previous_response_id: Option<&'a str>,
    pub(crate) items: Vec<Value>,
}

/// The conversation as `input`. With `chain`, the last assistant message that carries a
/// stored response's id is the `previous_response_id`, and only the messages after it are
/// rendered: OpenAI holds that response and everything before it.
pub(crate) fn input(conversation: &[Message], store: bool, chain: bool) -> Input<'_> {
    let mut previous_response_id = None;
    let mut start = 0;
    if chain {
        let last = conversation.iter().enumerate().rev().find_map(|(i, m)| {
            let id = m
                .as_assistant()?
                .items_of(PROVIDER)
                .find(|item| item["type"] == RESPONSE_ID)?["id"]
                .as_str()?;
            Some((i, id))
        });
        if let Some((i, id)) = last {
            previous_response_id = Some(id);
            start = i + 1;
        }
    }
    let mut items = Vec::with_capacity(conversation.len() - start);
    for message in &conversation[start..] {
        match message {
            Message::User { content } => items.push(json!({
                "role": "user",
                "content": content.iter().map(input_part).collect::<Vec<_>>(),
            })),
            Message::Assistant(message) => assistant(&mut items, message, store),
            Message::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => items.push(json!({
                "type": "function_call_output",
                "call_id": call_id,
                "output": tool_output(output, *is_error),
            })),
            // Text no person wrote still goes in as a `user` message: the Responses API's
            // `developer` role carries instructions, which the runtime's notices are not.
            Message::Context { text, .. } => items.push(json!({
                "role": "user",
                "content": [{ "type": "input_text", "text": text }],
            })),
        }
    }
    Input {
        previous_response_id,
        items,
    }
}

/// `tool_choice`, or `None` for the default (`auto`), which is left out of the request.
pub(crate) fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::Tool(name) => Some(json!({ "type": "function", "name": name })),
    }
}

/// The text and refusal of `message` items (their `output_text` and `refusal` parts, joined).
pub(crate) fn message_text<'a>(items: impl Iterator<Item = &'a Value>) -> (String, String) {
    let (mut text, mut refusal) = (String::new(), String::new());
    for item in items.filter(|item| item["type"] == "message") {
        for part in item["content"].as_array().into_iter().flatten() {
            match part["type"].as_str() {
                Some("output_text") => text.push_str(part["text"].as_str().unwrap_or_default()),
                Some("refusal") => refusal.push_str(part["refusal"].as_str().unwrap_or_default()),
                _ => {}
            }
        }
    }
    (text, refusal)
}

/// The model's message: its output items in order, then whatever the items no longer say
/// (text, calls) in the neutral form.
fn assistant(out: &mut Vec<Value>, message: &AssistantMessage, store: bool) {
    let own: Vec<&Value> = message
        .items_of(PROVIDER)
        .filter(|item| item["type"] != RESPONSE_ID)
        .collect();
    let (text, refusal) = message_text(own.iter().copied());
    let messages_hold = own.iter().any(|item| item["type"] == "message")
        && text == message.text
        && refusal == message.refusal.as_deref().unwrap_or_default();
    let mut text_sent = message.text.is_empty() && message.refusal.is_none();
    let mut calls_sent = vec![false; message.tool_calls.len()];
    for item in own {
        match item["type"].as_str() {
            Some("message") if messages_hold => {
                out.push(sendable(item, store));
                text_sent = true;
            }
            Some("message") if !text_sent => {
                out.push(neutral_message(message));
                text_sent = true;
            }
            Some("message") => {}
            Some("function_call") => {
                let same = message
                    .tool_calls
                    .iter()
                    .position(|call| same_call(item, call));
                if let Some(i) = same.filter(|&i| !calls_sent[i]) {
                    out.push(sendable(item, store));
                    calls_sent[i] = true;
                }
            }
            Some("reasoning") if !store && item["encrypted_content"].as_str().is_none() => {}
            _ => out.push(sendable(item, store)),
        }
    }
    if !text_sent {
        out.push(neutral_message(message));
    }
    for (call, sent) in message.tool_calls.iter().zip(calls_sent) {
        if !sent {
            out.push(json!({
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            }));
        }
    }
}

/// Whether the `function_call` item is the call `call` (a call without arguments is `{}`).
fn same_call(item: &Value, call: &ToolUse) -> bool {
    let arguments = item["arguments"].as_str().unwrap_or_default();
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    item["call_id"] == call.call_id.as_str()
        && item["name"] == call.name.as_str()
        && arguments == call.arguments
}

/// `item` as an input item: without its `id` when the API stored nothing to match it with.
fn sendable(item: &Value, store: bool) -> Value {
    let mut item = item.clone();
    if !store && let Value::Object(map) = &mut item {
        map.remove("id");
    }
    item
}

/// The assistant `message` item of `message`'s text and refusal.
fn neutral_message(message: &AssistantMessage) -> Value {
    let mut content = Vec::new();
    if !message.text.is_empty() {
        content.push(json!({ "type": "output_text", "text": message.text, "annotations": [] }));
    }
    if let Some(refusal) = &message.refusal {
        content.push(json!({ "type": "refusal", "refusal": refusal }));
    }
    json!({ "type": "message", "role": "assistant", "content": content })
}

/// A tool's result as `function_call_output.output`: its text, or content parts when it
/// returned images or files (which a text output cannot carry). An error's text starts with
/// `Error: `, as in the Chat Completions adapter.
fn tool_output(output: &ModelOutput, is_error: bool) -> Value {
    let prefix = if is_error { "Error: " } else { "" };
    match output {
        ModelOutput::Content(parts)
            if parts
                .iter()
                .any(|part| matches!(part, ContentPart::File { .. })) =>
        {
            let mut content: Vec<Value> = parts.iter().map(input_part).collect();
            if is_error {
                content.insert(0, json!({ "type": "input_text", "text": "Error:" }));
            }
            Value::Array(content)
        }
        output => Value::String(format!("{prefix}{}", output.to_text())),
    }
}

/// One content part as an input content item: text, an image (as a data URL), a file (as a
/// data URL with a file name, which `file_data` needs), a resource as its text.
fn input_part(part: &ContentPart) -> Value {
    match part {
        ContentPart::Text { text } => json!({ "type": "input_text", "text": text }),
        ContentPart::File { data, media_type } if media_type.starts_with("image/") => json!({
            "type": "input_image",
            "image_url": format!("data:{media_type};base64,{data}"),
        }),
        ContentPart::File { data, media_type } => json!({
            "type": "input_file",
            "filename": file_name(media_type),
            "file_data": format!("data:{media_type};base64,{data}"),
        }),
        other => json!({
            "type": "input_text",
            "text": ModelOutput::Content(vec![other.clone()]).to_text(),
        }),
    }
}

/// A file name for a file of `media_type` (`application/pdf` → `file.pdf`).
fn file_name(media_type: &str) -> String {
    let subtype = media_type
        .split('/')
        .nth(1)
        .and_then(|s| s.split([';', '+']).next())
        .filter(|s| !s.is_empty())
        .unwrap_or("bin");
    format!("file.{subtype}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ProviderItem;

    fn reasoning(id: &str, encrypted: Option<&str>) -> ProviderItem {
        ProviderItem::new(
            PROVIDER,
            json!({ "type": "reasoning", "id": id, "summary": [], "encrypted_content": encrypted }),
        )
    }

    #[test]
    fn a_conversation_renders_as_input_items() {
        let conversation = vec![
            Message::User {
                content: vec![
                    ContentPart::text("what is on this chart?"),
                    ContentPart::file("iVBOR", "image/png"),
                    ContentPart::file("JVBER", "application/pdf"),
                ],
            },
            Message::Assistant(
                AssistantMessage::text("Let me look.").with_call(ToolUse::new("c1", "status", "")),
            ),
            Message::ToolResult {
                usage: None,
                call_id: "c1".into(),
                name: "status".into(),
                output: ModelOutput::text("the user cancelled"),
                is_error: true,
                error: None,
            },
            Message::context("New tool available: publish"),
        ];
        let out = input(&conversation, false, false).items;
        assert_eq!(
            out[0]["content"],
            json!([
                { "type": "input_text", "text": "what is on this chart?" },
                { "type": "input_image", "image_url": "data:image/png;base64,iVBOR" },
                { "type": "input_file", "filename": "file.pdf", "file_data": "data:application/pdf;base64,JVBER" },
            ])
        );
        assert_eq!(
            out[1],
            json!({ "type": "message", "role": "assistant",
                "content": [{ "type": "output_text", "text": "Let me look.", "annotations": [] }] })
        );
        assert_eq!(
            out[2],
            json!({ "type": "function_call", "call_id": "c1", "name": "status", "arguments": "" })
        );
        assert_eq!(
            out[3],
            json!({ "type": "function_call_output", "call_id": "c1", "output": "Error: the user cancelled" })
        );
        assert_eq!(
            out[4],
            json!({ "role": "user", "content": [{ "type": "input_text", "text": "New tool available: publish" }] })
        );
    }

    #[test]
    fn output_items_go_back_as_they_came_while_they_hold() {
        let message_item = json!({ "type": "message", "id": "msg_1", "role": "assistant",
            "phase": "commentary", "status": "completed",
            "content": [{ "type": "output_text", "text": "Checking.", "annotations": [] }] });
        let call_item = json!({ "type": "function_call", "id": "fc_1", "call_id": "c1",
            "name": "status", "arguments": "{}", "status": "completed" });
        let mut message =
            AssistantMessage::text("Checking.").with_call(ToolUse::new("c1", "status", "{}"));
        message.items = vec![
            reasoning("rs_1", Some("gAAA")),
            ProviderItem::new(PROVIDER, message_item.clone()),
            ProviderItem::new(PROVIDER, call_item.clone()),
            ProviderItem::new("anthropic", json!({ "type": "thinking" })),
            ProviderItem::new(PROVIDER, json!({ "type": RESPONSE_ID, "id": "resp_1" })),
        ];
        let conversation = [Message::Assistant(message.clone())];

        let stored = input(&conversation, true, false).items;
        assert_eq!(stored[0]["id"], "rs_1");
        assert_eq!(stored[1], message_item);
        assert_eq!(stored[2], call_item);
        assert_eq!(
            stored.len(),
            3,
            "the response id and other providers' items stay out"
        );

        let stateless = input(&conversation, false, false).items;
        assert!(stateless.iter().all(|item| item.get("id").is_none()));
        assert_eq!(stateless[0]["encrypted_content"], "gAAA");
        assert_eq!(stateless[1]["phase"], "commentary");

        // An edited message: the neutral fields win.
        message.text = "Checked.".into();
        message.tool_calls[0].arguments = r#"{"service":"api"}"#.into();
        let edited = input(&[Message::Assistant(message)], true, false).items;
        assert_eq!(edited[1]["content"][0]["text"], "Checked.");
        assert!(edited[1].get("phase").is_none());
        assert_eq!(edited[2]["arguments"], r#"{"service":"api"}"#);
        assert!(edited[2].get("id").is_none());
    }

    #[test]
    fn reasoning_without_encrypted_content_needs_the_stored_item() {
        let mut message = AssistantMessage::text("ok");
        message.items = vec![reasoning("rs_1", None)];
        let conversation = [Message::Assistant(message)];
        assert_eq!(input(&conversation, true, false).items[0]["id"], "rs_1");
        let stateless = input(&conversation, false, false).items;
        assert_eq!(stateless.len(), 1);
        assert_eq!(stateless[0]["type"], "message");
    }

    #[test]
    fn chaining_sends_what_follows_the_last_stored_response() {
        let mut first = AssistantMessage::default().with_call(ToolUse::new("c1", "status", "{}"));
        first.items = vec![ProviderItem::new(
            PROVIDER,
            json!({ "type": RESPONSE_ID, "id": "resp_1" }),
        )];
        let conversation = vec![
            Message::user("status?"),
            Message::Assistant(first),
            Message::ToolResult {
                usage: None,
                call_id: "c1".into(),
                name: "status".into(),
                output: ModelOutput::text("up"),
                is_error: false,
                error: None,
            },
        ];
        let chained = input(&conversation, true, true);
        assert_eq!(chained.previous_response_id, Some("resp_1"));
        assert_eq!(chained.items.len(), 1);
        assert_eq!(chained.items[0]["type"], "function_call_output");
        let whole = input(&conversation, true, false);
        assert_eq!(whole.previous_response_id, None);
        assert_eq!(whole.items.len(), 3);
        // Nothing to chain to: the whole conversation.
        let fresh = input(&conversation[..1], true, true);
        assert_eq!(fresh.previous_response_id, None);
        assert_eq!(fresh.items.len(), 1);
    }

    #[test]
    fn tool_results_with_images_are_content_parts() {
        let output = ModelOutput::content([
            ContentPart::text("chart"),
            ContentPart::file("iVBOR", "image/png"),
        ]);
        assert_eq!(
            tool_output(&output, false),
            json!([
                { "type": "input_text", "text": "chart" },
                { "type": "input_image", "image_url": "data:image/png;base64,iVBOR" },
            ])
        );
        assert_eq!(tool_output(&output, true)[0]["text"], "Error:");
        assert_eq!(file_name("application/vnd.ms-excel"), "file.vnd.ms-excel");
        assert_eq!(file_name("text/plain; charset=utf-8"), "file.plain");
    }

    #[test]
    fn the_default_tool_choice_is_left_out() {
        assert_eq!(tool_choice(&ToolChoice::Auto), None);
        assert_eq!(
            tool_choice(&ToolChoice::Tool("x".into())),
            Some(json!({ "type": "function", "name": "x" }))
        );
    }
}
