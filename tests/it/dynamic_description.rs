//! Descriptions computed from host services (`#[tool(description = path)]`): the no-services
//! text at collection, the host's text once the registry is described, lists cached per registry,
//! and description fns that fail refused with the tool's name.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use toolwright::prelude::*;
use toolwright::registry::{Audience, Format, RegistryProblem};

/// The components this device can render: a service the host installs.
struct Catalog {
    components: Vec<&'static str>,
}

const FALLBACK: &str = "Show a native UI to the user.";
const WITH_CATALOG: &str = "Show a native UI to the user. Components:\n- card\n- map";

fn describe_catalog(services: &Services<'_>) -> String {
    match services.get::<Catalog>() {
        Some(catalog) => {
            let mut text = format!("{FALLBACK} Components:");
            for component in &catalog.components {
                text.push_str("\n- ");
                text.push_str(component);
            }
            text
        }
        None => FALLBACK.to_owned(),
    }
}

fn describe_places(services: &Services<'_>) -> String {
    let components = services.get::<Catalog>().map_or(0, |c| c.components.len());
    format!("Find places to show with one of {components} components.")
}

fn blank_with_a_catalog(services: &Services<'_>) -> String {
    match services.get::<Catalog>() {
        Some(_) => "   ".to_owned(),
        None => FALLBACK.to_owned(),
    }
}

fn panics_with_a_catalog(services: &Services<'_>) -> String {
    if services.get::<Catalog>().is_some() {
        panic!("the catalog is locked");
    }
    FALLBACK.to_owned()
}

fn panics_without_a_catalog(services: &Services<'_>) -> String {
    let catalog = services.get::<Catalog>().expect("a catalog");
    catalog.components.join(", ")
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ShowArgs {
    /// The component to show.
    component: String,
}

/// Read by people; the model sees the text `describe_catalog` computes.
#[tool(effect = read, description = describe_catalog, ends_turn)]
async fn show_ui(args: ShowArgs) -> String {
    args.component
}

#[tool(effect = read, description = describe_places, deferred)]
async fn find_places(args: ShowArgs) -> String {
    args.component
}

/// Reads the clock. A tool with a literal description, shared as it is.
#[tool(effect = read)]
async fn clock(_: NoInput) -> u64 {
    42
}

#[tool(effect = read, description = blank_with_a_catalog)]
async fn blank_ui(args: ShowArgs) -> String {
    args.component
}

#[tool(effect = read, description = panics_with_a_catalog)]
async fn fragile_ui(args: ShowArgs) -> String {
    args.component
}

#[tool(effect = read, description = panics_without_a_catalog)]
async fn needy_ui(args: ShowArgs) -> String {
    args.component
}

fn host() -> HashMap<TypeId, Arc<dyn Any + Send + Sync>> {
    let mut states: HashMap<TypeId, Arc<dyn Any + Send + Sync>> = HashMap::new();
    let catalog = Catalog {
        components: vec!["card", "map"],
    };
    states.insert(TypeId::of::<Catalog>(), Arc::new(catalog));
    states
}

fn registry() -> Registry {
    Registry::from_tools([show_ui::TOOL, find_places::TOOL, clock::TOOL]).unwrap()
}

/// The description of tool `name` in `registry`'s list for the model in `format`.
fn listed(registry: &Registry, format: Format, name: &str) -> String {
    let list: Value = serde_json::from_str(registry.list(Audience::Model, format).json()).unwrap();
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["name"] == name || entry["function"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the {format:?} list: {list}"));
    entry
        .get("description")
        .or_else(|| entry["function"].get("description"))
        .and_then(Value::as_str)
        .unwrap()
        .to_owned()
}

/// What the model's list in `format` says of `show_ui` when its fn returned `text`: MCP
/// descriptions never carry the `ends_turn` sentence.
fn model_text(text: &str, format: Format) -> String {
    match format {
        Format::Mcp => text.to_owned(),
        _ => format!("{text} Calling this tool ends your turn."),
    }
}

const FORMATS: [Format; 5] = Format::ALL;

#[test]
fn collection_uses_the_text_for_no_services() {
    let registry = registry();
    let tool = registry.get("show_ui").unwrap();
    assert_eq!(tool.description(), FALLBACK);
    // The descriptor keeps the doc comment; the fn is what the model's text comes from.
    let descriptor = tool.descriptor().unwrap();
    assert!(descriptor.description.starts_with("Read by people"));
    assert!(descriptor.describe.is_some());
    assert_eq!(find_places::TOOL.description, "");
    assert_eq!(
        registry.get("find_places").unwrap().description(),
        "Find places to show with one of 0 components."
    );
    for format in FORMATS {
        assert_eq!(
            listed(&registry, format, "show_ui"),
            model_text(FALLBACK, format),
            "{format:?}"
        );
    }
}

#[test]
fn describing_computes_the_text_from_the_hosts_services() {
    let states = host();
    let described = registry().describe(&Services::new(&states)).unwrap();
    let tool = described.get("show_ui").unwrap();
    assert_eq!(tool.description(), WITH_CATALOG);
    assert_eq!(
        tool.description_for(Audience::Model),
        format!("{WITH_CATALOG} Calling this tool ends your turn.")
    );
    for format in FORMATS {
        assert_eq!(
            listed(&described, format, "show_ui"),
            model_text(WITH_CATALOG, format),
            "{format:?}"
        );
    }
    // The user's MCP list has the computed text too, without the turn sentence.
    let users: Value =
        serde_json::from_str(described.list(Audience::User, Format::Mcp).json()).unwrap();
    let entry = users
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "show_ui")
        .unwrap();
    assert_eq!(entry["description"], WITH_CATALOG);
    // Search reads the computed text of deferred tools.
    let found = described.search("2 components", Audience::Model);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name(), "find_places");
    assert!(
        registry().search("2 components", Audience::Model)[0]
            .description()
            .contains("0 components")
    );
    assert_eq!(
        described.get("clock").unwrap().description(),
        "Reads the clock. A tool with a literal description, shared as it is."
    );
}

#[test]
fn the_original_registry_and_its_lists_are_unchanged() {
    let registry = registry();
    let before: Vec<String> = FORMATS
        .iter()
        .map(|&format| registry.list(Audience::Model, format).json().to_owned())
        .collect();
    let states = host();
    let described = registry.describe(&Services::new(&states)).unwrap();
    assert!(!described.same(&registry));
    // The new registry builds its own lists.
    for (format, before) in FORMATS.iter().zip(&before) {
        let after = described.list(Audience::Model, *format).json();
        assert_ne!(after, before, "{format:?}");
        assert!(after.contains("card"), "{format:?}");
    }
    let shared = described
        .tools()
        .iter()
        .zip(registry.tools())
        .filter(|(a, b)| Arc::ptr_eq(a, b))
        .count();
    assert_eq!(shared, 1, "only `clock` has no description fn");
    for (format, before) in FORMATS.iter().zip(&before) {
        assert_eq!(registry.list(Audience::Model, *format).json(), before);
    }
    assert_eq!(registry.get("show_ui").unwrap().description(), FALLBACK);
    // Describing without services gives back the collection's text.
    let again = described.describe(&Services::none()).unwrap();
    assert_eq!(again.get("show_ui").unwrap().description(), FALLBACK);
}

#[test]
fn description_fns_that_return_nothing_or_panic_are_refused_by_name() {
    let registry = Registry::from_tools([blank_ui::TOOL, fragile_ui::TOOL, clock::TOOL]).unwrap();
    let states = host();
    let error = registry.describe(&Services::new(&states)).unwrap_err();
    let messages: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].starts_with("tool `blank_ui` at "),
        "{messages:?}"
    );
    assert!(
        messages[0].contains("dynamic_description.rs"),
        "{messages:?}"
    );
    assert!(
        messages[0].ends_with(
            "its description fn returned empty text; the model needs a description: return what the tool does, when to use it and what it returns"
        ),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with("tool `fragile_ui` at "),
        "{messages:?}"
    );
    assert!(
        messages[1].contains(
            "its description fn panicked: the catalog is locked; return a fallback description"
        ),
        "{messages:?}"
    );
    assert!(matches!(
        &error.problems[0],
        RegistryProblem::Description { tool, .. } if tool == "blank_ui"
    ));

    // A fn that needs its service fails at collection, where there is none.
    let error = Registry::from_tools([needy_ui::TOOL]).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("tool `needy_ui` at "), "{message}");
    assert!(
        message.contains("panicked when called without host services"),
        "{message}"
    );
    assert!(
        message.contains("return a fallback description when `services.get::<T>()` is `None`"),
        "{message}"
    );
}

#[tokio::test]
async fn a_runtime_describes_its_tools_with_the_services_it_was_given() {
    use toolwright::runtime::{RuntimeError, SessionSpec};

    use crate::support::{builder, builder_over};
    let runtime = builder_over(registry())
        .state(Catalog {
            components: vec!["card", "map"],
        })
        .build()
        .unwrap();
    assert_eq!(
        runtime.registry().get("show_ui").unwrap().description(),
        WITH_CATALOG
    );
    // What a turn hands the model is the cached list of the described registry.
    let turn = runtime
        .open_session(SessionSpec::new("s"))
        .await
        .unwrap()
        .begin_turn(None, toolwright::Caller::Model)
        .await
        .unwrap();
    let list = turn.tool_list(Format::Anthropic).await.unwrap();
    assert!(list.contains("Components:\\n- card\\n- map"), "{list}");
    // Without the service, the fallback text.
    let bare = builder_over(registry()).build().unwrap();
    assert_eq!(
        bare.registry().get("show_ui").unwrap().description(),
        FALLBACK
    );
    // A description fn that fails on the host's services fails the build, naming the tool.
    let error = builder([fragile_ui::TOOL])
        .state(Catalog {
            components: vec!["card"],
        })
        .build()
        .unwrap_err();
    assert!(matches!(error, RuntimeError::Registry(_)), "{error}");
    assert!(
        error.to_string().contains("tool `fragile_ui` at "),
        "{error}"
    );
}
