//! The seeds' tools as the registry collected them: for each tool its id, model name, effect,
//! flags, approval policy, user-facing text, description and input schema, then the size of each
//! audience's tool list.
//!
//! ```sh
//! cargo run --example catalog
//! ```

use std::process::ExitCode;

use toolwright::Registry;
use toolwright::approval::{ApprovalKey, ApprovalSpec};
use toolwright::registry::{Audience, EndsTurn, Format, Tool, ToolDescriptor, ToolKind};

#[path = "seed/mod.rs"]
mod seed;

fn main() -> ExitCode {
    let registry = match Registry::collect() {
        Ok(registry) => registry,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    println!("{} tools\n", registry.tools().len());
    for tool in registry.tools() {
        print_tool(tool);
    }
    print_lists(&registry);
    ExitCode::SUCCESS
}

fn print_tool(tool: &Tool) {
    // Collected tools are this program's `#[tool]`s: none is remote here.
    let Some(d) = tool.descriptor() else { return };
    println!("━━ {} ━━", tool.id());
    field("model name", tool.name());
    field("effect", d.effect.as_str());
    field("flags", &join_or(flags(d), "none"));
    field("approval", &approval(d.approval.as_ref()));
    if let Some(title) = d.title {
        field("title", &with_summary(title, d.summary));
    }
    for locale in d.i18n {
        field(
            &format!("title ({})", locale.locale),
            &with_summary(locale.title.unwrap_or("-"), locale.summary),
        );
    }
    field("labels", &join_or(labels(d), "none (humanized name)"));
    let states: Vec<&str> = d
        .requirements
        .iter()
        .flatten()
        .map(|r| (r.type_name)())
        .collect();
    if !states.is_empty() {
        field("state", &states.join(", "));
    }
    println!("  description");
    print_indented(&tool.description_for(Audience::Model));
    println!("  input schema");
    let schema = serde_json::to_string_pretty(tool.input_schema())
        .unwrap_or_else(|error| format!("(cannot print: {error})"));
    print_indented(&schema);
    println!();
}

fn field(name: &str, value: &str) {
    println!("  {name:<14}{value}");
}

fn print_indented(text: &str) {
    for line in text.lines() {
        println!("      {line}");
    }
}

fn with_summary(title: &str, summary: Option<&str>) -> String {
    match summary {
        Some(summary) => format!("{title} — {summary}"),
        None => title.to_owned(),
    }
}

fn join_or(items: Vec<String>, empty: &str) -> String {
    if items.is_empty() {
        empty.to_owned()
    } else {
        items.join(", ")
    }
}

fn flags(d: &ToolDescriptor) -> Vec<String> {
    let kind = match d.kind {
        ToolKind::Plain => None,
        ToolKind::Durable => Some("durable".to_owned()),
        ToolKind::Workflow(entry) => Some(format!("workflow = {}", entry.as_str())),
    };
    let switches = [
        (d.untrusted, "untrusted"),
        (d.user_only, "user_only"),
        (d.deferred, "deferred"),
        (!d.subagents, "subagents = false"),
        (d.ends_turn == EndsTurn::Always, "ends_turn"),
        (d.ends_turn == EndsTurn::ByOutput, "ends_turn (by output)"),
        (d.output_schema.is_some(), "output_schema"),
        (d.projected, "projected (to_model_output)"),
        (d.enabled.is_some(), "conditional (enabled)"),
    ];
    kind.into_iter()
        .chain(
            switches
                .into_iter()
                .filter(|(on, _)| *on)
                .map(|(_, name)| name.to_owned()),
        )
        .collect()
}

fn approval(spec: Option<&ApprovalSpec>) -> String {
    let Some(spec) = spec else {
        return "never (default)".to_owned();
    };
    let mut parts = Vec::new();
    if spec.prompt.is_some() {
        parts.push("prompt");
    }
    if spec.response.is_some() {
        parts.push("response policy");
    }
    match spec.key {
        ApprovalKey::ToolName => {}
        ApprovalKey::Input => parts.push("key: input digest"),
        ApprovalKey::Custom(_) => parts.push("key: fn of the input"),
    }
    let name = match spec.request.name() {
        "custom" => "custom policy fn",
        name => name,
    };
    if parts.is_empty() {
        name.to_owned()
    } else {
        format!("{name} ({})", parts.join(", "))
    }
}

fn labels(d: &ToolDescriptor) -> Vec<String> {
    [
        (d.label.start.is_some(), "start"),
        (d.label.delta.is_some(), "delta"),
        (d.label.complete, "complete"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| name.to_owned())
    .collect()
}

fn print_lists(registry: &Registry) {
    println!("━━ tool lists ━━");
    for audience in Audience::ALL {
        let list = registry.list(audience, Format::Mcp);
        let meta: Vec<&str> = list
            .entries()
            .iter()
            .filter(|entry| entry.tool.is_none())
            .map(|entry| entry.name.as_str())
            .collect();
        let tools = list.entries().len() - meta.len();
        let extra = if meta.is_empty() {
            String::new()
        } else {
            format!(" + {} meta-tools ({})", meta.len(), meta.join(", "))
        };
        field(
            &format!("{audience:?}").to_lowercase(),
            &format!("{tools} tools{extra}"),
        );
    }
    let notes = registry.list(Audience::Model, Format::OpenAiStrict).notes();
    if !notes.is_empty() {
        println!("\n━━ OpenAI strict mode: exported non-strict ━━");
        for note in notes {
            println!("  {note}");
        }
    }
}
