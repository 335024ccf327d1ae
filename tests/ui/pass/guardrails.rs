//! `guardrails(input = path, output = path)` and `prepare = path`: sync and async guardrail fns,
//! paths into modules, and a `prepare` fn; the names events report are the paths as written.

#![deny(unused_qualifications)]

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TransferArgs {
    cents: u64,
}

mod checks {
    use toolwright::prelude::*;

    /// Async, like a call to a moderation service.
    pub async fn amount(check: &InputCheck<'_>) -> InputVerdict {
        if check.input["cents"].as_u64().unwrap_or(0) > 10_000 {
            InputVerdict::ask("a large amount")
        } else {
            InputVerdict::Allow
        }
    }
}

fn receipt(check: &OutputCheck<'_>) -> OutputVerdict {
    if check.text().contains("secret") {
        OutputVerdict::redact("a secret")
    } else {
        OutputVerdict::Pass
    }
}

async fn scan(check: &OutputCheck<'_>) -> OutputVerdict {
    if check.call.untrusted {
        OutputVerdict::stop("untrusted")
    } else {
        OutputVerdict::Pass
    }
}

fn quiet_hours(cx: &PrepareContext<'_>) -> Preparation {
    if cx.flag("quiet") {
        Preparation::Hide
    } else {
        Preparation::Describe(format!("{} Mind the quiet hours.", cx.description))
    }
}

/// Moves money.
#[tool(
    effect = money,
    approval = never,
    guardrails(input = checks::amount, output = receipt),
    prepare = quiet_hours
)]
async fn transfer(args: TransferArgs) -> String {
    format!("sent {}", args.cents)
}

/// Reads a page.
#[tool(effect = read, untrusted, guardrails(output = scan))]
fn read_page(_: NoInput) -> String {
    String::new()
}

fn main() {
    let guardrails = transfer::TOOL.guardrails;
    assert_eq!(guardrails.input.map(|(name, _)| name), Some("checks::amount"));
    assert_eq!(guardrails.output.map(|(name, _)| name), Some("receipt"));
    assert!(transfer::TOOL.prepare.is_some());
    assert!(read_page::TOOL.guardrails.input.is_none());
    assert!(read_page::TOOL.prepare.is_none());
}
