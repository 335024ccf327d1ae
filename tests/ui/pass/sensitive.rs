//! `#[toolwright(sensitive)]` with `rename_all`: the JSON and Rust names recorded, the JSON
//! ones in the descriptor, and templates free to name the other fields.

#![deny(unused_qualifications)]

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
#[serde(rename_all = "camelCase")]
struct Unlock {
    door_id: String,
    #[toolwright(sensitive)]
    pin: String,
    #[serde(rename = "key")]
    #[toolwright(sensitive)]
    api_key: String,
}

/// Unlocks a door.
#[tool(
    effect = write,
    label(start = "Unlocking {door_id}", complete = "Unlocked {door_id}"),
    approval(request = always, prompt = "Unlock door {door_id}?"),
)]
async fn unlock(args: Unlock) -> String {
    format!("{} {} {}", args.door_id, args.pin.len(), args.api_key.len())
}

/// Unlocks doors one after another.
#[tool(effect = write, workflow = serve, label(start = "Unlocking {door_id}"))]
async fn unlocks(mut calls: ServeCalls<Unlock, String>, ctx: WorkflowContext) {
    let _ = ctx.call_id();
    while let Some(call) = calls.next().await {
        let reply = call.input.door_id.clone();
        call.reply(reply);
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Plain {
    text: String,
}

fn main() {
    assert_eq!(<Unlock as ToolInput>::SENSITIVE, ["pin", "key"]);
    assert_eq!(<Unlock as ToolInput>::SENSITIVE_FIELDS, ["pin", "api_key"]);
    assert!(<Plain as ToolInput>::SENSITIVE.is_empty());
    assert_eq!(unlock::TOOL.input.sensitive, ["pin", "key"]);
    assert_eq!(unlocks::TOOL.input.sensitive, ["pin", "key"]);

    let registry = Registry::from_tools([unlock::TOOL, unlocks::TOOL]).unwrap();
    let input = serde_json::json!({ "doorId": "d1", "pin": "1234", "key": "k" });
    assert_eq!(
        registry.get("unlock").unwrap().start_label(&input),
        "Unlocking d1"
    );
}
