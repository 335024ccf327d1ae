//! The decider of `approval = auto` calls.

use futures_util::future::BoxFuture;
use serde_json::Value;

/// What the `auto` decider is asked about.
#[derive(Debug)]
#[non_exhaustive]
pub struct AutoRequest<'a> {
    /// The resolved tool name.
    pub tool: &'a str,
    /// The validated input.
    pub input: &'a Value,
    /// The tool's `auto(instructions = "...")`.
    pub instructions: Option<&'a str>,
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
    /// Judges one call.
    fn decide<'a>(&'a self, request: AutoRequest<'a>)
    -> BoxFuture<'a, Result<AutoVerdict, String>>;
}
