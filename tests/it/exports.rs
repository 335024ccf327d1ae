//! Provider exports: OpenAI (plain and strict), Anthropic and MCP tool objects. Each format is
//! snapshotted for a representative set of tools and checked in code against the provider's
//! documented constraints:
//!
//! - OpenAI function tools: `name` matches `^[a-zA-Z0-9_-]{1,64}$`; `parameters` is a JSON
//!   Schema object. In strict mode every object sets `additionalProperties: false` and lists
//!   every property in `required` (optional ones accept `null`), the root is an object (not
//!   `anyOf`), a `$ref` has no sibling keywords, and only the documented subset of keywords
//!   appears (`pattern`, `format` from a fixed list, `multipleOf`, `minimum`, `maximum`,
//!   `exclusiveMinimum`, `exclusiveMaximum`, `minItems`, `maxItems`, besides the structural
//!   ones).
//! - Anthropic tools: `name` matches `^[a-zA-Z0-9_-]{1,64}$`; `input_schema` is an object schema.
//! - MCP tools (2025-11-25): `name` of 1 to 128 characters from `A-Z a-z 0-9 _ - .`;
//!   `inputSchema` and `outputSchema` are JSON Schemas whose root type is `object`, in 2020-12
//!   when no `$schema` is given; `annotations` carries boolean hints and a title.
//! - Provider-native tools (`#[tool(provider)]`): the OpenAI entry is the tool's `openai`
//!   configuration as given; the Anthropic entry its `anthropic` configuration, with a `name`
//!   (matching `^[a-zA-Z0-9_-]{1,64}$`) equal to the tool's; MCP never lists them. A tool without
//!   a configuration for a provider is left out of its list with a note.
//!
//! Every exported schema must also compile as JSON Schema 2020-12.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::export::strip_strict_nulls;
use toolwright::prelude::*;
use toolwright::registry::{Audience, Format};

// ---------------------------------------------------------------------------------------------
// The tools.

#[derive(Deserialize, JsonSchema, ToolInput)]
#[allow(dead_code)] // reason: the fields matter to the schema, not to the body
struct ReadLogsArgs {
    /// Service name, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
    /// Time window to search.
    #[serde(default)]
    window: Window,
    /// Lowest level to include.
    #[serde(default)]
    level: Level,
    /// Most lines to return.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 200))]
    limit: u32,
}

fn default_limit() -> u32 {
    50
}

#[derive(Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
enum Window {
    #[serde(rename = "5m")]
    FiveMinutes,
    #[default]
    #[serde(rename = "1h")]
    OneHour,
    #[serde(rename = "24h")]
    OneDay,
}

#[derive(Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Level {
    #[default]
    Error,
    Warn,
    All,
}

#[derive(Serialize, JsonSchema)]
struct Logs {
    /// Matching lines, newest first.
    lines: Vec<String>,
    /// Whether more lines matched than `limit`.
    truncated: bool,
}

/// Searches one service's recent log lines. Use to investigate a specific failure; not for
/// statistics (that is query_metrics).
#[tool(effect = read, title = "Read logs", output_schema)]
async fn read_logs(args: ReadLogsArgs) -> Result<Logs, ToolError> {
    Ok(Logs {
        lines: vec![args.service],
        truncated: false,
    })
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct AnswerArgs {
    /// The answer, in Markdown.
    answer: String,
}

/// Gives the final answer to the user.
#[tool(effect = read, ends_turn)]
async fn finish_answer(args: AnswerArgs) -> String {
    args.answer
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RunbookArgs {
    /// The alert name, e.g. HighErrorRate.
    alert: String,
}

/// Finds the runbook for an alert.
#[tool(effect = read, deferred)]
async fn find_runbook(args: RunbookArgs) -> String {
    args.alert
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PlanRequest {
    /// What to plan or change in the plan.
    request: String,
}

#[derive(Clone, Serialize, JsonSchema)]
struct Plan {
    steps: Vec<String>,
}

/// Drafts a release plan and revises it on request.
#[tool(effect = write, workflow = serve)]
async fn plan_release(
    mut calls: ServeCalls<PlanRequest, Plan>,
    _ctx: WorkflowContext,
) -> Result<(), ToolError> {
    let mut steps = Vec::new();
    while let Some(call) = calls.next().await {
        steps.push(call.input.request.clone());
        call.reply(Plan {
            steps: steps.clone(),
        });
    }
    Ok(())
}

#[derive(Deserialize, JsonSchema, ToolInput)]
#[allow(dead_code)] // reason: the fields matter to the schema, not to the body
struct ProbeArgs {
    /// Where to probe.
    target: Target,
    /// Only report failures matching this filter.
    filter: Option<Filter>,
    /// A note for the change log.
    note: Option<String>,
    /// Seconds between probes.
    #[serde(default = "default_interval")]
    #[schemars(range(min = 10))]
    interval_s: u32,
    /// Extra checks to run on each probe.
    #[serde(default)]
    checks: Vec<Check>,
}

fn default_interval() -> u32 {
    60
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Target {
    /// Host name.
    host: String,
    /// TCP port.
    #[serde(default = "default_port")]
    port: u16,
}

fn default_port() -> u16 {
    443
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Filter {
    /// Text the failure message contains.
    contains: String,
    /// Lowest level to report.
    #[serde(default = "default_severity")]
    severity: Level,
}

fn default_severity() -> Level {
    Level::Warn
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[allow(dead_code)]
struct Check {
    /// Check name.
    name: String,
    /// Give up after this many milliseconds.
    #[serde(default = "default_timeout")]
    timeout_ms: u32,
}

fn default_timeout() -> u32 {
    2000
}

/// Configures a synthetic probe against one host.
#[tool(effect = write)]
async fn configure_probe(args: ProbeArgs) -> String {
    args.target.host
}

#[derive(Deserialize, JsonSchema, ToolInput)]
#[allow(dead_code)]
struct TagArgs {
    /// Resource ids.
    ids: Vec<String>,
    /// Tags to set, by key.
    tags: HashMap<String, String>,
}

/// Sets tags on cloud resources.
#[tool(effect = write)]
async fn tag_resources(args: TagArgs) -> usize {
    args.ids.len()
}

#[derive(Deserialize, JsonSchema, ToolInput)]
#[allow(dead_code)]
struct PayArgs {
    /// Invoice number.
    invoice: String,
    /// Amount in cents.
    amount_cents: u64,
}

/// Pays an invoice from the company account.
#[tool(effect = money, approval = always)]
async fn pay_invoice(args: PayArgs) -> String {
    args.invoice
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PostArgs {
    /// The text to post.
    #[schemars(length(max = 280))]
    text: String,
}

/// Posts a status update on the public status page.
#[tool(effect = public, approval = once)]
async fn post_status(args: PostArgs) -> String {
    args.text
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PurgeArgs {
    /// Path prefix to purge, e.g. /assets/.
    path: String,
}

/// Purges the CDN cache for a path prefix.
#[tool(
    effect = write,
    annotations(destructive = true, idempotent = true, open_world = true)
)]
async fn purge_cdn(args: PurgeArgs) -> String {
    args.path
}

fn registry() -> Registry {
    Registry::from_tools([
        read_logs::TOOL,
        finish_answer::TOOL,
        find_runbook::TOOL,
        plan_release::TOOL,
        configure_probe::TOOL,
        tag_resources::TOOL,
        pay_invoice::TOOL,
        post_status::TOOL,
        purge_cdn::TOOL,
    ])
    .unwrap()
}

const FORMATS: [Format; 5] = Format::ALL;

fn list(registry: &Registry, audience: Audience, format: Format) -> Vec<Value> {
    serde_json::from_str(registry.list(audience, format).json()).unwrap()
}

/// The exported object of tool `name` in `format` for `audience`.
fn exported(registry: &Registry, audience: Audience, format: Format, name: &str) -> Value {
    list(registry, audience, format)
        .into_iter()
        .find(|t| tool_name(t, format) == name)
        .unwrap_or_else(|| panic!("{name} not in the {format:?} list for {audience:?}"))
}

fn tool_name(tool: &Value, format: Format) -> &str {
    let pointer = match format {
        Format::OpenAi | Format::OpenAiStrict => "/function/name",
        Format::OpenAiResponses | Format::Anthropic | Format::Mcp => "/name",
    };
    tool.pointer(pointer).and_then(Value::as_str).unwrap()
}

fn description(tool: &Value, format: Format) -> &str {
    let pointer = match format {
        Format::OpenAi | Format::OpenAiStrict => "/function/description",
        Format::OpenAiResponses | Format::Anthropic | Format::Mcp => "/description",
    };
    tool.pointer(pointer).and_then(Value::as_str).unwrap()
}

fn input_schema(tool: &Value, format: Format) -> &Value {
    let pointer = match format {
        Format::OpenAi | Format::OpenAiStrict => "/function/parameters",
        Format::OpenAiResponses => "/parameters",
        Format::Anthropic => "/input_schema",
        Format::Mcp => "/inputSchema",
    };
    tool.pointer(pointer).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Snapshots.

#[test]
fn openai_snapshot() {
    insta::assert_json_snapshot!("openai", list(&registry(), Audience::Model, Format::OpenAi));
}

#[test]
fn openai_strict_snapshot() {
    let registry = registry();
    let strict = registry.list(Audience::Model, Format::OpenAiStrict);
    insta::assert_json_snapshot!(
        "openai_strict",
        json!({
            "notes": strict.notes(),
            "tools": list(&registry, Audience::Model, Format::OpenAiStrict),
        })
    );
}

#[test]
fn openai_responses_snapshot() {
    let registry = registry();
    let responses = registry.list(Audience::Model, Format::OpenAiResponses);
    insta::assert_json_snapshot!(
        "openai_responses",
        json!({
            "notes": responses.notes(),
            "tools": list(&registry, Audience::Model, Format::OpenAiResponses),
        })
    );
}

#[test]
fn anthropic_snapshot() {
    insta::assert_json_snapshot!(
        "anthropic",
        list(&registry(), Audience::Model, Format::Anthropic)
    );
}

#[test]
fn mcp_snapshot() {
    insta::assert_json_snapshot!("mcp", list(&registry(), Audience::Model, Format::Mcp));
}

// ---------------------------------------------------------------------------------------------
// The providers' documented constraints, for every tool in every list.

/// OpenAI and Anthropic: `^[a-zA-Z0-9_-]{1,64}$`.
fn is_provider_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// MCP 2025-11-25: 1 to 128 characters of `A-Z a-z 0-9 _ - .`.
fn is_mcp_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn assert_object_schema_that_compiles(schema: &Value, what: &str) {
    assert_eq!(
        schema["type"], "object",
        "{what}: the root must be an object"
    );
    assert!(
        schema.get("anyOf").is_none() && schema.get("oneOf").is_none(),
        "{what}"
    );
    assert!(
        schema.get("$schema").is_none(),
        "{what}: `$schema` is dropped"
    );
    if let Err(error) = jsonschema::draft202012::meta::validate(schema) {
        panic!("{what} is not valid JSON Schema 2020-12: {error}\n{schema:#}");
    }
    if let Err(error) = jsonschema::draft202012::new(schema) {
        panic!("{what} does not compile: {error}\n{schema:#}");
    }
}

#[test]
fn every_export_meets_its_providers_constraints() {
    let registry = registry();
    for audience in [Audience::Model, Audience::Subagent, Audience::User] {
        for format in FORMATS {
            let tools = list(&registry, audience, format);
            assert!(!tools.is_empty());
            for tool in &tools {
                let name = tool_name(tool, format);
                let what = format!("{name} ({format:?}, {audience:?})");
                assert!(!description(tool, format).is_empty(), "{what}");
                assert_object_schema_that_compiles(input_schema(tool, format), &what);
                match format {
                    Format::OpenAi | Format::OpenAiStrict => {
                        assert!(is_provider_name(name), "{what}");
                        assert_eq!(tool["type"], "function", "{what}");
                        let keys: Vec<&String> =
                            tool["function"].as_object().unwrap().keys().collect();
                        assert_eq!(
                            keys,
                            ["description", "name", "parameters", "strict"],
                            "{what}"
                        );
                        assert!(tool["function"]["strict"].is_boolean(), "{what}");
                    }
                    Format::OpenAiResponses => {
                        assert!(is_provider_name(name), "{what}");
                        let keys: Vec<&String> = tool.as_object().unwrap().keys().collect();
                        assert_eq!(
                            keys,
                            ["description", "name", "parameters", "strict", "type"],
                            "{what}"
                        );
                        assert_eq!(tool["type"], "function", "{what}");
                        // The Responses API makes a function strict when `strict` is left out.
                        assert!(tool["strict"].is_boolean(), "{what}");
                    }
                    Format::Anthropic => {
                        assert!(is_provider_name(name), "{what}");
                        let keys: Vec<&String> = tool.as_object().unwrap().keys().collect();
                        assert_eq!(keys, ["description", "input_schema", "name"], "{what}");
                    }
                    Format::Mcp => {
                        assert!(is_mcp_name(name), "{what}");
                        if let Some(output) = tool.get("outputSchema") {
                            assert_object_schema_that_compiles(
                                output,
                                &format!("{what} outputSchema"),
                            );
                        }
                        if let Some(title) = tool.get("title") {
                            assert!(title.is_string(), "{what}");
                        }
                        for (key, value) in tool["annotations"].as_object().unwrap() {
                            match key.as_str() {
                                "title" => assert!(value.is_string(), "{what}"),
                                "readOnlyHint" | "destructiveHint" | "idempotentHint"
                                | "openWorldHint" => assert!(value.is_boolean(), "{what}"),
                                other => panic!("{what}: unknown annotation {other}"),
                            }
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAI.

#[test]
fn openai_plain_keeps_the_tool_schema_and_optional_fields() {
    let registry = registry();
    for tool in registry.tools() {
        let Some(exported) = list(&registry, Audience::Model, Format::OpenAi)
            .into_iter()
            .find(|t| tool_name(t, Format::OpenAi) == tool.name())
        else {
            continue;
        };
        assert_eq!(exported["function"]["strict"], false);
        assert_eq!(&exported["function"]["parameters"], tool.input_schema());
    }
    let read_logs = exported(&registry, Audience::Model, Format::OpenAi, "read_logs");
    assert_eq!(
        read_logs["function"]["parameters"]["required"],
        json!(["service"])
    );
    assert_eq!(
        read_logs["function"]["parameters"]["properties"]["limit"]["default"],
        json!(50)
    );
}

/// The keywords OpenAI documents for strict schemas.
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "const",
    "$ref",
    "$defs",
    "description",
    "title",
    "pattern",
    "format",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
];
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

fn assert_strict(schema: &Value, path: &str) {
    let Value::Object(map) = schema else {
        panic!("{path}: strict schemas are objects, found {schema}");
    };
    for key in map.keys() {
        assert!(
            STRICT_KEYWORDS.contains(&key.as_str()),
            "{path}: `{key}` is not supported in strict mode"
        );
    }
    if map.contains_key("$ref") {
        assert_eq!(
            map.len(),
            1,
            "{path}: a `$ref` may not have sibling keywords"
        );
    }
    if let Some(format) = map.get("format") {
        assert!(
            STRICT_FORMATS.contains(&format.as_str().unwrap()),
            "{path}: format {format}"
        );
    }
    let is_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.contains(&json!("object")),
        _ => map.contains_key("properties"),
    };
    if is_object {
        assert_eq!(
            map.get("additionalProperties"),
            Some(&json!(false)),
            "{path}"
        );
        let mut keys: Vec<&str> = map
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut required: Vec<&str> = map["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        keys.sort_unstable();
        required.sort_unstable();
        assert_eq!(
            keys, required,
            "{path}: every property is required in strict mode"
        );
    }
    for keyword in ["properties", "$defs"] {
        if let Some(children) = map.get(keyword).and_then(Value::as_object) {
            for (name, child) in children {
                assert_strict(child, &format!("{path}/{keyword}/{name}"));
            }
        }
    }
    if let Some(items) = map.get("items") {
        assert_strict(items, &format!("{path}/items"));
    }
    if let Some(branches) = map.get("anyOf").and_then(Value::as_array) {
        for (i, branch) in branches.iter().enumerate() {
            assert_strict(branch, &format!("{path}/anyOf/{i}"));
        }
    }
}

#[test]
fn openai_strict_schemas_use_only_what_strict_mode_supports() {
    let registry = registry();
    let tools = list(&registry, Audience::Model, Format::OpenAiStrict);
    let mut strict_names = Vec::new();
    for tool in &tools {
        let name = tool_name(tool, Format::OpenAiStrict);
        if tool["function"]["strict"] == true {
            strict_names.push(name);
            assert_strict(&tool["function"]["parameters"], name);
        }
    }
    assert_eq!(
        strict_names,
        [
            "configure_probe",
            "finish_answer",
            "pay_invoice",
            "plan_release",
            "post_status",
            "purge_cdn",
            "read_logs",
            "tool_search",
            "task_wait",
            "task_cancel"
        ]
    );
}

#[test]
fn openai_strict_says_why_a_tool_cannot_be_strict() {
    let registry = registry();
    let strict = registry.list(Audience::Model, Format::OpenAiStrict);
    assert_eq!(
        strict.notes(),
        [
            "tag_resources: not strict: the object at /tags accepts arbitrary keys (a map); strict mode needs every property named"
        ]
    );
    // It falls back to the plain export.
    let tag = exported(
        &registry,
        Audience::Model,
        Format::OpenAiStrict,
        "tag_resources",
    );
    assert_eq!(tag["function"]["strict"], false);
    assert_eq!(
        &tag["function"]["parameters"],
        registry.get("tag_resources").unwrap().input_schema()
    );
    let reason =
        toolwright::export::openai_strict(registry.get("tag_resources").unwrap(), Audience::Model)
            .unwrap_err();
    assert!(reason.contains("/tags"), "{reason}");
    // `tool_call` takes free-form input, which strict mode cannot express.
    let call = exported(
        &registry,
        Audience::Model,
        Format::OpenAiStrict,
        "tool_call",
    );
    assert_eq!(call["function"]["strict"], false);
}

#[test]
fn openai_responses_is_the_strict_export_flattened() {
    let registry = registry();
    for audience in [Audience::Model, Audience::Subagent, Audience::User] {
        let strict = registry.list(audience, Format::OpenAiStrict);
        let responses = registry.list(audience, Format::OpenAiResponses);
        // Strict where the schema allows it, exactly as the strict export decides, and the
        // same notes for the same reasons.
        assert_eq!(responses.notes(), strict.notes(), "{audience:?}");
        let nested = list(&registry, audience, Format::OpenAiStrict);
        let flat = list(&registry, audience, Format::OpenAiResponses);
        assert_eq!(nested.len(), flat.len());
        for (nested, flat) in nested.iter().zip(&flat) {
            let mut expected = nested["function"].clone();
            expected["type"] = json!("function");
            assert_eq!(flat, &expected, "{audience:?}");
        }
    }
    let tag = exported(
        &registry,
        Audience::Model,
        Format::OpenAiResponses,
        "tag_resources",
    );
    assert_eq!(
        tag["strict"], false,
        "written out: Responses defaults to strict"
    );
}

#[test]
fn openai_strict_moves_unsupported_constraints_into_descriptions() {
    let registry = registry();
    let read_logs = exported(
        &registry,
        Audience::Model,
        Format::OpenAiStrict,
        "read_logs",
    );
    let properties = &read_logs["function"]["parameters"]["properties"];
    assert_eq!(
        properties["service"],
        json!({ "type": "string", "description": "Service name, e.g. payment-api. 1 to 64 characters." })
    );
    assert_eq!(
        properties["limit"],
        json!({
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 200,
            "description": "Most lines to return. Default: 50."
        })
    );
    assert_eq!(
        properties["window"]["description"],
        json!("Time window to search. Default: \"1h\".")
    );
}

fn strict_parameters(registry: &Registry, name: &str) -> Value {
    let tool = exported(registry, Audience::Model, Format::OpenAiStrict, name);
    assert_eq!(tool["function"]["strict"], true, "{name}");
    tool["function"]["parameters"].clone()
}

/// What a model in strict mode sends for `name`: valid against the strict schema, invalid
/// against the tool's own until the `null`s are mapped back, then valid with defaults applied.
fn round_trip(registry: &Registry, name: &str, strict_input: Value) -> Value {
    let strict = strict_parameters(registry, name);
    let validator = jsonschema::draft202012::new(&strict).unwrap();
    if let Err(error) = validator.validate(&strict_input) {
        panic!("{name}: the strict input should match the strict schema: {error}");
    }
    let tool = registry.get(name).unwrap();
    let mut input = strict_input.clone();
    strip_strict_nulls(tool.input_schema(), &mut input);
    tool.validate(input)
        .unwrap_or_else(|error| panic!("{name}: {error}"))
}

#[test]
fn strict_nulls_map_back_to_the_original_schema() {
    let registry = registry();

    let strict_input = json!({ "service": "api", "window": null, "level": null, "limit": null });
    let read_logs = registry.get("read_logs").unwrap();
    let error = read_logs.validate(strict_input.clone()).unwrap_err();
    assert!(
        error.problems.iter().any(|p| p.pointer == "/limit"),
        "without mapping, null is not a u32: {error}"
    );
    assert_eq!(
        round_trip(&registry, "read_logs", strict_input),
        json!({ "service": "api", "window": "1h", "level": "error", "limit": 50 })
    );
    assert_eq!(
        round_trip(
            &registry,
            "read_logs",
            json!({ "service": "api", "window": "24h", "level": null, "limit": 5 })
        ),
        json!({ "service": "api", "window": "24h", "level": "error", "limit": 5 })
    );

    // Nested structs, `Option<Struct>`, arrays of structs: nulls inside are mapped too, and
    // `null` stays where the original schema accepts it (`Option`).
    assert_eq!(
        round_trip(
            &registry,
            "configure_probe",
            json!({
                "target": { "host": "db", "port": null },
                "filter": { "contains": "timeout", "severity": null },
                "note": null,
                "interval_s": null,
                "checks": [{ "name": "tls", "timeout_ms": null }, { "name": "dns", "timeout_ms": 50 }]
            })
        ),
        json!({
            "target": { "host": "db", "port": 443 },
            "filter": { "contains": "timeout", "severity": "warn" },
            "note": null,
            "interval_s": 60,
            "checks": [{ "name": "tls", "timeout_ms": 2000 }, { "name": "dns", "timeout_ms": 50 }]
        })
    );
    assert_eq!(
        round_trip(
            &registry,
            "configure_probe",
            json!({
                "target": { "host": "db", "port": 22 },
                "filter": null,
                "note": "weekly",
                "interval_s": 30,
                "checks": []
            })
        ),
        json!({
            "target": { "host": "db", "port": 22 },
            "filter": null,
            "note": "weekly",
            "interval_s": 30,
            "checks": []
        })
    );

    // A serve tool's `task_id` is optional: null means "start a new task".
    assert_eq!(
        round_trip(
            &registry,
            "plan_release",
            json!({ "request": "ship 1.2", "task_id": null })
        ),
        json!({ "request": "ship 1.2" })
    );
}

// ---------------------------------------------------------------------------------------------
// Anthropic.

#[test]
fn anthropic_passes_the_tool_schema_as_is() {
    let registry = registry();
    for entry in list(&registry, Audience::Model, Format::Anthropic) {
        let name = tool_name(&entry, Format::Anthropic);
        if let Some(tool) = registry.get(name) {
            assert_eq!(&entry["input_schema"], tool.input_schema(), "{name}");
            assert_eq!(
                entry["description"],
                tool.description_for(Audience::Model),
                "{name}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MCP.

#[test]
fn mcp_annotations_follow_the_effect_and_explicit_overrides_win() {
    let registry = registry();
    let annotations =
        |name: &str| exported(&registry, Audience::Model, Format::Mcp, name)["annotations"].clone();
    assert_eq!(
        annotations("read_logs"),
        json!({
            "title": "Read logs",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false
        })
    );
    let write = annotations("configure_probe");
    assert_eq!(write["readOnlyHint"], false);
    assert_eq!(write["destructiveHint"], false);
    let money = annotations("pay_invoice");
    assert_eq!(money["destructiveHint"], true);
    assert_eq!(money["readOnlyHint"], false);
    assert_eq!(money["openWorldHint"], false);
    let public = annotations("post_status");
    assert_eq!(public["openWorldHint"], true);
    assert_eq!(public["destructiveHint"], true);
    // `purge_cdn` is `write` (not destructive, not idempotent, closed world) overridden.
    assert_eq!(
        annotations("purge_cdn"),
        json!({
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": true,
            "openWorldHint": true
        })
    );
}

#[test]
fn mcp_publishes_title_and_output_schema() {
    let registry = registry();
    let read_logs = exported(&registry, Audience::Model, Format::Mcp, "read_logs");
    assert_eq!(read_logs["title"], "Read logs");
    let output = &read_logs["outputSchema"];
    assert_eq!(
        output,
        registry.get("read_logs").unwrap().output_schema().unwrap()
    );
    assert_eq!(output["type"], "object");
    assert_eq!(output["required"], json!(["lines", "truncated"]));
    // A structured result validates against it.
    let validator = jsonschema::draft202012::new(output).unwrap();
    assert!(validator.is_valid(&json!({ "lines": ["boom"], "truncated": false })));
    assert!(!validator.is_valid(&json!({ "lines": "boom" })));

    let finish = exported(&registry, Audience::Model, Format::Mcp, "finish_answer");
    assert!(finish.get("title").is_none());
    assert!(finish.get("outputSchema").is_none());
}

// ---------------------------------------------------------------------------------------------
// Descriptions and the serve `task_id`.

const ENDS_TURN: &str = "Calling this tool ends your turn.";

#[test]
fn the_ends_turn_sentence_is_for_the_top_level_model_only() {
    let registry = registry();
    for format in FORMATS {
        let model = exported(&registry, Audience::Model, format, "finish_answer");
        // An MCP client runs its own turn loop, so MCP descriptions never carry the sentence.
        let expected = if format == Format::Mcp {
            "Gives the final answer to the user.".to_owned()
        } else {
            format!("Gives the final answer to the user. {ENDS_TURN}")
        };
        assert_eq!(description(&model, format), expected, "{format:?}");
        for audience in [Audience::Subagent, Audience::User] {
            let other = exported(&registry, audience, format, "finish_answer");
            assert_eq!(
                description(&other, format),
                "Gives the final answer to the user.",
                "{format:?} {audience:?}"
            );
        }
        // Other tools never get it.
        let read_logs = exported(&registry, Audience::Model, format, "read_logs");
        assert!(!description(&read_logs, format).contains(ENDS_TURN));
    }
}

#[test]
fn serve_tools_take_an_optional_task_id_and_say_how() {
    let registry = registry();
    let tool = registry.get("plan_release").unwrap();
    for format in FORMATS {
        for audience in [Audience::Model, Audience::Subagent] {
            let entry = exported(&registry, audience, format, "plan_release");
            let text = description(&entry, format);
            assert!(
                text.starts_with("Drafts a release plan and revises it on request. "),
                "{text}"
            );
            assert!(
                text.ends_with("pass its `task_id`; leave it out to start a new task."),
                "{text}"
            );
            let schema = input_schema(&entry, format);
            let task_id = &schema["properties"]["task_id"];
            assert!(
                task_id["description"]
                    .as_str()
                    .unwrap()
                    .contains("running task")
            );
            if matches!(format, Format::OpenAiStrict | Format::OpenAiResponses) {
                assert_eq!(task_id["type"], json!(["string", "null"]));
            } else {
                assert_eq!(task_id["type"], "string");
                assert_eq!(schema["required"], json!(["request"]), "{format:?}");
            }
        }
    }
    // The validator accepts it.
    assert!(
        tool.validate(json!({ "request": "ship", "task_id": "call-7" }))
            .is_ok()
    );
    assert!(
        tool.validate(json!({ "request": "ship", "task_id": 7 }))
            .is_err()
    );
}

// ---------------------------------------------------------------------------------------------
// Provider-native tools: run by the model provider, sent in each provider's own format.

/// Searches the web for current information; results come with citations.
#[tool(provider, effect = read, untrusted)]
fn web_search() -> ProviderTool {
    ProviderTool::new()
        .openai(json!({ "type": "web_search" }))
        .anthropic(json!({ "type": "web_search_20250305", "name": "web_search", "max_uses": 5 }))
}

/// Runs code in the provider's sandbox, for calculations and data analysis.
#[tool(provider, effect = read, title = "Run code")]
fn code_execution() -> ProviderTool {
    ProviderTool::code_execution()
}

/// Fetches a web page the user or a search result named.
#[tool(provider, effect = read, untrusted)]
fn web_fetch() -> ProviderTool {
    // No `name`: the export names the entry after the tool.
    ProviderTool::new().anthropic(json!({ "type": "web_fetch_20250910", "max_uses": 3 }))
}

fn docs_indexed(cx: &EnabledContext<'_>) -> bool {
    cx.flag("docs_indexed")
}

/// Searches the team's indexed documents.
#[tool(provider, effect = read, enabled = docs_indexed)]
fn file_search() -> ProviderTool {
    ProviderTool::new().openai(json!({ "type": "file_search", "vector_store_ids": ["vs_docs"] }))
}

/// Searches the web, but named unlike the Anthropic configuration says.
#[tool(provider, effect = read, untrusted)]
fn search() -> ProviderTool {
    ProviderTool::web_search()
}

fn provider_registry() -> Registry {
    Registry::from_tools([
        finish_answer::TOOL,
        web_search::TOOL,
        code_execution::TOOL,
        web_fetch::TOOL,
        file_search::TOOL,
    ])
    .unwrap()
}

#[test]
fn provider_tools_snapshot() {
    let registry = provider_registry();
    let lists: serde_json::Map<String, Value> = FORMATS
        .iter()
        .map(|&format| {
            let notes = registry.list(Audience::Model, format).notes();
            (
                format!("{format:?}"),
                json!({ "notes": notes, "tools": list(&registry, Audience::Model, format) }),
            )
        })
        .collect();
    insta::assert_json_snapshot!("provider_tools", lists);
}

#[test]
fn provider_tools_are_sent_as_configured() {
    let registry = provider_registry();
    let entries = |format| -> Vec<Value> {
        list(&registry, Audience::Model, format)
            .into_iter()
            .filter(|t| t["type"] != "function" && t.get("input_schema").is_none())
            .collect()
    };
    // OpenAI: the configuration as given, strict or not, for either API.
    for format in [
        Format::OpenAi,
        Format::OpenAiStrict,
        Format::OpenAiResponses,
    ] {
        assert_eq!(
            entries(format),
            [
                json!({ "type": "code_interpreter", "container": { "type": "auto" } }),
                json!({ "type": "file_search", "vector_store_ids": ["vs_docs"] }),
                json!({ "type": "web_search" }),
            ],
            "{format:?}"
        );
    }
    // Anthropic: the configuration, named after the tool where it names nothing.
    assert_eq!(
        entries(Format::Anthropic),
        [
            json!({ "type": "code_execution_20250825", "name": "code_execution" }),
            json!({ "type": "web_fetch_20250910", "max_uses": 3, "name": "web_fetch" }),
            json!({ "type": "web_search_20250305", "name": "web_search", "max_uses": 5 }),
        ]
    );
    for entry in entries(Format::Anthropic) {
        assert!(entry["type"].is_string(), "{entry}");
        assert!(is_provider_name(entry["name"].as_str().unwrap()), "{entry}");
    }
    // MCP clients cannot run them: only the function tools are served.
    let mcp: Vec<String> = list(&registry, Audience::Model, Format::Mcp)
        .iter()
        .map(|t| tool_name(t, Format::Mcp).to_owned())
        .collect();
    assert_eq!(mcp, ["finish_answer"]);
}

#[test]
fn a_provider_tool_without_a_configuration_is_left_out_with_a_note() {
    let registry = provider_registry();
    assert_eq!(
        registry.list(Audience::Model, Format::OpenAi).notes(),
        ["web_fetch: not sent to OpenAI: no openai configuration"]
    );
    // Strict mode only concerns function tools: a provider tool gets no "not strict" note.
    assert_eq!(
        registry.list(Audience::Model, Format::OpenAiStrict).notes(),
        ["web_fetch: not sent to OpenAI: no openai configuration"]
    );
    assert_eq!(
        registry
            .list(Audience::Model, Format::OpenAiResponses)
            .notes(),
        ["web_fetch: not sent to OpenAI: no openai configuration"]
    );
    assert_eq!(
        registry.list(Audience::Model, Format::Anthropic).notes(),
        ["file_search: not sent to Anthropic: no anthropic configuration"]
    );
    let mcp = registry.list(Audience::Model, Format::Mcp).notes();
    assert_eq!(mcp.len(), 4);
    assert!(
        mcp.iter().all(|n| n.ends_with(
            ": not served over MCP: the model provider runs it, and an MCP client cannot"
        )),
        "{mcp:?}"
    );
}

#[test]
fn provider_entries_point_at_their_tool_for_conditional_lists() {
    let registry = provider_registry();
    for format in [Format::OpenAi, Format::Anthropic] {
        let list = registry.list(Audience::Model, format);
        for entry in list.entries() {
            match entry.tool {
                Some(index) => assert_eq!(registry.tools()[index].name(), entry.name),
                None => panic!(
                    "no meta-tools without deferred or task tools: {}",
                    entry.name
                ),
            }
        }
        // The conditional `file_search` can be spliced out by its index.
        let file_search = registry.index_of("file_search").unwrap();
        let found = list.entries().iter().any(|e| e.tool == Some(file_search));
        assert_eq!(found, format == Format::OpenAi, "{format:?}");
    }
}

#[test]
fn provider_tools_are_not_offered_to_users() {
    let registry = provider_registry();
    for format in FORMATS {
        let names: Vec<String> = list(&registry, Audience::User, format)
            .iter()
            .map(|t| tool_name(t, format).to_owned())
            .collect();
        assert_eq!(names, ["finish_answer"], "{format:?}");
        assert!(registry.list(Audience::User, format).notes().is_empty());
    }
    let tool = registry.get("web_search").unwrap();
    assert!(tool.provider().is_some());
    assert!(!tool.visible_to(Audience::User));
    assert!(tool.visible_to(Audience::Subagent));
    let error = registry
        .resolve("web_search", toolwright::Caller::User)
        .unwrap_err();
    assert_eq!(error.code(), toolwright::ErrorCode::NotVisible);
    assert!(
        error.message().contains("run by the model provider"),
        "{error}"
    );
}

#[test]
fn an_anthropic_name_unlike_the_tools_is_refused() {
    let error = Registry::from_tools([search::TOOL]).unwrap_err();
    assert_eq!(error.problems.len(), 1);
    let message = error.problems[0].to_string();
    assert!(
        message.starts_with("provider tool `search` at tests/it/exports.rs:"),
        "{message}"
    );
    assert!(
        message.ends_with(
            "its anthropic configuration names the tool `web_search`, but the tool is named `search`; Anthropic reports its calls under the configured name, so the two must agree: name the tool `web_search` (`name = \"web_search\"`, outside any `toolset`)"
        ),
        "{message}"
    );
}
