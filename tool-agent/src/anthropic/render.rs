//! The conversation in Messages API content blocks, with the prompt cache's breakpoints.
//!
//! The API takes `user` and `assistant` messages only: a tool's result is a `tool_result` block
//! of the next `user` message, and every result of a step goes into that one message, first
//! ("Handling tool use": results before any other content of the turn, or the request fails);
//! text the runtime adds ([`Message::Context`]) follows them there as a `text` block. An
//! assistant message is its thinking and other kept blocks first (the API checks that the
//! thinking blocks of a tool-use turn come back unchanged, before the `tool_use` blocks), then
//! its text, then its calls.

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use toolwright_core::{ContentPart, ModelOutput};

use super::PROVIDER;
use super::wire::{Role, SystemBlock, WireMessage, ephemeral};
use crate::message::{AssistantMessage, Message, ToolUse};
use crate::model::{ModelError, ToolChoice};

/// The image types the API reads ("Vision": JPEG, PNG, GIF and WebP); other files go as text.
const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// `system`: the instructions as one text block, the cache breakpoint on it when `cache`.
pub(crate) fn system(instructions: Option<&str>, cache: bool) -> Vec<SystemBlock<'_>> {
    instructions
        .filter(|text| !text.is_empty())
        .map(|text| SystemBlock {
            kind: "text",
            text,
            cache_control: cache.then(ephemeral),
        })
        .into_iter()
        .collect()
}

/// `tools`: the registry's export as it is (the same bytes at every step), the last definition
/// given a cache breakpoint when `cache`, which caches the tools and everything before them.
pub(crate) fn tools(json: &str, cache: bool) -> Result<Vec<Box<RawValue>>, ModelError> {
    let mut tools: Vec<Box<RawValue>> = serde_json::from_str(json).map_err(|e| {
        ModelError::Unavailable(format!("the tool definitions are not a JSON array: {e}"))
    })?;
    if cache && let Some(last) = tools.last_mut() {
        let mut tool: Map<String, Value> = serde_json::from_str(last.get()).map_err(|e| {
            ModelError::Unavailable(format!("a tool definition is not a JSON object: {e}"))
        })?;
        // A definition that sets its own breakpoint keeps it: two would be invalid JSON.
        if !tool.contains_key("cache_control") {
            tool.insert("cache_control".into(), ephemeral());
            *last = serde_json::value::to_raw_value(&tool)
                .map_err(|e| ModelError::Protocol(e.to_string()))?;
        }
    }
    Ok(tools)
}

/// `tool_choice`, or `None` for the API's default (`auto`, parallel calls allowed).
pub(crate) fn tool_choice(choice: &ToolChoice, parallel: Option<bool>) -> Option<Value> {
    let mut value = match choice {
        ToolChoice::Auto if parallel != Some(false) => return None,
        ToolChoice::Auto => json!({ "type": "auto" }),
        ToolChoice::None => return Some(json!({ "type": "none" })),
        ToolChoice::Required => json!({ "type": "any" }),
        ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
    };
    if parallel == Some(false) {
        value["disable_parallel_tool_use"] = json!(true);
    }
    Some(value)
}

/// `messages`: the conversation with consecutive messages of one role merged, and, when
/// `cache`, a cache breakpoint on the last block of the last `user` message, so that the next
/// request (this conversation and more) reads the history from the cache.
pub(crate) fn messages(conversation: &[Message], cache: bool) -> Vec<WireMessage> {
    let mut out = Messages::default();
    for (position, message) in conversation.iter().enumerate() {
        let last = position + 1 == conversation.len();
        match message {
            Message::User { content } => {
                out.push(Role::User, content.iter().map(user_part).collect());
            }
            Message::Assistant(message) => out.push(Role::Assistant, assistant(message, last)),
            Message::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => out.push_result(tool_result(call_id, output, *is_error)),
            Message::Context { text, .. } => out.push(Role::User, vec![text_block(text)]),
        }
    }
    let mut messages = out.0;
    if cache {
        let last_user = messages.iter_mut().rev().find(|m| m.role == Role::User);
        if let Some(Value::Object(block)) = last_user.and_then(|m| m.content.last_mut()) {
            block.insert("cache_control".into(), ephemeral());
        }
    }
    messages
}

#[derive(Default)]
struct Messages(Vec<WireMessage>);

impl Messages {
    /// Appends `blocks` to the last message when it has `role`, else as a new message; a
    /// message without blocks is left out (the API refuses empty content).
    fn push(&mut self, role: Role, blocks: Vec<Value>) {
        let blocks: Vec<Value> = blocks.into_iter().filter(|b| !b.is_null()).collect();
        if blocks.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => self.0.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }

    /// A `tool_result` block, after the results already in the last `user` message and before
    /// anything else there: results come first in their message.
    fn push_result(&mut self, block: Value) {
        match self.0.last_mut() {
            Some(last) if last.role == Role::User => {
                let at = last
                    .content
                    .iter()
                    .take_while(|b| b["type"] == "tool_result")
                    .count();
                last.content.insert(at, block);
            }
            _ => self.push(Role::User, vec![block]),
        }
    }
}

/// An assistant message's blocks: this adapter's kept blocks in their order, the text, the
/// calls. A refused answer's text is left out: the streaming refusals guide asks to remove or
/// change the refused turn, since sending it back would be refused again. The conversation's
/// `last` message (a paused turn sent again) is a prefill, whose text may not end in
/// whitespace.
fn assistant(message: &AssistantMessage, last: bool) -> Vec<Value> {
    let mut blocks: Vec<Value> = message.items_of(PROVIDER).cloned().collect();
    let text = if last {
        message.text.trim_end()
    } else {
        message.text.as_str()
    };
    if message.refusal.is_none() && !text.is_empty() {
        blocks.push(text_block(text));
    }
    blocks.extend(message.tool_calls.iter().map(tool_use));
    blocks
}

/// A `tool_use` block. `input` must be a JSON object: arguments that are not one (the model
/// wrote invalid JSON, or a stream cut at `max_tokens` ended them early) go as `{}`. The
/// runtime refused such a call before running it, and its `tool_result` says why, so the
/// model learns what went wrong there; sending the text as it was would fail the request, and
/// every later one of the conversation with it.
fn tool_use(call: &ToolUse) -> Value {
    json!({
        "type": "tool_use",
        "id": call.call_id,
        "name": call.name,
        "input": input(&call.arguments),
    })
}

/// The arguments as a JSON object, else `{}`. The same arguments always render the same
/// bytes, which keeps the cached prefix valid from one request to the next.
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({}),
    }
}

/// A `tool_result` block: the output as text, or as text and image blocks when it has images.
fn tool_result(call_id: &str, output: &ModelOutput, is_error: bool) -> Value {
    let mut block = json!({ "type": "tool_result", "tool_use_id": call_id });
    match output {
        ModelOutput::Content(parts) if parts.iter().any(|p| media(p).is_some()) => {
            let blocks = parts.iter().map(user_part).filter(|b| !b.is_null());
            block["content"] = blocks.collect();
        }
        output => {
            let text = output.to_text();
            // `content` is optional; an empty text block would be refused.
            if !text.is_empty() {
                block["content"] = json!(text);
            }
        }
    }
    if is_error {
        block["is_error"] = json!(true);
    }
    block
}

/// A part of a person's message or a tool's output: an image or PDF as a base64 block, the
/// rest as text (`Value::Null` for empty text, which is left out).
fn user_part(part: &ContentPart) -> Value {
    if let Some(block) = media(part) {
        return block;
    }
    let text = match part {
        ContentPart::Text { text } => text.clone(),
        other => ModelOutput::Content(vec![other.clone()]).to_text(),
    };
    if text.is_empty() {
        Value::Null
    } else {
        text_block(&text)
    }
}

/// An `image` or `document` block with a base64 source, for the types the API reads.
fn media(part: &ContentPart) -> Option<Value> {
    let ContentPart::File { data, media_type } = part else {
        return None;
    };
    let kind = if IMAGE_TYPES.contains(&media_type.as_str()) {
        "image"
    } else if media_type == "application/pdf" {
        "document"
    } else {
        return None;
    };
    Some(json!({
        "type": kind,
        "source": { "type": "base64", "media_type": media_type, "data": data },
    }))
}

fn text_block(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ProviderItem;

    fn result(call_id: &str, text: &str) -> Message {
        Message::ToolResult {
            usage: None,
            call_id: call_id.into(),
            name: "status".into(),
            output: ModelOutput::text(text),
            is_error: false,
            error: None,
        }
    }

    #[test]
    fn arguments_that_are_not_an_object_go_as_an_empty_object() {
        assert_eq!(input(r#"{"city": "Paris"}"#), json!({ "city": "Paris" }));
        assert_eq!(input(r#"{"city": "Par"#), json!({}));
        assert_eq!(input("[1, 2]"), json!({}));
        assert_eq!(input(""), json!({}));
    }

    #[test]
    fn results_come_first_in_their_user_message_and_context_after_them() {
        let conversation = vec![
            Message::user("status of api and db?"),
            Message::Assistant(
                AssistantMessage::default()
                    .with_call(ToolUse::new("c1", "status", r#"{"name":"api"}"#))
                    .with_call(ToolUse::new("c2", "status", r#"{"name":"db"}"#)),
            ),
            result("c1", "up"),
            // A notice written between two results still follows every result.
            Message::context("New tool available: publish"),
            result("c2", "down"),
        ];
        let out = messages(&conversation, false);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2].role, Role::User);
        let kinds: Vec<&Value> = out[2].content.iter().map(|b| &b["type"]).collect();
        assert_eq!(kinds, ["tool_result", "tool_result", "text"]);
        assert_eq!(out[2].content[1]["tool_use_id"], "c2");
        assert_eq!(out[1].content[1]["input"], json!({ "name": "db" }));
    }

    #[test]
    fn images_and_pdfs_are_base64_blocks_and_other_files_text() {
        let output = ModelOutput::content([
            ContentPart::text("chart"),
            ContentPart::text(""),
            ContentPart::file("iVBOR", "image/png"),
            ContentPart::file("PHN2Zz4=", "image/svg+xml"),
        ]);
        let block = tool_result("c1", &output, true);
        assert_eq!(block["is_error"], true);
        assert_eq!(
            block["content"][0],
            json!({ "type": "text", "text": "chart" })
        );
        assert_eq!(
            block["content"][1]["source"],
            json!({ "type": "base64", "media_type": "image/png", "data": "iVBOR" })
        );
        assert_eq!(block["content"][2]["text"], "[image/svg+xml file]");
        assert_eq!(
            block["content"].as_array().unwrap().len(),
            3,
            "no empty text"
        );
        let pdf = user_part(&ContentPart::file("JVBERi0=", "application/pdf"));
        assert_eq!(pdf["type"], "document");
    }

    #[test]
    fn only_this_adapters_items_go_back_before_text_and_calls() {
        let mut message =
            AssistantMessage::text("Checking.").with_call(ToolUse::new("c1", "status", "{}"));
        message.items = vec![
            ProviderItem::new("openai-responses", json!({ "type": "reasoning" })),
            ProviderItem::new(
                PROVIDER,
                json!({ "type": "thinking", "thinking": "hm", "signature": "sig" }),
            ),
        ];
        let blocks = assistant(&message, false);
        let kinds: Vec<&Value> = blocks.iter().map(|b| &b["type"]).collect();
        assert_eq!(kinds, ["thinking", "text", "tool_use"]);
        assert_eq!(blocks[0]["signature"], "sig");
    }

    #[test]
    fn a_refused_answer_is_not_sent_back() {
        let mut refused = AssistantMessage::text("Here is how to");
        refused.refusal = Some("stopped".into());
        let conversation = vec![
            Message::user("something"),
            Message::Assistant(refused),
            Message::user("something else"),
        ];
        let out = messages(&conversation, false);
        assert_eq!(out.len(), 1, "the two user messages merge: {out:?}");
        assert_eq!(out[0].content.len(), 2);
    }

    #[test]
    fn the_cache_breakpoint_is_on_the_last_user_block_only() {
        let conversation = vec![
            Message::user("first"),
            Message::Assistant(AssistantMessage::text("ok")),
            Message::user("second"),
            Message::Assistant(AssistantMessage::text("prefill")),
        ];
        let out = messages(&conversation, true);
        let marked: Vec<(usize, usize)> = out
            .iter()
            .enumerate()
            .flat_map(|(m, message)| {
                message
                    .content
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.get("cache_control").is_some())
                    .map(move |(b, _)| (m, b))
            })
            .collect();
        assert_eq!(marked, [(2, 0)]);
        assert!(
            messages(&conversation, false)
                .iter()
                .all(|m| m.content.iter().all(|b| b.get("cache_control").is_none()))
        );
    }

    #[test]
    fn only_the_last_tool_changes_for_the_cache() {
        let json = r#"[{"name":"a","input_schema":{"type":"object"}},  {"name":"b","description":"B","input_schema":{}}]"#;
        let cached = tools(json, true).unwrap();
        assert_eq!(
            cached[0].get(),
            r#"{"name":"a","input_schema":{"type":"object"}}"#
        );
        let last: Value = serde_json::from_str(cached[1].get()).unwrap();
        assert_eq!(last["cache_control"], json!({ "type": "ephemeral" }));
        assert_eq!(last["description"], "B");
        let plain = tools(json, false).unwrap();
        assert!(!plain[1].get().contains("cache_control"));
        assert!(matches!(
            tools("{}", true),
            Err(ModelError::Unavailable(m)) if m.contains("not a JSON array")
        ));
    }

    #[test]
    fn tool_choice_says_any_for_required_and_can_forbid_parallel_calls() {
        assert_eq!(tool_choice(&ToolChoice::Auto, None), None);
        assert_eq!(
            tool_choice(&ToolChoice::Required, None),
            Some(json!({ "type": "any" }))
        );
        assert_eq!(
            tool_choice(&ToolChoice::Auto, Some(false)),
            Some(json!({ "type": "auto", "disable_parallel_tool_use": true }))
        );
        assert_eq!(
            tool_choice(&ToolChoice::Tool("status".into()), Some(true)),
            Some(json!({ "type": "tool", "name": "status" }))
        );
        assert_eq!(
            tool_choice(&ToolChoice::None, Some(false)),
            Some(json!({ "type": "none" }))
        );
    }

    #[test]
    fn empty_instructions_send_no_system() {
        assert!(system(Some(""), true).is_empty());
        let blocks = system(Some("Be brief."), true);
        assert_eq!(
            serde_json::to_value(&blocks).unwrap(),
            json!([{ "type": "text", "text": "Be brief.", "cache_control": { "type": "ephemeral" } }])
        );
    }

    #[test]
    fn a_paused_answer_sent_back_last_ends_without_whitespace() {
        let paused = Message::Assistant(AssistantMessage::text("Searching the web…\n"));
        let out = messages(&[Message::user("find it"), paused.clone()], false);
        let last = serde_json::to_value(&out[1]).unwrap();
        assert_eq!(last["content"][0]["text"], "Searching the web…");
        let earlier = messages(&[paused, Message::user("and?")], false);
        let first = serde_json::to_value(&earlier[0]).unwrap();
        assert_eq!(first["content"][0]["text"], "Searching the web…\n");
    }
}
