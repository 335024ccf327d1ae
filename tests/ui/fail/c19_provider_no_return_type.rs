use toolwright::prelude::*;

/// Searches the web for current information.
#[tool(provider, effect = read, untrusted)]
fn web_search() {}

fn main() {}
