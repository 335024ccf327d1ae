use toolwright::prelude::*;

/// Searches the web for current information.
#[tool(provider, effect = read, untrusted)]
async fn web_search() -> ProviderTool {
    ProviderTool::web_search()
}

fn main() {}
