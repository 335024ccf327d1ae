//! `input_retries`: 0 and the limit, with an integer suffix, beside the keys it combines with
//! (`deferred`, a `workflow`, `ends_turn`, `user_only = false`), and absent.

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;
use toolwright::registry::ToolDescriptor;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    /// A date, `YYYY-MM-DD`.
    date: String,
}

/// Books a slot. One invalid date fails the turn.
#[tool(effect = write, input_retries = 0)]
async fn book_slot(args: Args) -> String {
    args.date
}

/// Finds free slots around a date. Found through `tool_search`.
#[tool(effect = read, deferred, input_retries = 10, user_only = false)]
async fn find_slots(args: Args) -> String {
    args.date
}

/// Plans a release for a date, asking a person on the way.
#[tool(effect = write, workflow = execute, input_retries = 3u8)]
async fn plan_release(args: Args, ctx: WorkflowContext) -> String {
    let _ = ctx.call_id();
    args.date
}

/// Hands the booking to the user.
#[tool(effect = read, ends_turn, input_retries = 1)]
fn confirm(args: Args) -> String {
    args.date
}

/// Shows the calendar of a date.
#[tool(effect = read)]
fn calendar(args: Args) -> String {
    args.date
}

fn main() {
    // The macro's limit and the descriptor's are the same number.
    assert_eq!(ToolDescriptor::MAX_INPUT_RETRIES, 10);
    assert_eq!(find_slots::TOOL.input_retries, Some(10));

    let registry = Registry::from_tools([
        book_slot::TOOL,
        find_slots::TOOL,
        plan_release::TOOL,
        confirm::TOOL,
        calendar::TOOL,
    ])
    .unwrap();
    let retries = |name: &str| registry.get(name).unwrap().input_retries();
    assert_eq!(retries("book_slot"), Some(0));
    assert_eq!(retries("find_slots"), Some(10));
    assert_eq!(retries("plan_release"), Some(3));
    assert_eq!(retries("confirm"), Some(1));
    assert_eq!(retries("calendar"), None);
}
