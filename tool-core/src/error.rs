//! Errors a tool call can end with, as values with actionable messages.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// The most characters of model-supplied text (a path, a tool name, a key, a value) an error
/// message quotes: see [`quoted_prefix`].
pub const QUOTED_CHARS: usize = 200;

/// `text` as an error message quotes it: whole up to [`QUOTED_CHARS`] characters, else its first
/// [`QUOTED_CHARS`] characters and how many more there were. Text the model supplies can be of
/// any size, and a message that echoed it whole would hand a 100 kB path or tool name straight
/// back to the model; every message that quotes such text quotes it through this fn.
///
/// ```
/// use toolwright_core::error::quoted_prefix;
///
/// assert_eq!(quoted_prefix("notes/today.md"), "notes/today.md");
/// let long = "a".repeat(100_000);
/// assert_eq!(
///     quoted_prefix(&long),
///     format!("{}… (99800 more characters)", "a".repeat(200))
/// );
/// ```
pub fn quoted_prefix(text: &str) -> Cow<'_, str> {
    if text.len() <= QUOTED_CHARS {
        // No more characters than bytes.
        return Cow::Borrowed(text);
    }
    match text.char_indices().nth(QUOTED_CHARS) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => {
            let more = text[cut..].chars().count();
            Cow::Owned(format!("{}… ({more} more characters)", &text[..cut]))
        }
    }
}

/// Why a call failed. The code is for programs (events, MCP clients); the message is for the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The tool itself returned an error.
    ToolFailed,
    /// The tool panicked; the panic was caught.
    ToolPanicked,
    /// No tool has that name.
    UnknownTool,
    /// The tool exists but is not offered to this caller.
    NotVisible,
    /// The input does not match the tool's schema.
    InvalidInput,
    /// The output does not match the tool's published output schema, or is not JSON.
    InvalidOutput,
    /// An approval policy, a response policy or the user denied the call.
    Denied,
    /// The call needs a person's approval and none can be asked (non-interactive session).
    ApprovalUnavailable,
    /// The call or its turn was cancelled.
    Cancelled,
    /// The call ran past its time limit.
    Timeout,
    /// A new message from the user arrived while the call ran and interrupted it (steering):
    /// its cancellation token fired and the message reaches the model after the results. Unlike
    /// [`ErrorCode::Cancelled`], the turn goes on.
    Interrupted,
    /// A `serve` call named a task that does not exist or has finished.
    UnknownTask,
    /// The process stopped while the call ran; whether its side effects happened is unknown.
    ResultUnknown,
    /// A durable step or journal problem (a repeated step name, a replay that diverged).
    Journal,
    /// The application state or capability the tool needs is not installed.
    MissingState,
    /// The server of a remote tool cannot be reached now (down, reconnecting).
    Unavailable,
    /// A limit stopped the work: how deep delegation may go, or a subagent's budget.
    LimitReached,
    /// An output guardrail stopped the turn: the call's output was withheld from the model.
    Stopped,
    /// The call needs a token the user can provide: sign in, connect a provider or reconnect
    /// it (the details are the status object, see [`crate::credentials`]).
    AuthorizationRequired,
}

impl ErrorCode {
    /// The wire form, e.g. `UNKNOWN_TASK`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ToolFailed => "TOOL_FAILED",
            ErrorCode::ToolPanicked => "TOOL_PANICKED",
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::NotVisible => "NOT_VISIBLE",
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::InvalidOutput => "INVALID_OUTPUT",
            ErrorCode::Denied => "DENIED",
            ErrorCode::ApprovalUnavailable => "APPROVAL_UNAVAILABLE",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Interrupted => "INTERRUPTED",
            ErrorCode::UnknownTask => "UNKNOWN_TASK",
            ErrorCode::ResultUnknown => "RESULT_UNKNOWN",
            ErrorCode::Journal => "JOURNAL",
            ErrorCode::MissingState => "MISSING_STATE",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::LimitReached => "LIMIT_REACHED",
            ErrorCode::Stopped => "STOPPED",
            ErrorCode::AuthorizationRequired => "AUTHORIZATION_REQUIRED",
        }
    }
}

/// The error a tool returns, and the error every failed call becomes.
///
/// Write messages a model can act on: what failed, with which value, and what to do instead
/// ("log service returned 404: no service named `payment-ap`; list services with
/// `get_service_status`"), not "failed".
///
/// Any `std::error::Error` converts into a `ToolError` with `?`, keeping its message and sources.
/// For that reason `ToolError` itself does not implement `std::error::Error` (the same trade
/// `anyhow::Error` makes).
///
/// ```
/// use toolwright_core::ToolError;
/// fn parse(port: &str) -> Result<u16, ToolError> {
///     Ok(port.parse::<u16>()?)
/// }
/// let err = parse("http").unwrap_err();
/// assert_eq!(err.message(), "invalid digit found in string");
/// ```
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    code: ErrorCode,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    fatal: bool,
}

impl ToolError {
    /// A tool failure with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self::with_code(ErrorCode::ToolFailed, message)
    }

    /// A failure that must not be retried: a workflow step that fails this way skips its retries.
    pub fn fatal(message: impl Into<String>) -> Self {
        ToolError {
            fatal: true,
            ..Self::new(message)
        }
    }

    /// An error with an explicit `code`.
    pub fn with_code(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            details: None,
            fatal: false,
        }
    }

    /// `self` with structured `details` (shown to programs, summarised to the model).
    pub fn details(mut self, details: Value) -> Self {
        self.details = Some(Details::Value(details));
        self
    }

    /// The error code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message the model sees.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// This error with every text of `secrets` in its message replaced by `[redacted]`: how
    /// the runtime keeps a call's sensitive values out of an error that quotes them.
    pub fn scrubbed(mut self, secrets: &[String]) -> Self {
        if !secrets.is_empty() {
            self.message = crate::sensitive::scrub(&self.message, secrets);
        }
        self
    }

    /// Structured details, if any.
    pub fn details_value(&self) -> Option<&Value> {
        self.details.as_ref().map(Details::value)
    }

    /// Whether retries must be skipped.
    pub fn is_fatal(&self) -> bool {
        self.fatal
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("ToolError");
        s.field("code", &self.code).field("message", &self.message);
        if let Some(details) = self.details_value() {
            s.field("details", details);
        }
        if self.fatal {
            s.field("fatal", &true);
        }
        s.finish()
    }
}

/// A [`ToolError`]'s details: a value, or an input error's problems, made a value only when
/// one is asked for. Serializing writes the problems straight from their strings, as the value
/// would serialize; an invalid call (the path of every call a model gets wrong) builds no
/// objects for them.
#[derive(Clone)]
enum Details {
    Value(Value),
    Problems {
        problems: Vec<InputProblem>,
        value: OnceLock<Value>,
    },
}

impl Details {
    fn value(&self) -> &Value {
        match self {
            Details::Value(value) => value,
            Details::Problems { problems, value } => value.get_or_init(|| {
                let entries = problems.iter().map(|problem| {
                    let mut entry = Map::with_capacity(2);
                    entry.insert("pointer".to_owned(), problem.pointer.clone().into());
                    entry.insert("message".to_owned(), problem.message.clone().into());
                    Value::Object(entry)
                });
                Value::Array(entries.collect())
            }),
        }
    }
}

impl PartialEq for Details {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl Serialize for Details {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Details::Problems { problems, .. } = self else {
            return self.value().serialize(serializer);
        };
        let mut seq = serializer.serialize_seq(Some(problems.len()))?;
        for problem in problems {
            seq.serialize_element(&ProblemEntry(problem))?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Details::Value)
    }
}

/// One problem as its object in the details value serializes: the keys in the order a
/// `serde_json::Map` keeps them.
struct ProblemEntry<'a>(&'a InputProblem);

impl Serialize for ProblemEntry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        if map_keeps_insertion_order() {
            map.serialize_entry("pointer", &self.0.pointer)?;
            map.serialize_entry("message", &self.0.message)?;
        } else {
            map.serialize_entry("message", &self.0.message)?;
            map.serialize_entry("pointer", &self.0.pointer)?;
        }
        map.end()
    }
}

/// Whether `serde_json::Map` keeps its keys in insertion order (its `preserve_order` feature,
/// which any crate of the build may turn on) rather than sorted.
fn map_keeps_insertion_order() -> bool {
    static ORDER: OnceLock<bool> = OnceLock::new();
    *ORDER.get_or_init(|| {
        let mut map = Map::new();
        map.insert("pointer".to_owned(), Value::Null);
        map.insert("message".to_owned(), Value::Null);
        map.keys().next().is_some_and(|first| first == "pointer")
    })
}

impl<E> From<E> for ToolError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        ToolError::new(message)
    }
}

/// One problem found in a tool's input: where (a JSON pointer) and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputProblem {
    /// JSON pointer into the input (`""` is the whole input).
    pub pointer: String,
    /// What is wrong there, in words a model can act on.
    pub message: String,
}

/// The input of a call does not match the tool's schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputError {
    /// The tool's model-facing name.
    pub tool: String,
    /// Every problem found, in schema order.
    pub problems: Vec<InputProblem>,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid input for `{}`:", self.tool)?;
        for problem in &self.problems {
            // A pointer names the input's keys, which the model chose: quoted bounded.
            let at = if problem.pointer.is_empty() {
                Cow::Borrowed("(root)")
            } else {
                quoted_prefix(&problem.pointer)
            };
            write!(f, "\n- {at}: {}", problem.message)?;
        }
        write!(f, "\nfix these fields and call `{}` again", self.tool)
    }
}

impl std::error::Error for InputError {}

impl InputError {
    /// This error as a [`ToolError`] with code `INVALID_INPUT` and the problems as details.
    pub fn into_tool_error(self) -> ToolError {
        let message = self.message();
        ToolError {
            code: ErrorCode::InvalidInput,
            message,
            // Moved, not serialized again: a value is made of them only when one is asked for.
            details: Some(Details::Problems {
                problems: self.problems,
                value: OnceLock::new(),
            }),
            fatal: false,
        }
    }

    /// What [`fmt::Display`] writes, in one allocation of the right size.
    fn message(&self) -> String {
        const HEAD: &str = "invalid input for `";
        const ROOT: &str = "(root)";
        const TAIL: (&str, &str) = ("\nfix these fields and call `", "` again");
        fn at(problem: &InputProblem) -> Cow<'_, str> {
            if problem.pointer.is_empty() {
                Cow::Borrowed(ROOT)
            } else {
                quoted_prefix(&problem.pointer)
            }
        }
        let listed: usize = self
            .problems
            .iter()
            .map(|problem| 5 + at(problem).len() + problem.message.len())
            .sum();
        let mut out = String::with_capacity(
            HEAD.len() + 2 * self.tool.len() + 2 + listed + TAIL.0.len() + TAIL.1.len(),
        );
        out.push_str(HEAD);
        out.push_str(&self.tool);
        out.push_str("`:");
        for problem in &self.problems {
            out.push_str("\n- ");
            out.push_str(&at(problem));
            out.push_str(": ");
            out.push_str(&problem.message);
        }
        out.push_str(TAIL.0);
        out.push_str(&self.tool);
        out.push_str(TAIL.1);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_error_details_are_the_problems_as_they_serialize() {
        let problems = vec![
            InputProblem {
                pointer: "/limit".to_owned(),
                message: "500 is greater than the maximum of 200".to_owned(),
            },
            InputProblem {
                pointer: String::new(),
                message: "\"service\" is a required property".to_owned(),
            },
        ];
        let expected = serde_json::to_value(&problems).unwrap();
        let error = InputError {
            tool: "read_logs".to_owned(),
            problems,
        };
        let message = error.to_string();
        let tool_error = error.into_tool_error();
        assert_eq!(tool_error.details_value(), Some(&expected));
        assert_eq!(tool_error.message, message);
        assert_eq!(tool_error.code, ErrorCode::InvalidInput);
    }

    #[test]
    fn an_input_errors_tool_error_serializes_as_with_its_details_as_a_value() {
        let problems = vec![
            InputProblem {
                pointer: "/service".to_owned(),
                message: "\"\" is shorter than 1 character".to_owned(),
            },
            InputProblem {
                pointer: format!("/{}", "k".repeat(300)),
                message: "500 is greater than the maximum of 200".to_owned(),
            },
            InputProblem {
                pointer: String::new(),
                message: "1 more problems not listed".to_owned(),
            },
        ];
        let error = InputError {
            tool: "read_logs".to_owned(),
            problems: problems.clone(),
        };
        let message = error.to_string();
        // The error as it was built before: its details a value made of the problems.
        let expected = ToolError::with_code(ErrorCode::InvalidInput, message.clone())
            .details(serde_json::to_value(&problems).unwrap());
        let expected_text = serde_json::to_string(&expected).unwrap();
        let tool_error = error.into_tool_error();
        assert_eq!(tool_error.message(), message);
        // Written straight from the problems, and again once the value was asked for.
        assert_eq!(serde_json::to_string(&tool_error).unwrap(), expected_text);
        assert_eq!(
            serde_json::to_value(&tool_error).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
        assert_eq!(tool_error, expected);
        assert_eq!(format!("{tool_error:?}"), format!("{expected:?}"));
        assert_eq!(serde_json::to_string(&tool_error).unwrap(), expected_text);
        let back: ToolError = serde_json::from_str(&expected_text).unwrap();
        assert_eq!(back, tool_error);
        assert_eq!(back.clone().details_value(), expected.details_value());
    }
}
