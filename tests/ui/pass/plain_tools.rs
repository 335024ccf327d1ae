//! Descriptions (doc comment and key), names, toolsets, user-facing text, plain fns, bare and
//! aliased returns, optional context, `State<T>` and `NoInput`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct BalanceArgs {
    /// The card number.
    card: String,
}

#[derive(Serialize, JsonSchema)]
struct Balance {
    card: String,
    cents: u64,
}

/// Balance of one card. Use when the user asks how much is left on a card.
#[tool(
    effect = read,
    name = "card_balance",
    toolset = "wallet",
    title = "Card balance",
    summary = "Shows how much is left on a card",
    i18n(en(title = "Card balance", summary = "Shows the balance"), zh_cn(title = "余额")),
)]
async fn balance(args: BalanceArgs, ctx: ToolContext) -> Result<Balance, ToolError> {
    let _ = ctx.call_id();
    Ok(Balance {
        card: args.card,
        cents: 1200,
    })
}

/// A type alias of `Result` must still be treated as a `Result`, not as the output itself.
type R<T> = Result<T, ToolError>;

/// A trait of the user's with a `tag` method for every type, in scope where the tools are: the
/// expansion's dispatch on the return type must not pick it up.
#[allow(dead_code)]
trait Tag {
    fn tag(&self) -> u8 {
        0
    }
}
impl<T: ?Sized> Tag for T {}

#[tool(effect = read, description = "Fails on purpose when asked to, through an aliased `Result`.")]
fn aliased(args: BalanceArgs) -> R<Balance> {
    if args.card == "bad" {
        return Err(ToolError::new("no such card"));
    }
    Ok(Balance {
        card: args.card,
        cents: 0,
    })
}

/// The current time as a bare value: a plain (not `async`) fn without context.
#[tool(effect = read)]
fn now(_: NoInput) -> u64 {
    42
}

struct Prices {
    cents_per_unit: u64,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct QuoteArgs {
    units: u64,
}

/// Quotes a price from application state.
#[tool(effect = read)]
async fn quote(args: QuoteArgs, prices: State<Prices>, _ctx: ToolContext) -> u64 {
    args.units * prices.cents_per_unit
}

/// Counts units: a plain (not `async`) fn taking the call's context.
#[tool(effect = read)]
fn units(args: QuoteArgs, ctx: ToolContext) -> Result<u64, ToolError> {
    let _ = ctx.call_id();
    Ok(args.units)
}

/// Quotes from two prices, with more context parameters than the shared call adapters take.
#[tool(effect = read)]
async fn quote_twice(
    args: QuoteArgs,
    first: State<Prices>,
    second: State<Prices>,
    _ctx: ToolContext,
    _again: ToolContext,
) -> u64 {
    args.units * (first.cents_per_unit + second.cents_per_unit)
}

/// A tool whose argument struct is empty.
#[derive(Deserialize, JsonSchema, ToolInput)]
struct Empty {}

/// Does nothing and returns unit.
#[tool(effect = write)]
async fn nothing(_: Empty) {}

fn main() {
    let registry = Registry::from_tools([
        balance::TOOL,
        aliased::TOOL,
        now::TOOL,
        quote::TOOL,
        units::TOOL,
        quote_twice::TOOL,
        nothing::TOOL,
    ])
    .unwrap();

    let tool = registry.get("wallet__card_balance").unwrap();
    let d = tool.descriptor().unwrap();
    assert_eq!(tool.id(), "wallet.card_balance");
    assert_eq!(d.fn_name, "balance");
    assert_eq!(d.title, Some("Card balance"));
    assert_eq!(d.summary, Some("Shows how much is left on a card"));
    assert_eq!(d.i18n.len(), 2);
    assert_eq!(d.i18n[1].locale, "zh_cn");
    assert_eq!(d.i18n[1].summary, None);
    assert!(d.description.starts_with("Balance of one card."));
    assert_eq!(d.effect, toolwright::Effect::Read);

    let aliased = registry.get("aliased").unwrap().descriptor().unwrap();
    assert_eq!(
        aliased.description,
        "Fails on purpose when asked to, through an aliased `Result`."
    );
    assert_eq!(quote::TOOL.requirements.len(), 2);
    assert!(quote::TOOL.requirements[0].is_some());
    assert!(quote::TOOL.requirements[1].is_none());
    assert_eq!(quote_twice::TOOL.requirements.len(), 4);

    // The fn itself is untouched and callable.
    assert_eq!(now(NoInput {}), 42);

    futures_executor::block_on(async {
        let out = registry
            .call("wallet__card_balance", serde_json::json!({ "card": "c1" }))
            .await
            .unwrap();
        assert_eq!(out.value["cents"], 1200);
        let err = registry
            .call("aliased", serde_json::json!({ "card": "bad" }))
            .await
            .unwrap_err();
        assert_eq!(err.message(), "no such card");
        let out = registry.call("now", serde_json::json!({})).await.unwrap();
        assert_eq!(out.value, 42);
        let out = registry
            .call("units", serde_json::json!({ "units": 3 }))
            .await
            .unwrap();
        assert_eq!(out.value, 3);
        let out = registry
            .call("nothing", serde_json::json!({}))
            .await
            .unwrap();
        assert_eq!(out.value, serde_json::Value::Null);
    });
}
