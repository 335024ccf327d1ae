//! `description = path`: a description computed from host services when the tool list is built.

#![deny(unused_qualifications)]

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ShowArgs {
    /// The component to show.
    component: String,
}

/// The components the device can render: a host service.
struct Catalog {
    components: Vec<&'static str>,
}

mod describe {
    use toolwright::Services;

    /// A fallback without a host; the catalog with one.
    pub fn native_ui(services: &Services<'_>) -> String {
        let mut text = String::from("Show a native UI.");
        if let Some(catalog) = services.get::<super::Catalog>() {
            text.push_str(" Components:\n");
            text.push_str(&catalog.components.join("\n"));
        }
        text
    }
}

/// Kept in the descriptor for readers of the code; the model sees what the fn computes.
#[tool(effect = read, description = describe::native_ui)]
async fn show_ui(args: ShowArgs) -> String {
    args.component
}

#[tool(effect = read, description = self::describe::native_ui, name = "show_ui_again")]
fn show_ui_without_doc(args: ShowArgs) -> String {
    args.component
}

fn main() {
    let d = show_ui::TOOL;
    assert!(d.describe.is_some());
    assert!(d.description.starts_with("Kept in the descriptor"));
    assert_eq!(show_ui_without_doc::TOOL.description, "");

    let registry = Registry::from_tools([show_ui::TOOL, show_ui_without_doc::TOOL]).unwrap();
    assert_eq!(
        registry.get("show_ui").unwrap().description(),
        "Show a native UI."
    );

    let mut states: HashMap<TypeId, Arc<dyn Any + Send + Sync>> = HashMap::new();
    states.insert(
        TypeId::of::<Catalog>(),
        Arc::new(Catalog {
            components: vec!["card", "list"],
        }),
    );
    let described = registry.describe(&Services::new(&states)).unwrap();
    assert_eq!(
        described.get("show_ui_again").unwrap().description(),
        "Show a native UI. Components:\ncard\nlist"
    );
}
