use toolwright::prelude::*;

fn scan(_: &OutputCheck<'_>) -> OutputVerdict {
    OutputVerdict::Pass
}

fn prepare(_: &PrepareContext<'_>) -> Preparation {
    Preparation::Keep
}

/// Searches the web.
#[tool(provider, effect = read, guardrails(output = scan), prepare = prepare)]
fn web_search() -> ProviderTool {
    ProviderTool::new()
}

fn main() {}
