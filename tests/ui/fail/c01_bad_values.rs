use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// `subagents` alone restates the default.
#[tool(effect = read, subagents)]
async fn a(args: Args) -> String {
    args.service
}

/// A flag with a string.
#[tool(effect = read, untrusted = "yes")]
async fn b(args: Args) -> String {
    args.service
}

/// Policy, entry point and key in quotes.
#[tool(effect = write, approval = "always", approval_key = "input")]
async fn c(args: Args) -> String {
    args.service
}

/// Entry point in quotes.
#[tool(effect = write, workflow = "execute")]
async fn d(args: Args, ctx: WorkflowContext) -> String {
    let _ = ctx.call_id();
    args.service
}

/// A misspelt policy.
#[tool(effect = write, approval = allways)]
async fn e(args: Args) -> String {
    args.service
}

/// A misspelt policy inside the object form.
#[tool(effect = write, approval(request = onse, prompt = "Restart {service}?"))]
async fn f(args: Args) -> String {
    args.service
}

/// A locale that is not one, a locale without parts, and an annotation that is not a bool.
#[tool(effect = read, i18n(english(title = "Restart"), de = "Neustart"), annotations(read_only = yes))]
async fn g(args: Args) -> String {
    args.service
}

/// A built-in policy given arguments, and a policy fn called instead of named.
#[tool(effect = write, approval(request = always(true)))]
async fn h(args: Args) -> String {
    args.service
}

/// A closure instead of a fn.
#[tool(effect = write, approval = |_| ApprovalDecision::Approved)]
async fn i(args: Args) -> String {
    args.service
}

fn main() {}
