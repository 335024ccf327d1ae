//! Tools defined in a second crate of the workspace, to prove `Registry::collect()` gathers tools
//! across crates.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

/// Arguments of [`echo_remote`].
#[derive(Debug, Deserialize, JsonSchema, ToolInput)]
pub struct EchoArgs {
    /// The text to echo back.
    pub text: String,
}

/// What [`echo_remote`] returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Echo {
    /// The text, unchanged.
    pub text: String,
}

/// Echoes its input back. Use to check that tools of other crates are collected.
#[tool(effect = read, toolset = "support", output_schema)]
pub async fn echo_remote(args: EchoArgs) -> Echo {
    Echo { text: args.text }
}
