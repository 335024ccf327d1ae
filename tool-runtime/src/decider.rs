//! The decider of `approval = auto` calls.

use futures_util::future::BoxFuture;
use serde_json::Value;
use toolwright_core::{AutoCriteria, AutoSpec};

/// What the `auto` decider is asked about: the tool name and input, and what the tool's
/// `auto(...)` tells the decider. Nothing else about the session or the conversation.
#[derive(Debug)]
#[non_exhaustive]
pub struct AutoRequest<'a> {
    /// The resolved tool name.
    pub tool: &'a str,
    /// The validated input, its sensitive values redacted (the decider is usually a model of
    /// another provider).
    pub input: &'a Value,
    /// The tool's `auto(instructions = "...")`.
    pub instructions: Option<&'a str>,
    /// The tool's `auto(criteria(clear = "...", caution = "..."))`.
    pub criteria: AutoCriteria,
    /// The tool's `auto(model = "...")`: the name of the model that judges, as the host
    /// registered it with its decider; `None` for the decider's default.
    pub model: Option<&'a str>,
}

impl<'a> AutoRequest<'a> {
    /// The request about a call of `tool` with `input`, told what `spec` says (deciders' own
    /// tests build requests this way).
    pub fn new(tool: &'a str, input: &'a Value, spec: &AutoSpec) -> Self {
        AutoRequest {
            tool,
            input,
            instructions: spec.instructions,
            criteria: spec.criteria,
            model: spec.model,
        }
    }
}

/// The decider's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoVerdict {
    /// Clearly fine: run without asking.
    Clear,
    /// Needs a person.
    Caution,
}

/// Decides `approval = auto` calls (typically a small model). Anything but a timely
/// [`AutoVerdict::Clear`] means asking a person: fail closed.
pub trait Decider: Send + Sync + 'static {
    /// Judges one call. An `Err` says why it could not (the person asked instead reads it).
    fn decide<'a>(&'a self, request: AutoRequest<'a>)
    -> BoxFuture<'a, Result<AutoVerdict, String>>;
}
