use serde_json::json;
use toolwright::prelude::*;

/// Buys the item the user picked, through the provider's shopping tool.
#[tool(provider, effect = money)]
fn checkout() -> ProviderTool {
    ProviderTool::new().openai(json!({ "type": "checkout" }))
}

fn main() {}
