//! Built-in tools the runtime implements itself, added to a registry like any other tool.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::descriptor::{InputSpec, Location, ToolDescriptor};
use crate::effect::Effect;
use crate::error::ToolError;

/// The arguments of `ask_question`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskQuestionArgs {
    /// The question, with enough context for the user to answer it without scrolling back.
    #[schemars(length(min = 1, max = 2000))]
    pub question: String,
    /// Two or three mutually exclusive options. Leave out for an open question; the user can
    /// always answer in their own words, so no "other" option is needed.
    #[serde(default)]
    #[schemars(length(min = 2, max = 3))]
    pub options: Vec<QuestionOption>,
}

/// One option of `ask_question`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    /// Short text the user picks.
    #[schemars(length(min = 1, max = 80))]
    pub label: String,
    /// What choosing it means.
    #[schemars(length(max = 300))]
    pub description: String,
}

/// `ask_question`: the model asks the user a question and waits for the answer. The call parks
/// its turn through the input protocol (`input.requested`, kind `question`); the result is
/// `{"status": "answered", "answer": <the chosen label or the user's words>}`, or `cancelled`, or
/// `unavailable` in sessions nobody watches. Add it to a registry with the other tools:
/// `Registry::from_tools([ask_question(), ...])`.
pub fn ask_question() -> &'static ToolDescriptor {
    &ASK_QUESTION
}

/// Whether `descriptor` is the built-in `ask_question`.
pub fn is_ask_question(descriptor: &ToolDescriptor) -> bool {
    std::ptr::eq(descriptor, &ASK_QUESTION)
}

static ASK_QUESTION: ToolDescriptor = ToolDescriptor {
    title: Some("Ask the user"),
    projected: false,
    ..ToolDescriptor::plain(
        "ask_question",
        "Ask the user a question and wait for the answer. Use it when you cannot go on without a decision or a fact only the user has; not for confirming actions (tools that need approval ask by themselves). Give two or three options when the answer is a choice; the user may always answer in their own words. Returns the chosen option's label or the user's words.",
        Effect::Read,
        InputSpec {
            schema: crate::schema::schema_of::<AskQuestionArgs>,
            fields: &["question", "options"],
            type_name: "AskQuestionArgs",
        },
        // The runtime answers `ask_question` through the input protocol; a direct call has
        // nobody to ask.
        |_, _| {
            Box::pin(std::future::ready(Err(ToolError::with_code(
                crate::ErrorCode::ApprovalUnavailable,
                "`ask_question` needs the runtime's input protocol to reach a person; a direct call cannot ask anyone",
            ))))
        },
        Location {
            file: file!(),
            line: line!(),
            column: column!(),
            module_path: module_path!(),
        },
    )
};
