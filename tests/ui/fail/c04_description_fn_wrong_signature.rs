use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    component: String,
}

struct Catalog {
    components: Vec<String>,
}

/// Takes the service itself instead of the host's services.
fn describe_catalog(catalog: &Catalog) -> String {
    catalog.components.join(", ")
}

/// Returns borrowed text instead of a `String`.
fn describe_static(_: &Services<'_>) -> &'static str {
    "Show a native UI."
}

#[tool(effect = read, description = describe_catalog)]
async fn show_ui(args: Args) -> String {
    args.component
}

#[tool(effect = read, description = describe_static)]
async fn show_static_ui(args: Args) -> String {
    args.component
}

#[tool(effect = read, description = |_| String::from("Show a native UI."))]
async fn show_closure_ui(args: Args) -> String {
    args.component
}

fn main() {}
