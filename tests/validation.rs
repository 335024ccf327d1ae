//! Input validation and defaults, the errors a call can end with, the output check, and the
//! approval key of `approval_key = input`. Every tool here is valid, so this binary also proves
//! that `Registry::collect()` gathers the tools of another crate.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::ErrorCode;
use toolwright::prelude::*;
use toolwright::registry::{InputProblem, Tool};
use toolwright_test_tools as _;

// ---------------------------------------------------------------------------------------------
// The seed's read_logs.

#[derive(Deserialize, JsonSchema, ToolInput)]
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

// `Serialize` lets schemars write the default into the schema (it serializes `Default`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
enum Window {
    #[serde(rename = "5m")]
    FiveMinutes,
    #[default]
    #[serde(rename = "1h")]
    OneHour,
    #[serde(rename = "24h")]
    OneDay,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Level {
    #[default]
    Error,
    Warn,
    All,
}

#[derive(Serialize, JsonSchema)]
struct Logs {
    lines: Vec<String>,
    truncated: bool,
}

/// Searches one service's recent log lines. Use to investigate a specific failure, not for
/// statistics.
#[tool(effect = read, output_schema)]
async fn read_logs(args: ReadLogsArgs) -> Result<Logs, ToolError> {
    // The fn sees the defaults: echo them back.
    Ok(Logs {
        lines: vec![format!(
            "{} {:?} {:?} {}",
            args.service, args.window, args.level, args.limit
        )],
        truncated: false,
    })
}

// ---------------------------------------------------------------------------------------------
// Nested structs through `$ref`, `Option`, enums, formats, arrays of structs.

#[derive(Deserialize, JsonSchema, ToolInput)]
#[allow(dead_code)] // reason: the fields matter to the schema, not to the body
struct ProbeArgs {
    /// Where to probe.
    target: Target,
    /// Retry policy; the whole struct has defaults.
    #[serde(default)]
    retry: Retry,
    /// Only report failures matching this filter.
    filter: Option<Filter>,
    /// A note for the log.
    note: Option<String>,
    /// When to start, RFC 3339.
    #[schemars(extend("format" = "date-time"))]
    start_at: Option<String>,
    /// Extra checks.
    #[serde(default)]
    checks: Vec<Check>,
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

#[derive(Default, Deserialize, Serialize, JsonSchema)]
#[serde(default)]
struct Retry {
    attempts: u8,
    backoff_ms: u32,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Filter {
    contains: String,
    #[serde(default = "default_severity")]
    severity: Level,
}

fn default_severity() -> Level {
    Level::Warn
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)]
enum Check {
    Http {
        path: String,
        #[serde(default = "default_status")]
        status: u16,
    },
    Tcp,
}

fn default_status() -> u16 {
    200
}

/// Probes a host.
#[tool(effect = read)]
async fn probe(args: ProbeArgs) -> String {
    args.target.host
}

// ---------------------------------------------------------------------------------------------
// Extra fields, empty arguments, failures.

#[derive(Deserialize, JsonSchema, ToolInput)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct StrictArgs {
    name: String,
}

/// Renames the current branch.
#[tool(effect = write)]
async fn rename_branch(args: StrictArgs) -> String {
    args.name
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Empty {}

/// Returns the current time.
#[tool(effect = read)]
async fn now(_: NoInput) -> u64 {
    1_700_000_000
}

/// Returns the build version.
#[tool(effect = read)]
async fn version(_: Empty) -> &'static str {
    "1.0.0"
}

/// Divides by zero, loudly.
#[tool(effect = read)]
async fn explode(_: NoInput) -> u32 {
    panic!("the ledger is inconsistent")
}

/// An output whose schema promises a non-negative count.
#[derive(Serialize)]
struct Tally {
    count: i64,
}

impl JsonSchema for Tally {
    fn schema_name() -> Cow<'static, str> {
        "Tally".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "properties": { "count": { "type": "integer", "minimum": 0 } },
            "required": ["count"]
        })
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TallyArgs {
    delta: i64,
}

/// Counts open tickets plus `delta`.
#[tool(effect = read, output_schema)]
async fn tally(args: TallyArgs) -> Tally {
    Tally { count: args.delta }
}

/// A tool error passes through unchanged.
#[tool(effect = read)]
async fn refuse(_: NoInput) -> Result<u8, ToolError> {
    Err(ToolError::new(
        "the log service returned 404 for `payment-ap`; list services first",
    ))
}

/// What `report` returns: `warnings` is left out when empty.
#[derive(Serialize, JsonSchema)]
struct Report {
    ok: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// Builds a report.
#[tool(effect = read, output_schema)]
async fn report(_: NoInput) -> Report {
    Report {
        ok: true,
        warnings: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// A recursive type, a map of numbers, keys a JSON pointer escapes.

#[derive(Deserialize, JsonSchema, ToolInput)]
#[allow(dead_code)]
struct OutlineArgs {
    /// The top section.
    root: Section,
    /// Weights by name.
    #[serde(default)]
    weights: std::collections::BTreeMap<String, u8>,
    /// A key with a slash.
    #[serde(rename = "path/to", default = "default_depth")]
    path_to: u16,
    /// A key with a tilde.
    #[serde(rename = "~scale", default)]
    scale: Vec<f32>,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Section {
    title: String,
    #[serde(default = "default_depth")]
    depth: u16,
    #[serde(default)]
    children: Vec<Section>,
}

fn default_depth() -> u16 {
    1
}

/// Outlines a document.
#[tool(effect = read)]
async fn outline(args: OutlineArgs) -> usize {
    args.root.children.len() + usize::from(args.root.depth) + usize::from(args.path_to)
}

// ---------------------------------------------------------------------------------------------
// Approval keys.

#[derive(Deserialize, JsonSchema, ToolInput)]
#[allow(dead_code)]
struct TransferArgs {
    /// Destination account.
    to: String,
    /// Amount in cents.
    amount: u64,
    /// Reference shown on the statement.
    #[serde(default = "default_memo")]
    memo: String,
    /// Tags.
    #[serde(default)]
    meta: Meta,
}

fn default_memo() -> String {
    "transfer".into()
}

#[derive(Default, Deserialize, Serialize, JsonSchema)]
struct Meta {
    #[serde(default)]
    source: String,
    #[serde(default)]
    batch: u32,
}

/// Moves money between accounts.
#[tool(effect = money, approval = once, approval_key = input)]
async fn transfer(args: TransferArgs) -> u64 {
    args.amount
}

/// Moves money, remembered per tool.
#[tool(effect = money, approval = once)]
async fn transfer_once(args: TransferArgs) -> u64 {
    args.amount
}

// ---------------------------------------------------------------------------------------------

fn registry() -> Registry {
    Registry::from_tools([
        read_logs::TOOL,
        probe::TOOL,
        rename_branch::TOOL,
        now::TOOL,
        version::TOOL,
        explode::TOOL,
        tally::TOOL,
        refuse::TOOL,
        report::TOOL,
        transfer::TOOL,
        transfer_once::TOOL,
        outline::TOOL,
    ])
    .unwrap()
}

fn get(name: &str) -> &'static Tool {
    let registry: &'static Registry = Box::leak(Box::new(registry()));
    registry.get(name).expect("known tool")
}

fn call(name: &str, input: Value) -> Result<Value, ToolError> {
    futures_executor::block_on(registry().call(name, input)).map(|out| out.value)
}

fn pointers(problems: &[InputProblem]) -> Vec<&str> {
    problems.iter().map(|p| p.pointer.as_str()).collect()
}

fn message_at<'a>(problems: &'a [InputProblem], pointer: &str) -> &'a str {
    &problems
        .iter()
        .find(|p| p.pointer == pointer)
        .unwrap_or_else(|| panic!("no problem at {pointer}: {problems:?}"))
        .message
}

// ---------------------------------------------------------------------------------------------
// Defaults and optional fields.

#[test]
fn serde_defaults_are_applied_through_the_schema() {
    let tool = get("read_logs");
    assert_eq!(
        tool.input_schema()["properties"]["limit"]["default"],
        json!(50)
    );
    assert_eq!(
        tool.validate(json!({ "service": "payment-api" })).unwrap(),
        json!({ "service": "payment-api", "window": "1h", "level": "error", "limit": 50 })
    );
    // Given values win over defaults.
    assert_eq!(
        tool.validate(json!({ "service": "api", "window": "24h", "limit": 3 }))
            .unwrap(),
        json!({ "service": "api", "window": "24h", "level": "error", "limit": 3 })
    );
    // And the fn sees the same values.
    assert_eq!(
        call("read_logs", json!({ "service": "api" })).unwrap()["lines"],
        json!(["api OneHour Error 50"])
    );
}

#[test]
fn optional_fields_stay_optional() {
    let tool = get("probe");
    let required = tool.input_schema()["required"].as_array().unwrap();
    assert_eq!(required, &[json!("target")]);
    let out = tool
        .validate(json!({ "target": { "host": "db" } }))
        .unwrap();
    let object = out.as_object().unwrap();
    // Absent `Option`s stay absent (not `null`); defaulted fields are filled in.
    for absent in ["filter", "note", "start_at"] {
        assert!(!object.contains_key(absent), "{absent} was added: {out}");
    }
    assert_eq!(
        out,
        json!({
            "target": { "host": "db", "port": 443 },
            "retry": { "attempts": 0, "backoff_ms": 0 },
            "checks": []
        })
    );
    // `null` is a valid value for an `Option`.
    assert!(
        tool.validate(json!({ "target": { "host": "db" }, "note": null }))
            .is_ok()
    );
}

#[test]
fn defaults_reach_nested_structs_options_and_arrays() {
    let tool = get("probe");
    let out = tool
        .validate(json!({
            "target": { "host": "db", "port": 5432 },
            "retry": {},
            "filter": { "contains": "timeout" },
            "checks": [{ "kind": "http", "path": "/health" }, { "kind": "tcp" }]
        }))
        .unwrap();
    assert_eq!(out["target"], json!({ "host": "db", "port": 5432 }));
    // A struct-level `#[serde(default)]` fills every field of a given object.
    assert_eq!(out["retry"], json!({ "attempts": 0, "backoff_ms": 0 }));
    // The object branch of `Option<Filter>` gets its defaults.
    assert_eq!(
        out["filter"],
        json!({ "contains": "timeout", "severity": "warn" })
    );
    // Tagged enum variants are `oneOf` branches: the one whose tag matches adds its defaults.
    assert_eq!(
        out["checks"],
        json!([{ "kind": "http", "path": "/health", "status": 200 }, { "kind": "tcp" }])
    );
}

#[test]
fn defaults_reach_every_level_of_a_recursive_type() {
    let tool = get("outline");
    let out = tool
        .validate(json!({
            "root": { "title": "a", "children": [
                { "title": "b", "children": [{ "title": "c", "depth": 3 }] },
                { "title": "d" }
            ] }
        }))
        .unwrap();
    // `children` has no default in the schema (schemars writes one only for a `Serialize`
    // type): serde fills it in, the schema's defaults do not.
    assert_eq!(
        out,
        json!({
            "root": { "title": "a", "depth": 1, "children": [
                { "title": "b", "depth": 1, "children": [{ "title": "c", "depth": 3 }] },
                { "title": "d", "depth": 1 }
            ] },
            "weights": {},
            "path/to": 1,
            "~scale": []
        })
    );
    assert_eq!(
        call("outline", json!({ "root": { "title": "a" }, "path/to": 4 })).unwrap(),
        json!(5)
    );
}

#[test]
fn format_is_an_annotation() {
    let tool = get("probe");
    assert_eq!(
        tool.input_schema()["properties"]["start_at"]["format"],
        json!("date-time")
    );
    tool.validate(json!({ "target": { "host": "db" }, "start_at": "next tuesday" }))
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Failures.

#[test]
fn every_failing_pointer_is_listed_with_a_reason() {
    let error = get("read_logs")
        .validate(json!({ "service": "", "window": "2d", "level": "debug", "limit": 500 }))
        .unwrap_err();
    assert_eq!(error.tool, "read_logs");
    let mut found = pointers(&error.problems);
    found.sort_unstable();
    assert_eq!(found, ["/level", "/limit", "/service", "/window"]);
    assert!(
        message_at(&error.problems, "/limit").contains("500 is greater than the maximum of 200")
    );
    assert!(message_at(&error.problems, "/service").contains("shorter than 1 character"));
    let window = message_at(&error.problems, "/window");
    for allowed in ["5m", "1h", "24h"] {
        assert!(window.contains(allowed), "{window}");
    }
    assert!(message_at(&error.problems, "/level").contains("\"debug\""));

    let text = error.to_string();
    assert!(text.starts_with("invalid input for `read_logs`:"), "{text}");
    assert!(
        text.ends_with("fix these fields and call `read_logs` again"),
        "{text}"
    );
}

#[test]
fn a_missing_field_is_reported_at_the_field() {
    let error = get("read_logs").validate(json!({})).unwrap_err();
    assert_eq!(pointers(&error.problems), ["/service"]);
    assert!(
        error.problems[0]
            .message
            .contains("\"service\" is a required property")
    );
    assert!(
        error
            .to_string()
            .contains("- /service: \"service\" is a required property")
    );
}

#[test]
fn nested_structs_are_checked_through_refs() {
    let error = get("probe")
        .validate(json!({
            "target": { "port": 70000 },
            "filter": { "severity": "warn" },
            "checks": [{ "kind": "http" }, { "kind": "udp" }]
        }))
        .unwrap_err();
    let found = pointers(&error.problems);
    for expected in [
        "/target/host",
        "/target/port",
        "/filter",
        "/checks/0",
        "/checks/1",
    ] {
        assert!(
            found.contains(&expected),
            "{expected} missing from {found:?}"
        );
    }
    assert!(message_at(&error.problems, "/target/host").contains("\"host\""));
    assert!(message_at(&error.problems, "/target/port").contains("65535"));
}

#[test]
fn numbers_are_checked_through_recursion_maps_arrays_and_escaped_keys() {
    let error = get("outline")
        .validate(json!({
            "root": { "title": "a", "children": [{ "title": "b", "depth": 70000 }] },
            "weights": { "x/y": 300, "ok": 3 },
            "path/to": 65536,
            "~scale": [0.5, 0.1]
        }))
        .unwrap_err();
    let mut found = pointers(&error.problems);
    found.sort_unstable();
    assert_eq!(
        found,
        [
            "/path~1to",
            "/root/children/0/depth",
            "/weights/x~1y",
            "/~0scale/1"
        ],
        "{error}"
    );
    assert!(
        message_at(&error.problems, "/~0scale/1").contains("32-bit float"),
        "{error}"
    );
    // Each number fits: the call goes through.
    get("outline")
        .validate(json!({
            "root": { "title": "a", "children": [{ "title": "b", "depth": 65535 }] },
            "weights": { "x/y": 255 },
            "~scale": [0.5, 0.25]
        }))
        .unwrap();
}

#[test]
fn wrong_types_name_the_expected_type() {
    let error = get("read_logs")
        .validate(json!({ "service": 42, "limit": "ten" }))
        .unwrap_err();
    assert!(message_at(&error.problems, "/service").contains("\"string\""));
    assert!(message_at(&error.problems, "/limit").contains("\"integer\""));
    // Not an object at all.
    let error = get("read_logs").validate(json!("payment-api")).unwrap_err();
    assert_eq!(pointers(&error.problems), [""]);
    assert!(error.problems[0].message.contains("\"object\""));
}

#[test]
fn null_is_the_empty_input() {
    assert_eq!(get("now").validate(Value::Null).unwrap(), json!({}));
    assert_eq!(get("version").validate(Value::Null).unwrap(), json!({}));
    assert_eq!(call("now", Value::Null).unwrap(), json!(1_700_000_000));
    assert_eq!(call("version", json!({})).unwrap(), json!("1.0.0"));
    // `null` for a tool with required fields reports them.
    let error = get("read_logs").validate(Value::Null).unwrap_err();
    assert!(error.problems[0].message.contains("service"));
}

#[test]
fn extra_fields_are_refused() {
    // Serde would drop an unknown field silently; the schema is closed so the model learns the
    // tool has no such field instead of believing it was applied.
    let error = get("read_logs")
        .validate(json!({ "service": "api", "verbose": true }))
        .unwrap_err();
    assert_eq!(pointers(&error.problems), [""]);
    assert!(error.problems[0].message.contains("'verbose'"), "{error}");
    // With `deny_unknown_fields` too, naming the field.
    let error = get("rename_branch")
        .validate(json!({ "name": "main", "force": true }))
        .unwrap_err();
    assert_eq!(pointers(&error.problems), [""]);
    assert!(error.problems[0].message.contains("'force'"), "{error}");
    let error = get("now").validate(json!({ "tz": "UTC" })).unwrap_err();
    assert!(error.problems[0].message.contains("'tz'"), "{error}");
}

#[test]
fn a_call_with_bad_input_is_an_invalid_input_error_listing_each_pointer() {
    let error = call(
        "read_logs",
        json!({ "service": "", "window": "2d", "limit": 0 }),
    )
    .unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidInput);
    assert!(!error.is_fatal());
    let message = error.message();
    assert!(
        message.starts_with("invalid input for `read_logs`:"),
        "{message}"
    );
    for pointer in ["- /service: ", "- /window: ", "- /limit: "] {
        assert!(
            message.contains(pointer),
            "{pointer} missing from {message}"
        );
    }
    let details: Vec<InputProblem> =
        serde_json::from_value(error.details_value().unwrap().clone()).unwrap();
    let mut found = pointers(&details);
    found.sort_unstable();
    assert_eq!(found, ["/limit", "/service", "/window"]);
}

#[test]
fn a_panicking_tool_is_a_tool_panicked_error() {
    let error = call("explode", Value::Null).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ToolPanicked);
    assert!(
        error.message().contains("the ledger is inconsistent"),
        "{error}"
    );
    assert!(error.message().contains("`explode`"), "{error}");
    // The registry is still usable.
    assert!(call("now", Value::Null).is_ok());
}

#[test]
fn a_tool_error_is_returned_as_is() {
    let error = call("refuse", Value::Null).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ToolFailed);
    assert_eq!(
        error.message(),
        "the log service returned 404 for `payment-ap`; list services first"
    );
}

#[test]
fn output_that_breaks_the_published_schema_is_invalid_output() {
    assert_eq!(
        call("tally", json!({ "delta": 3 })).unwrap(),
        json!({ "count": 3 })
    );
    let error = call("tally", json!({ "delta": -1 })).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidOutput);
    let message = error.message();
    assert!(
        message.contains("tool `tally` returned output that does not match its output schema"),
        "{message}"
    );
    assert!(
        message.contains("/count: -1 is less than the minimum of 0"),
        "{message}"
    );
    // The check is available on its own.
    assert!(get("tally").check_output(&json!({ "count": 1 })).is_ok());
    assert_eq!(
        get("tally").check_output(&json!({})).unwrap_err().code(),
        ErrorCode::InvalidOutput
    );
}

#[test]

fn output_schemas_describe_what_the_output_serializes_to() {
    // `warnings` is skipped when empty; deserializing would require it, serializing does not.
    let schema = get("report").output_schema().unwrap();
    assert_eq!(schema["required"], json!(["ok"]));
    assert_eq!(call("report", Value::Null).unwrap(), json!({ "ok": true }));
}

// ---------------------------------------------------------------------------------------------
// Approval keys.

#[test]
fn approval_key_of_input_ignores_key_order() {
    let tool = get("transfer");
    let a: Value =
        serde_json::from_str(r#"{"to":"acct-1","amount":500,"meta":{"source":"app","batch":2}}"#)
            .unwrap();
    let b: Value =
        serde_json::from_str(r#"{"meta":{"batch":2,"source":"app"},"amount":500,"to":"acct-1"}"#)
            .unwrap();
    let key = tool.approval_key(&a).unwrap();
    assert_eq!(key, tool.approval_key(&b).unwrap());
    assert!(key.starts_with("transfer#"), "{key}");

    // A different argument is a different grant.
    let c = json!({ "to": "acct-2", "amount": 500, "meta": { "source": "app", "batch": 2 } });
    assert_ne!(key, tool.approval_key(&c).unwrap());
}

#[test]
fn approval_key_is_a_digest_of_canonical_json() {
    // SHA-256 of `{"amount":500,"to":"acct-1"}`: compact, keys sorted. Pinned so a stored
    // grant keeps matching across releases.
    let key = get("transfer")
        .approval_key(&json!({ "to": "acct-1", "amount": 500 }))
        .unwrap();
    assert_eq!(
        key,
        "transfer#9b4ecaf278f99a53cf31770e2761ec89e08b9cad3a0aadf7a51886cdcebe65ae"
    );
}

#[test]
fn approval_key_covers_the_validated_input() {
    // The runtime keys the grant by the validated input, so spelling a default out or leaving
    // it to the schema is the same grant.
    let tool = get("transfer");
    let short = tool
        .validate(json!({ "to": "acct-1", "amount": 500 }))
        .unwrap();
    let long = tool
        .validate(json!({
            "amount": 500,
            "to": "acct-1",
            "memo": "transfer",
            "meta": { "source": "", "batch": 0 }
        }))
        .unwrap();
    assert_eq!(
        tool.approval_key(&short).unwrap(),
        tool.approval_key(&long).unwrap()
    );
    // Without `approval_key`, `once` remembers the tool name.
    assert_eq!(
        get("transfer_once").approval_key(&short).unwrap(),
        "transfer_once"
    );
}

// ---------------------------------------------------------------------------------------------
// Collecting across crates.

#[test]
fn collect_gathers_the_tools_of_other_crates() {
    let registry = Registry::collect().unwrap();
    let remote = registry
        .get("support__echo_remote")
        .expect("collected from the support crate");
    assert_eq!(remote.id(), "support.echo_remote");
    assert!(std::ptr::eq(
        registry.by_id("support.echo_remote").unwrap(),
        remote
    ));
    assert!(
        remote
            .descriptor()
            .unwrap()
            .location
            .file
            .contains("support-tools")
    );
    // And every tool of this binary.
    for name in [
        "read_logs",
        "probe",
        "rename_branch",
        "now",
        "version",
        "explode",
        "tally",
        "transfer",
    ] {
        assert!(registry.get(name).is_some(), "{name} not collected");
    }

    let out = futures_executor::block_on(
        registry.call("support__echo_remote", json!({ "text": "hello" })),
    )
    .unwrap();
    assert_eq!(out.value, json!({ "text": "hello" }));
    let error =
        futures_executor::block_on(registry.call("support__echo_remote", json!({}))).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidInput);
    assert!(
        error.message().contains("\"text\" is a required property"),
        "{error}"
    );
}
