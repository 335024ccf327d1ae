//! Every effect, `untrusted`, `user_only`, `deferred`, `subagents = false`, `enabled` and
//! `annotations`.

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    text: String,
}

/// Reads a web page (third-party text).
#[tool(effect = read, untrusted, annotations(open_world = true))]
async fn fetch_page(args: Args) -> String {
    args.text
}

/// Adds a to-do item. Found through `tool_search`.
#[tool(effect = write, deferred, subagents = false)]
async fn add_todo(args: Args) -> String {
    args.text
}

/// Recharges a card.
#[tool(effect = money, approval = always, annotations(read_only = false, destructive = true, idempotent = false))]
async fn recharge(args: Args) -> String {
    args.text
}

/// Posts a reply in public. Only the user may call it; their call is the consent.
#[tool(effect = public, user_only)]
async fn post_reply(args: Args) -> String {
    args.text
}

fn beta_enabled(cx: &EnabledContext<'_>) -> bool {
    cx.flag("beta")
}

/// A tool offered only while the session's `beta` flag is set.
#[tool(effect = read, enabled = beta_enabled, untrusted = false, deferred = false)]
async fn beta_search(args: Args) -> String {
    args.text
}

fn main() {
    use toolwright::Effect;

    let registry = Registry::from_tools([
        fetch_page::TOOL,
        add_todo::TOOL,
        recharge::TOOL,
        post_reply::TOOL,
        beta_search::TOOL,
    ])
    .unwrap();
    let d = |name: &str| registry.get(name).unwrap().descriptor().unwrap();

    assert_eq!(d("fetch_page").effect, Effect::Read);
    assert!(d("fetch_page").untrusted);
    assert_eq!(
        d("fetch_page").effective_annotations().open_world,
        Some(true)
    );
    assert_eq!(d("add_todo").effect, Effect::Write);
    assert!(d("add_todo").deferred);
    assert!(!d("add_todo").subagents);
    assert_eq!(d("recharge").effect, Effect::Money);
    assert_eq!(d("recharge").annotations.idempotent, Some(false));
    assert_eq!(d("post_reply").effect, Effect::Public);
    assert!(d("post_reply").user_only);
    assert!(d("post_reply").approval.is_none());
    assert!(d("beta_search").enabled.is_some());
    assert!(!d("beta_search").untrusted);
    assert!(!d("beta_search").deferred);
    assert!(d("beta_search").subagents);
}
