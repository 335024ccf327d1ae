use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct SearchArgs {
    query: String,
}

/// Searches the web for current information.
#[tool(provider, effect = read, untrusted)]
fn web_search(args: SearchArgs, ctx: ToolContext) -> ProviderTool {
    let _ = (args.query, ctx);
    ProviderTool::web_search()
}

fn main() {}
