use toolwright::prelude::*;

/// Searches the web for current information; results come with citations.
#[tool(provider, effect = read, untrusted, deferred)]
fn web_search() -> ProviderTool {
    ProviderTool::web_search()
}

fn main() {}
