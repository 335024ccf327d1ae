//! `react` from the eve seed (4.6): a tool whose success is the whole answer, so it ends the turn.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ReactArgs {
    /// One emoji, e.g. 👍 or ✅.
    #[schemars(length(min = 1, max = 16))]
    emoji: String,
}

#[derive(Serialize, JsonSchema)]
struct Reacted {
    emoji: String,
}

/// Adds an emoji reaction to the user's latest message. Use when a reaction is the complete
/// answer: acknowledging a thank-you, confirming you saw a notice. Do not use it next to a written
/// reply, or to judge what the user wrote. Returns the emoji added.
#[tool(effect = write, ends_turn, label(start = "Reacting with {emoji}"), output_schema)]
async fn react(args: ReactArgs) -> Reacted {
    Reacted { emoji: args.emoji }
}
