//! `crate = path`: the facade re-exported under another name.

mod framework {
    pub use ::toolwright as tw;
}

use framework::tw;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema, tw::ToolInput)]
#[toolwright(crate = framework::tw)]
struct Args {
    text: String,
}

/// Echoes its input.
#[tw::tool(crate = framework::tw, effect = read)]
async fn echo(args: Args) -> String {
    args.text
}

fn main() {
    let registry = tw::Registry::from_tools([echo::TOOL]).unwrap();
    assert_eq!(
        registry.get("echo").unwrap().descriptor().unwrap().fn_name,
        "echo"
    );
}
