//! Built-in tools the runtime implements itself, added to a registry like any other tool.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::descriptor::{InputSpec, Location, ToolDescriptor};
use crate::effect::Effect;
use crate::error::{ErrorCode, ToolError, quoted_prefix};

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
            sensitive: &[],
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

/// The subagent the built-in [`task`] tool hands work to when the model names none.
pub const GENERAL_AGENT: &str = "general";

/// The arguments of `task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// The work, with everything the subagent needs to do it: it does not see this
    /// conversation. Say what to return.
    #[schemars(length(min = 1))]
    pub prompt: String,
    /// Which subagent does it (the system prompt lists them); leave out for a general-purpose
    /// one with the tools subagents may use.
    #[serde(default)]
    pub agent: Option<String>,
}

/// `task`: the model hands a focused piece of work to a subagent, which works on it in a
/// session of its own (a child of the caller's session, with its own tools and budget) and
/// returns its final answer as the result. The host's model loop runs the subagents (the
/// `Agent`'s `subagent` profiles; without one, a general-purpose subagent). The call is
/// `durable`: the subagent's answer is journaled, and a call the process lost while the
/// subagent worked finds its session again when it is run again. Its name is reserved; add it
/// to a registry with the other tools: `Registry::from_tools([task(), ...])`.
pub fn task() -> &'static ToolDescriptor {
    &TASK
}

/// Whether `descriptor` is the built-in `task`.
pub fn is_task(descriptor: &ToolDescriptor) -> bool {
    std::ptr::eq(descriptor, &TASK)
}

static TASK: ToolDescriptor = ToolDescriptor {
    title: Some("Delegate to a subagent"),
    kind: crate::descriptor::ToolKind::Durable,
    projected: true,
    ..ToolDescriptor::plain(
        "task",
        "Hand a self-contained piece of work to a subagent, which does it in a session of its own with its own tools and returns its final answer. Use it for work whose intermediate steps you do not need to see (research across many sources, a review, a subtask of many steps); not for a single tool call you can make yourself. The subagent does not see this conversation: put everything it needs in `prompt`, and say what it should return.",
        Effect::Write,
        InputSpec {
            schema: crate::schema::schema_of::<TaskArgs>,
            fields: &["prompt", "agent"],
            sensitive: &[],
            type_name: "TaskArgs",
        },
        |input, cx| Box::pin(run_task(input, cx)),
        Location {
            file: file!(),
            line: line!(),
            column: column!(),
            module_path: module_path!(),
        },
    )
};

/// `input` as a built-in tool's arguments, or an `INVALID_INPUT` error naming `tool`.
pub(crate) fn arguments<T: serde::de::DeserializeOwned>(
    tool: &str,
    input: Value,
) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|error| {
        ToolError::with_code(
            ErrorCode::InvalidInput,
            format!(
                "`{tool}` got arguments it cannot use: {}",
                quoted_prefix(&error.to_string())
            ),
        )
    })
}

async fn run_task(
    input: serde_json::Value,
    cx: crate::CallContext,
) -> Result<crate::CallOutput, ToolError> {
    let args: TaskArgs = arguments("task", input)?;
    let ctx = <crate::DurableContext as crate::DurableParam>::from_call(&cx)?;
    let agent = args.agent.unwrap_or_else(|| GENERAL_AGENT.to_owned());
    let mut request = crate::model::ModelRequest::new(args.prompt);
    request.agent = Some(agent.clone());
    let reply = ctx.model().request(request).reply().await?;
    Ok(crate::CallOutput {
        value: serde_json::json!({
            "agent": agent,
            "answer": reply.text,
            "session": reply.session,
        }),
        ends_turn: false,
        model: Some(crate::ModelOutput::Text(reply.text)),
        complete_label: None,
    })
}
