//! Streamed Responses events into [`StreamEvent`]s: text and refusal deltas, function calls
//! announced by their output item and completed by its done event, the output items kept for
//! the next request, usage, and the terminal event's finish reason.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::render::{PROVIDER, RESPONSE_ID, message_text};
use super::wire::{Event, FunctionCall, WireResponse};
use crate::http::Decode;
use crate::message::{AssistantMessage, ProviderItem, ToolUse, Usage};
use crate::model::{FinishReason, ModelError, Response, StreamEvent};

/// What the events of one response have said so far.
pub(crate) struct Decoder {
    /// Whether the request asked OpenAI to store the response (only a stored response can be
    /// chained to, so only then is its id kept).
    store: bool,
    /// The output items by their `output_index`.
    slots: BTreeMap<usize, Slot>,
    /// Function calls announced so far: the next call's position among them.
    calls: usize,
    text: String,
    refusal: String,
    usage: Option<Usage>,
    model: String,
    id: String,
    /// Set by the terminal event.
    end: Option<End>,
}

/// How the response ended.
enum End {
    /// `response.completed`.
    Completed,
    /// `response.incomplete`, for this reason.
    Incomplete(FinishReason),
}

/// One output item.
enum Slot {
    /// A function call: its position among the response's calls, the call, and its item as the
    /// API sent it once done (kept so the next request renders the item exactly).
    Call {
        index: usize,
        call: ToolUse,
        state: CallState,
        item: Option<Value>,
    },
    /// Any other item (message, reasoning, a built-in tool's call): kept once done.
    Item(Option<Value>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CallState {
    /// Its arguments are still arriving.
    Open,
    /// Its done event arrived (with the item as the API sent it).
    Done,
    /// The response ended before its arguments did (`status: "incomplete"`).
    Cut,
}

impl Decoder {
    pub(crate) fn new(store: bool) -> Self {
        Decoder {
            store,
            slots: BTreeMap::new(),
            calls: 0,
            text: String::new(),
            refusal: String::new(),
            usage: None,
            model: String::new(),
            id: String::new(),
            end: None,
        }
    }
}

/// Output items the client must answer with an output item of its own before the next request
/// (the computer-use, shell and custom tools, MCP approvals).
const NEEDS_CLIENT_OUTPUT: &[&str] = &[
    "computer_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "custom_tool_call",
    "mcp_approval_request",
];

impl Decode for Decoder {
    /// The events of one SSE event: its `data:` is the event object, whose `type` names it
    /// (the `event:` line repeats it). `response.completed` and `response.incomplete` end the
    /// response; `response.failed` and `error` fail it.
    fn push(
        &mut self,
        _event: Option<&str>,
        data: &str,
        events: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError> {
        let event: Event = serde_json::from_str(data)
            .map_err(|e| ModelError::Protocol(format!("an event is not valid: {e}: {data}")))?;
        match event {
            Event::Created { response } => self.identify(&response),
            Event::ItemAdded { output_index, item } => {
                self.item_added(output_index, &item, events)?
            }
            Event::TextDelta { delta } if !delta.is_empty() => {
                self.text.push_str(&delta);
                events.push(StreamEvent::TextDelta(delta));
            }
            Event::RefusalDelta { delta } if !delta.is_empty() => {
                self.refusal.push_str(&delta);
                events.push(StreamEvent::RefusalDelta(delta));
            }
            Event::ArgumentsDelta {
                output_index,
                delta,
            } => {
                let (index, call) = self.open_call(output_index)?;
                if !delta.is_empty() {
                    call.arguments.push_str(&delta);
                    events.push(StreamEvent::ToolCallDelta {
                        index,
                        arguments: delta,
                    });
                }
            }
            Event::ArgumentsDone {
                output_index,
                arguments,
            } => self.open_call(output_index)?.1.arguments = arguments,
            Event::ItemDone { output_index, item } => self.item_done(output_index, item, events)?,
            Event::Completed { response } => {
                self.terminal(response, End::Completed, events)?;
                return Ok(true);
            }
            Event::Incomplete { response } => {
                let reason = match response
                    .incomplete_details
                    .as_ref()
                    .and_then(|d| d.reason.as_deref())
                {
                    // `max_output_tokens` is the documented reason; the reference's example of
                    // the event says `max_tokens`.
                    Some("max_output_tokens" | "max_tokens") => FinishReason::Length,
                    Some("content_filter") => FinishReason::ContentFilter,
                    Some(other) => FinishReason::Other(other.to_owned()),
                    None => FinishReason::Other("incomplete".into()),
                };
                self.terminal(response, End::Incomplete(reason), events)?;
                return Ok(true);
            }
            Event::Failed { response } => {
                let error = response.error.unwrap_or(super::wire::ResponseError {
                    code: None,
                    message: String::new(),
                });
                return Err(ModelError::Provider {
                    message: if error.message.is_empty() {
                        "the response failed without saying why".into()
                    } else {
                        error.message
                    },
                    code: error.code,
                });
            }
            Event::Error {
                code,
                message,
                error,
            } => {
                let (code, message) = match error {
                    Some(nested) if !nested.message.is_empty() || nested.code.is_some() => {
                        (nested.code.or(code), nested.message)
                    }
                    _ => (code, message),
                };
                let message = if message.is_empty() {
                    "the provider reported an error without saying why".into()
                } else {
                    message
                };
                return Err(ModelError::Provider { message, code });
            }
            Event::TextDelta { .. } | Event::RefusalDelta { .. } | Event::Other => {}
        }
        Ok(false)
    }

    /// The last events once the body ended (`done`: a terminal event said so). A body that
    /// ends without one broke off: its calls may be cut short, so none of them is returned.
    fn finish(self, done: bool) -> Result<Vec<StreamEvent>, ModelError> {
        match (&self.end, done) {
            (Some(_), true) => self.complete(),
            _ => Err(ModelError::Transport(
                "the response broke off before it completed".into(),
            )),
        }
    }
}

impl Decoder {
    fn identify(&mut self, response: &WireResponse) {
        if !response.id.is_empty() {
            self.id.clone_from(&response.id);
        }
        if !response.model.is_empty() {
            self.model.clone_from(&response.model);
        }
    }

    /// A new output item: a function call is announced with its position among the calls.
    fn item_added(
        &mut self,
        output_index: usize,
        item: &Value,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if item["type"] != "function_call" {
            self.slots.entry(output_index).or_insert(Slot::Item(None));
            return Ok(());
        }
        let call = function_call(item)?;
        let index = self.announce(&call, events);
        if !call.arguments.is_empty() {
            events.push(StreamEvent::ToolCallDelta {
                index,
                arguments: call.arguments.clone(),
            });
        }
        self.slots.insert(
            output_index,
            Slot::Call {
                index,
                call: ToolUse::new(call.call_id, call.name, call.arguments),
                state: CallState::Open,
                item: None,
            },
        );
        Ok(())
    }

    fn announce(&mut self, call: &FunctionCall, events: &mut Vec<StreamEvent>) -> usize {
        let index = self.calls;
        self.calls += 1;
        events.push(StreamEvent::ToolCallStart {
            index,
            call_id: call.call_id.clone(),
            name: call.name.clone(),
        });
        index
    }

    /// The call at `output_index` whose arguments are still arriving.
    fn open_call(&mut self, output_index: usize) -> Result<(usize, &mut ToolUse), ModelError> {
        match self.slots.get_mut(&output_index) {
            Some(Slot::Call {
                index,
                call,
                state: CallState::Open,
                ..
            }) => Ok((*index, call)),
            _ => Err(ModelError::Protocol(format!(
                "function call arguments arrived for output item {output_index}, which is not a function call being written"
            ))),
        }
    }

    /// An output item is complete: a function call's item is the call as the API settled it
    /// (its arguments whole, unless the response was cut short in them); any other item is
    /// kept as it came.
    fn item_done(
        &mut self,
        output_index: usize,
        item: Value,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if item["type"] != "function_call" {
            if let Some(kind) = item["type"]
                .as_str()
                .filter(|k| NEEDS_CLIENT_OUTPUT.contains(k))
            {
                // Replayed without the output the API waits for, the next request would be
                // refused: say so now, naming the tool to leave out.
                return Err(ModelError::Unavailable(format!(
                    "the model called a built-in tool that needs the client's answer \
                     (`{kind}`), which this loop does not run: leave that tool out of the \
                     request's tools"
                )));
            }
            self.slots.insert(output_index, Slot::Item(Some(item)));
            return Ok(());
        }
        let done = function_call(&item)?;
        let index = match self.slots.get(&output_index) {
            Some(Slot::Call { index, state, .. }) if *state == CallState::Open => *index,
            // Settled already: a repeated done event changes nothing.
            Some(Slot::Call { .. }) => return Ok(()),
            // A server that announces nothing before the item is done.
            _ => self.announce(&done, events),
        };
        let cut = done.status.as_deref() == Some("incomplete");
        let call = ToolUse::new(done.call_id, done.name, done.arguments);
        if !cut {
            events.push(StreamEvent::ToolCallDone(whole(call.clone())));
        }
        self.slots.insert(
            output_index,
            Slot::Call {
                index,
                call,
                state: if cut { CallState::Cut } else { CallState::Done },
                item: Some(item),
            },
        );
        Ok(())
    }

    /// The response's terminal event: its `output` settles every item whose done event did not
    /// arrive, then its usage is reported.
    fn terminal(
        &mut self,
        response: WireResponse,
        end: End,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        self.identify(&response);
        for (output_index, item) in response.output.into_iter().enumerate() {
            let settled = match self.slots.get(&output_index) {
                Some(Slot::Call { state, .. }) => *state != CallState::Open,
                Some(Slot::Item(item)) => item.is_some(),
                None => false,
            };
            if !settled {
                self.item_done(output_index, item, events)?;
            }
        }
        if let Some(usage) = response.usage {
            let details = usage.input_tokens_details;
            let usage = Usage {
                input_tokens: usage.input_tokens,
                cached_input_tokens: details.as_ref().map_or(0, |d| d.cached_tokens),
                cache_write_input_tokens: details.as_ref().map_or(0, |d| d.cache_write_tokens),
                output_tokens: usage.output_tokens,
            };
            self.usage = Some(usage);
            events.push(StreamEvent::Usage(usage));
        }
        self.end = Some(end);
        Ok(())
    }

    fn complete(self) -> Result<Vec<StreamEvent>, ModelError> {
        let completed = matches!(self.end, Some(End::Completed));
        let mut message = AssistantMessage::default();
        let mut events = Vec::new();
        let mut message_items = false;
        for slot in self.slots.into_values() {
            match slot {
                Slot::Call {
                    call,
                    state: CallState::Done,
                    item,
                    ..
                } => {
                    message.tool_calls.push(whole(call));
                    message
                        .items
                        .extend(item.map(|i| ProviderItem::new(PROVIDER, i)));
                }
                // A completed response has every call whole; an incomplete one may end inside
                // a call's arguments, and such a call is never handed over.
                Slot::Call { call, .. } if completed => {
                    return Err(ModelError::Protocol(format!(
                        "the response completed but function call {} ({}) did not",
                        call.call_id, call.name
                    )));
                }
                Slot::Call { .. } | Slot::Item(None) => {}
                Slot::Item(Some(item)) => {
                    message_items |= item["type"] == "message";
                    message.items.push(ProviderItem::new(PROVIDER, item));
                }
            }
        }
        // The message items are the answer as the API settled it; the deltas are what arrived
        // on the way (a server may send the items alone).
        let (text, refusal) = if message_items {
            message_text(message.items_of(PROVIDER))
        } else {
            (self.text.clone(), self.refusal.clone())
        };
        if self.text.is_empty() && !text.is_empty() {
            events.push(StreamEvent::TextDelta(text.clone()));
        }
        if self.refusal.is_empty() && !refusal.is_empty() {
            events.push(StreamEvent::RefusalDelta(refusal.clone()));
        }
        message.text = text;
        message.refusal = (!refusal.is_empty()).then_some(refusal);
        if self.store && !self.id.is_empty() {
            message.items.push(ProviderItem::new(
                PROVIDER,
                json!({ "type": RESPONSE_ID, "id": self.id }),
            ));
        }
        let finish_reason = match self.end {
            Some(End::Incomplete(reason)) => reason,
            _ if !message.tool_calls.is_empty() => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        events.push(StreamEvent::Completed(Response {
            message,
            finish_reason,
            usage: self.usage,
            model: self.model,
            id: self.id,
        }));
        Ok(events)
    }
}

fn function_call(item: &Value) -> Result<FunctionCall, ModelError> {
    serde_json::from_value(item.clone()).map_err(|e| {
        ModelError::Protocol(format!("a function_call item is not valid: {e}: {item}"))
    })
}

/// A call without arguments is a call with none: `{}` is what the tool gets.
fn whole(call: ToolUse) -> ToolUse {
    if call.arguments.trim().is_empty() {
        ToolUse {
            arguments: "{}".into(),
            ..call
        }
    } else {
        call
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(store: bool, events: &[Value]) -> Result<Vec<StreamEvent>, ModelError> {
        let mut decoder = Decoder::new(store);
        let mut out = Vec::new();
        let mut done = false;
        for event in events {
            done = decoder.push(None, &event.to_string(), &mut out)?;
        }
        out.extend(decoder.finish(done)?);
        Ok(out)
    }

    #[test]
    fn a_response_given_whole_at_its_end_is_reported_as_streamed() {
        let call = json!({ "type": "function_call", "id": "fc_1", "call_id": "c1",
            "name": "status", "arguments": "", "status": "completed" });
        let message = json!({ "type": "message", "id": "msg_1", "role": "assistant",
            "content": [{ "type": "output_text", "text": "Checking.", "annotations": [] }] });
        let events = run(
            true,
            &[json!({ "type": "response.completed", "response": {
                "id": "resp_1", "model": "m", "output": [message, call] } })],
        )
        .unwrap();
        assert_eq!(
            events[..3],
            [
                StreamEvent::ToolCallStart {
                    index: 0,
                    call_id: "c1".into(),
                    name: "status".into()
                },
                StreamEvent::ToolCallDone(ToolUse::new("c1", "status", "{}")),
                StreamEvent::TextDelta("Checking.".into()),
            ]
        );
        let StreamEvent::Completed(response) = &events[3] else {
            panic!("{events:?}");
        };
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
        assert_eq!(response.message.text, "Checking.");
        let items: Vec<&Value> = response.message.items_of(PROVIDER).collect();
        assert_eq!(items.len(), 3);
        assert_eq!(items[2], &json!({ "type": RESPONSE_ID, "id": "resp_1" }));
    }

    #[test]
    fn unknown_events_are_ignored_and_bad_ones_refused() {
        let events = run(
            false,
            &[
                json!({ "type": "response.queued", "response": {} }),
                json!({ "type": "response.reasoning_summary_text.delta", "delta": "…" }),
                json!({ "type": "response.completed", "response": { "id": "resp_1", "output": [] } }),
            ],
        )
        .unwrap();
        let [StreamEvent::Completed(response)] = &events[..] else {
            panic!("{events:?}");
        };
        assert!(response.message.items.is_empty(), "not stored: no id kept");

        let error = run(
            false,
            &[json!({ "type": "response.function_call_arguments.delta", "output_index": 3, "delta": "{" })],
        )
        .unwrap_err();
        assert!(
            matches!(&error, ModelError::Protocol(m) if m.contains("output item 3")),
            "{error:?}"
        );
        assert!(matches!(
            run(
                false,
                &[json!({ "type": "response.created", "response": {} })]
            ),
            Err(ModelError::Transport(_))
        ));
    }
}
