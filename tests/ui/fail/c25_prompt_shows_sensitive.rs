use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
#[serde(rename_all = "camelCase")]
struct Charge {
    amount_cents: u64,
    #[toolwright(sensitive)]
    card_number: String,
}

/// Charges a card.
#[tool(
    effect = money,
    label(complete = "Charged {amount_cents} cents"),
    approval(request = always, prompt = "Charge {amount_cents} cents to card {card_number}?"),
)]
async fn charge(args: Charge) -> String {
    format!("{} {}", args.amount_cents, args.card_number.len())
}

fn main() {}
