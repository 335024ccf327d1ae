use serde_json::{Value, json};
use toolwright::prelude::*;

/// Searches the web for current information.
#[tool(provider, effect = read, untrusted)]
fn web_search() -> Value {
    json!({ "type": "web_search" })
}

fn main() {}
