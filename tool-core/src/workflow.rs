//! Workflow vocabulary: entry points and the `ask` request/answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a workflow tool is entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Entry {
    /// Blocks the turn until the result.
    Execute,
    /// Returns a receipt at once; the result arrives later as a `task_result` message.
    Task,
    /// A long-lived task that receives further calls by `task_id` and replies to each.
    Serve,
}

impl Entry {
    /// The name as written in `workflow = ...`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Entry::Execute => "execute",
            Entry::Task => "task",
            Entry::Serve => "serve",
        }
    }
}

/// How the user interface should render a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskDisplay {
    /// A confirmation box.
    Confirmation,
    /// A selection among options.
    Select,
    /// A text box.
    Text,
}

/// The button style of an option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionStyle {
    /// The suggested choice.
    Primary,
    /// A dangerous choice.
    Danger,
    /// Neither.
    #[default]
    Default,
}

/// One option of a question. The `id` is what comes back, so make it readable on its own
/// (`approve`, not `opt1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskOption {
    /// What is returned when chosen.
    pub id: String,
    /// What the person sees.
    pub label: String,
    /// A longer explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The button style.
    #[serde(default)]
    pub style: OptionStyle,
}

impl AskOption {
    /// An option `id` shown as `label`.
    pub fn new(id: impl Into<String>, label: impl Into<String>) -> Self {
        AskOption {
            id: id.into(),
            label: label.into(),
            description: None,
            style: OptionStyle::Default,
        }
    }

    /// `self` with `style`.
    pub fn style(mut self, style: OptionStyle) -> Self {
        self.style = style;
        self
    }

    /// `self` with a `description`.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// A question a workflow body asks a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskRequest {
    /// The whole question, with enough context to answer it.
    pub prompt: String,
    /// A rendering hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<AskDisplay>,
    /// The options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<AskOption>,
    /// Whether the person may type an answer instead of choosing.
    #[serde(default)]
    pub allow_freeform: bool,
    /// A form to fill in instead of one answer: a JSON Schema object whose properties are flat
    /// strings, numbers, integers, booleans and enums (what MCP elicitation shows; `default`s,
    /// titled `oneOf` enums and multi-select arrays included). The answer is
    /// [`AskAnswer::Filled`], checked against this schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Value>,
    /// How long the question stays open, in milliseconds from when the body first asks it:
    /// past that the runtime withdraws it and the body gets [`AskAnswer::Timeout`] (see
    /// [`AskRequest::timeout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl AskRequest {
    /// A question with `prompt` and no options.
    pub fn new(prompt: impl Into<String>) -> Self {
        AskRequest {
            prompt: prompt.into(),
            display: None,
            options: Vec::new(),
            allow_freeform: false,
            form: None,
            timeout_ms: None,
        }
    }

    /// `self` withdrawn when nobody answered within `timeout` of the body first asking it:
    /// the body then gets [`AskAnswer::Timeout`]. The deadline is fixed when the question is
    /// first asked and kept in the store, so it holds across replays and restarts; the
    /// runtime's timer worker (`Runtime::wake_due`) withdraws it once due. An answer given
    /// before wins.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout_ms = Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// `self` as a form: the person fills in the fields of `schema` (see [`AskRequest::form`]
    /// for the schemas a person can be shown), and the answer is [`AskAnswer::Filled`].
    ///
    /// ```
    /// use serde_json::json;
    /// use toolwright_core::AskRequest;
    /// let ask = AskRequest::new("Who should we notify?").with_form(json!({
    ///     "type": "object",
    ///     "properties": { "email": { "type": "string", "format": "email" } },
    ///     "required": ["email"],
    /// }));
    /// assert!(ask.form.is_some());
    /// ```
    pub fn with_form(mut self, schema: Value) -> Self {
        self.form = Some(schema);
        self
    }

    /// `self` with a display hint.
    pub fn display(mut self, display: AskDisplay) -> Self {
        self.display = Some(display);
        self
    }

    /// `self` with one more option.
    pub fn option(mut self, option: AskOption) -> Self {
        self.options.push(option);
        self
    }

    /// `self` allowing a free-form answer.
    pub fn allow_freeform(mut self) -> Self {
        self.allow_freeform = true;
        self
    }
}

/// The answer to an [`AskRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
#[non_exhaustive]
pub enum AskAnswer {
    /// The person chose an option and/or typed text.
    Answered {
        /// The chosen option's id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        option_id: Option<String>,
        /// The typed text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// The person filled in the form of the question ([`AskRequest::with_form`]); the fields
    /// passed its schema.
    Filled {
        /// The fields, a JSON object.
        fields: Value,
    },
    /// The question was withdrawn (cancelled call, aborted signal, `serve` already replied), or
    /// the person declined to answer.
    Cancelled,
    /// No person can be asked (a schedule). Do not retry: continue on the default path.
    Unavailable,
    /// What an outside system delivered to the hook a body waited on
    /// ([`WorkflowContext::wait_hook`](crate::WorkflowContext::wait_hook)), checked against
    /// the hook's schema. A question is never answered so.
    Received {
        /// The payload, as delivered.
        payload: Value,
    },
    /// Nobody answered before the question's deadline ([`AskRequest::timeout`]): it was
    /// withdrawn. Continue on the default path, or ask again.
    Timeout,
}

impl AskAnswer {
    /// Whether the person chose the option `id`.
    pub fn chose(&self, id: &str) -> bool {
        matches!(self, AskAnswer::Answered { option_id: Some(chosen), .. } if chosen == id)
    }

    /// The fields of a filled-in form, read as `T`; `None` for any other answer.
    pub fn fields<T: serde::de::DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        match self {
            AskAnswer::Filled { fields } => Some(serde_json::from_value(fields.clone())),
            _ => None,
        }
    }
}
