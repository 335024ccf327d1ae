//! The registry: refusals that name every definition site, lookup, resolution for each caller,
//! and the tool lists each audience sees.
//!
//! This binary deliberately defines broken tools (two tools named `lookup`, a schema that does
//! not compile, argument and output types that are not objects), so `Registry::collect()` here
//! must fail and list all of them at once. The successful cross-crate `collect()` lives in
//! `tests/validation.rs`, whose tools are all valid.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::registry::{
    Audience, Entry, Format, Location, RegistryError, RegistryProblem, ToolDescriptor, ToolKind,
};
use toolwright::{Caller, ErrorCode};
use toolwright_test_tools as _;

// ---------------------------------------------------------------------------------------------
// Valid tools, one per visibility rule.

#[derive(Deserialize, JsonSchema, ToolInput)]
struct CustomerArgs {
    /// Customer id, e.g. cus_42.
    customer: String,
}

#[derive(Serialize)]
struct Count {
    count: u32,
}

/// Lists a customer's open invoices. Use when the user asks what they owe.
#[tool(effect = read)]
async fn list_invoices(args: CustomerArgs) -> Count {
    Count {
        count: args.customer.len() as u32,
    }
}

/// Exports the full ledger as CSV. Slow; use only when the user asks for a ledger export.
#[tool(effect = read, deferred, subagents = false)]
async fn export_ledger(_: NoInput) -> String {
    String::from("date,amount")
}

/// Finds invoices that were archived more than a year ago.
#[tool(effect = read, deferred)]
async fn find_archived_invoices(args: CustomerArgs) -> Count {
    Count {
        count: args.customer.len() as u32,
    }
}

/// Clears the billing cache. Operators only.
#[tool(effect = write, user_only)]
async fn wipe_cache(_: NoInput) -> bool {
    true
}

/// Opens an incident and pages the on-call engineer.
#[tool(effect = write, subagents = false)]
async fn open_incident(args: CustomerArgs) -> String {
    args.customer
}

/// Hands the finished report to the user.
#[tool(effect = read, ends_turn)]
async fn submit_report(_: NoInput) -> bool {
    true
}

/// Merges two customer records. The model gets two chances to correct invalid input.
#[tool(effect = write, input_retries = 2)]
async fn merge_customers(args: CustomerArgs) -> String {
    args.customer
}

/// Closes a customer's account. One invalid input fails the turn.
#[tool(effect = write, input_retries = 0)]
async fn close_account(args: CustomerArgs) -> String {
    args.customer
}

/// Looks a customer up in the billing system.
#[tool(effect = read, toolset = "billing", name = "lookup")]
async fn billing_lookup(args: CustomerArgs) -> String {
    args.customer
}

// ---------------------------------------------------------------------------------------------
// Broken tools: each makes `Registry::collect()` of this binary fail.

mod crm {
    use toolwright::prelude::*;

    /// Looks a contact up in the CRM.
    #[tool(effect = read, name = "lookup")]
    pub(crate) async fn crm_lookup(_: NoInput) -> u8 {
        1
    }
}

/// Looks a vendor up.
#[tool(effect = read, name = "lookup")]
async fn vendor_lookup(_: NoInput) -> u8 {
    2
}

/// An argument struct whose hand-written schema has a regex that does not compile.
#[derive(Deserialize, ToolInput)]
#[allow(dead_code)] // reason: only the schema matters
struct BadPattern {
    code: String,
}

impl JsonSchema for BadPattern {
    fn schema_name() -> Cow<'static, str> {
        "BadPattern".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "properties": { "code": { "type": "string", "pattern": "([a-z" } },
            "required": ["code"]
        })
    }
}

/// Checks a discount code.
#[tool(effect = read)]
async fn check_code(args: BadPattern) -> bool {
    args.code.is_empty()
}

/// An argument struct whose hand-written schema says it is a string.
#[derive(Deserialize, ToolInput)]
#[allow(dead_code)] // reason: only the schema matters
struct ScalarSchema {
    text: String,
}

impl JsonSchema for ScalarSchema {
    fn schema_name() -> Cow<'static, str> {
        "ScalarSchema".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

/// Shouts the text back.
#[tool(effect = read)]
async fn shout(args: ScalarSchema) -> String {
    args.text.to_uppercase()
}

/// Counts the open tickets.
#[tool(effect = read, output_schema)]
async fn count_tickets(_: NoInput) -> u32 {
    7
}

// ---------------------------------------------------------------------------------------------
// Hand-built descriptors for what `#[tool]` refuses at compile time. They are not submitted to
// `inventory`, so only `Registry::from_tools` sees them.

macro_rules! here {
    () => {
        Location {
            file: file!(),
            line: line!(),
            column: column!(),
            module_path: module_path!(),
        }
    };
}

static RESERVED: ToolDescriptor = ToolDescriptor {
    name: "tool_search",
    location: here!(),
    ..*list_invoices::TOOL
};

static SPACED: ToolDescriptor = ToolDescriptor {
    name: "read logs",
    location: here!(),
    ..*list_invoices::TOOL
};

static TOO_LONG: ToolDescriptor = ToolDescriptor {
    toolset: Some("accounts_receivable_and_payable_reconciliation"),
    name: "list_overdue_invoices",
    location: here!(),
    ..*list_invoices::TOOL
};

/// Same id as `billing_lookup` (`billing.lookup`), through a dotted name without a toolset.
static DOTTED: ToolDescriptor = ToolDescriptor {
    name: "billing.lookup",
    toolset: None,
    location: here!(),
    ..*list_invoices::TOOL
};

/// A reserved name is a meta-tool's only at the top level: inside a toolset it is free.
static TOOLSET_READ: ToolDescriptor = ToolDescriptor {
    toolset: Some("files"),
    name: "read",
    location: here!(),
    ..*list_invoices::TOOL
};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TaskArgs {
    /// Which task.
    task_id: String,
}

/// Looks a task up.
#[tool(effect = read)]
async fn task_status(args: TaskArgs) -> String {
    args.task_id
}

/// A `serve` tool whose arguments declare `task_id`, which `#[tool]` refuses (C7) and the
/// registry refuses again for descriptors built another way.
static SERVE_WITH_TASK_ID: ToolDescriptor = ToolDescriptor {
    kind: ToolKind::Workflow(Entry::Serve),
    location: here!(),
    ..*task_status::TOOL
};

/// More retries than `#[tool]` accepts (C20), which the registry refuses again.
static TOO_PATIENT: ToolDescriptor = ToolDescriptor {
    input_retries: Some(11),
    location: here!(),
    ..*merge_customers::TOOL
};

fn refused(tools: impl IntoIterator<Item = &'static ToolDescriptor>) -> RegistryError {
    Registry::from_tools(tools).expect_err("the registry should refuse these tools")
}

fn site(descriptor: &ToolDescriptor) -> String {
    let at = descriptor.location;
    assert!(at.file.ends_with("registry.rs"), "{at}");
    format!("{}:{}", at.file, at.line)
}

// ---------------------------------------------------------------------------------------------
// Building.

#[test]
fn duplicate_names_name_both_definition_sites() {
    let error = refused([crm::crm_lookup::TOOL, vendor_lookup::TOOL]);
    let (first, second) = (site(crm::crm_lookup::TOOL), site(vendor_lookup::TOOL));
    assert_ne!(first, second);
    assert_eq!(
        error.problems,
        vec![RegistryProblem::DuplicateName {
            name: "lookup".into(),
            first: crm::crm_lookup::TOOL.location,
            second: vendor_lookup::TOOL.location,
        }]
    );
    let text = error.to_string();
    assert!(text.contains("two tools are named `lookup`"), "{text}");
    assert!(text.contains(&first), "{text}");
    assert!(text.contains(&second), "{text}");
    assert!(text.contains(r#"rename one with `name = "..."`"#), "{text}");

    // The order the tools come in does not change which site is "first".
    assert_eq!(refused([vendor_lookup::TOOL, crm::crm_lookup::TOOL]), error);
}

#[test]
fn duplicate_ids_name_both_definition_sites() {
    let error = refused([billing_lookup::TOOL, &DOTTED]);
    let text = error.to_string();
    assert!(
        error.problems.contains(&RegistryProblem::DuplicateId {
            id: "billing.lookup".into(),
            first: DOTTED.location,
            second: billing_lookup::TOOL.location,
        }),
        "{text}"
    );
    assert!(
        text.contains("two tools have the id `billing.lookup`"),
        "{text}"
    );
    assert!(text.contains(&site(&DOTTED)), "{text}");
    assert!(text.contains(&site(billing_lookup::TOOL)), "{text}");
    // The dotted name is also invalid on its own, and said so.
    assert!(error.problems.contains(&RegistryProblem::InvalidName {
        name: "billing.lookup".into(),
        at: DOTTED.location,
    }));
}

#[test]
fn the_same_descriptor_twice_is_one_tool() {
    let registry = Registry::from_tools([list_invoices::TOOL, list_invoices::TOOL]).unwrap();
    assert_eq!(registry.tools().len(), 1);
}

#[test]
fn reserved_names_are_refused() {
    let error = refused([&RESERVED]);
    assert_eq!(
        error.problems,
        vec![RegistryProblem::Reserved {
            name: "tool_search".into(),
            at: RESERVED.location,
        }]
    );
    let text = error.to_string();
    assert!(text.contains("`tool_search`"), "{text}");
    assert!(text.contains(&site(&RESERVED)), "{text}");
    assert!(text.contains("choose another `name`"), "{text}");

    let registry = Registry::from_tools([&TOOLSET_READ]).unwrap();
    assert!(registry.get("files__read").is_some());
}

#[test]
fn invalid_names_are_refused_once_each() {
    let error = refused([&SPACED]);
    assert_eq!(
        error.problems,
        vec![RegistryProblem::InvalidName {
            name: "read logs".into(),
            at: SPACED.location,
        }]
    );
    let text = error.to_string();
    assert!(text.contains("`read logs`"), "{text}");
    assert!(text.contains("^[a-zA-Z0-9_-]{1,64}$"), "{text}");
    assert!(text.contains(&site(&SPACED)), "{text}");

    // Each part is fine, together they pass 64 characters.
    let error = refused([&TOO_LONG]);
    let long = "accounts_receivable_and_payable_reconciliation__list_overdue_invoices";
    assert!(long.len() > 64);
    assert_eq!(
        error.problems,
        vec![RegistryProblem::InvalidName {
            name: long.into(),
            at: TOO_LONG.location,
        }]
    );
}

#[test]
fn a_schema_that_does_not_compile_is_refused_with_the_reason() {
    let error = refused([check_code::TOOL]);
    let [
        RegistryProblem::SchemaCompile {
            tool,
            which,
            error: reason,
            at,
        },
    ] = error.problems.as_slice()
    else {
        panic!("{error}");
    };
    assert_eq!(tool, "check_code");
    assert_eq!(*which, "input");
    assert_eq!(*at, check_code::TOOL.location);
    assert!(
        reason.contains("([a-z"),
        "the reason should quote the pattern: {reason}"
    );
    assert!(
        reason.ends_with("at /properties/code/pattern"),
        "and say where it is: {reason}"
    );
    let text = error.to_string();
    assert!(
        text.contains("its input schema cannot be compiled into a validator"),
        "{text}"
    );
    assert!(text.contains(&site(check_code::TOOL)), "{text}");
}

#[test]
fn a_non_object_argument_schema_is_refused() {
    let error = refused([shout::TOOL]);
    assert_eq!(
        error.problems,
        vec![RegistryProblem::InputNotObject {
            tool: "shout".into(),
            type_name: "ScalarSchema",
            at: shout::TOOL.location,
        }]
    );
    let text = error.to_string();
    assert!(
        text.contains("`ScalarSchema` is not described as a JSON object"),
        "{text}"
    );
    assert!(text.contains("use a struct with named fields"), "{text}");
}

#[test]
fn a_non_object_output_schema_is_refused() {
    let error = refused([count_tickets::TOOL]);
    assert_eq!(
        error.problems,
        vec![RegistryProblem::OutputNotObject {
            tool: "count_tickets".into(),
            at: count_tickets::TOOL.location,
        }]
    );
    assert!(
        error.to_string().contains("drop `output_schema`"),
        "{error}"
    );
}

#[test]
fn a_serve_tool_may_not_declare_task_id() {
    let error = refused([&SERVE_WITH_TASK_ID]);
    assert_eq!(
        error.problems,
        vec![RegistryProblem::ServeTaskId {
            tool: "task_status".into(),
            at: SERVE_WITH_TASK_ID.location,
        }]
    );
    assert!(
        error
            .to_string()
            .contains("the runtime adds `task_id` itself"),
        "{error}"
    );
    // As a plain tool it is fine.
    assert!(Registry::from_tools([task_status::TOOL]).is_ok());
}

#[test]
fn input_retries_reach_the_tool() {
    let registry = Registry::from_tools([
        merge_customers::TOOL,
        close_account::TOOL,
        list_invoices::TOOL,
    ])
    .unwrap();
    let retries = |name| registry.get(name).unwrap().input_retries();
    assert_eq!(merge_customers::TOOL.input_retries, Some(2));
    assert_eq!(retries("merge_customers"), Some(2));
    assert_eq!(retries("close_account"), Some(0));
    // Without the key, `None`: the model loop's default applies.
    assert_eq!(retries("list_invoices"), None);
}

#[test]
fn input_retries_over_the_limit_are_refused() {
    let error = refused([&TOO_PATIENT]);
    assert_eq!(
        error.problems,
        [RegistryProblem::InputRetries {
            tool: "merge_customers".into(),
            retries: 11,
            at: TOO_PATIENT.location,
        }]
    );
    assert_eq!(
        error.problems[0].to_string(),
        format!(
            "tool `merge_customers` at {} sets `input_retries` to 11, over the most a tool may set (10); set 0 to 10, or leave it out for the model loop's default",
            site(&TOO_PATIENT)
        )
    );
}

#[test]
fn every_problem_is_listed_together() {
    let error = refused([
        list_invoices::TOOL,
        &RESERVED,
        &SPACED,
        crm::crm_lookup::TOOL,
        vendor_lookup::TOOL,
        check_code::TOOL,
        shout::TOOL,
        count_tickets::TOOL,
    ]);
    let kinds: Vec<&str> = error
        .problems
        .iter()
        .map(|p| match p {
            RegistryProblem::DuplicateName { .. } => "duplicate name",
            RegistryProblem::DuplicateId { .. } => "duplicate id",
            RegistryProblem::Reserved { .. } => "reserved",
            RegistryProblem::InvalidName { .. } => "invalid name",
            RegistryProblem::InputNotObject { .. } => "input not object",
            RegistryProblem::ServeTaskId { .. } => "serve task_id",
            RegistryProblem::OutputNotObject { .. } => "output not object",
            RegistryProblem::SchemaCompile { .. } => "schema compile",
            RegistryProblem::Provider { .. } => "provider",
            RegistryProblem::Description { .. } => "description",
            _ => "a problem this test does not know yet",
        })
        .collect();
    // Sorted by model name: check_code, count_tickets, lookup (x2), read logs, shout, tool_search.
    assert_eq!(
        kinds,
        [
            "schema compile",
            "output not object",
            "duplicate name",
            "invalid name",
            "input not object",
            "reserved"
        ]
    );
    let text = error.to_string();
    assert!(
        text.starts_with("the tool registry has 6 problem(s):"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("- ")).count(),
        6,
        "{text}"
    );
}

#[test]
fn collect_refuses_this_binary_and_lists_all_its_problems() {
    let error = Registry::collect().expect_err("this binary defines broken tools");
    let text = error.to_string();
    assert_eq!(error.problems.len(), 4, "{text}");
    for expected in [
        RegistryProblem::DuplicateName {
            name: "lookup".into(),
            first: crm::crm_lookup::TOOL.location,
            second: vendor_lookup::TOOL.location,
        },
        RegistryProblem::InputNotObject {
            tool: "shout".into(),
            type_name: "ScalarSchema",
            at: shout::TOOL.location,
        },
        RegistryProblem::OutputNotObject {
            tool: "count_tickets".into(),
            at: count_tickets::TOOL.location,
        },
    ] {
        assert!(
            error.problems.contains(&expected),
            "{expected:?} missing from {text}"
        );
    }
    assert!(
        error.problems.iter().any(
            |p| matches!(p, RegistryProblem::SchemaCompile { tool, .. } if tool == "check_code")
        ),
        "{text}"
    );
    // Hand-built descriptors are not registered.
    assert!(!text.contains("tool_search"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Lookup and resolution.

fn visibility_registry() -> Registry {
    Registry::from_tools([
        submit_report::TOOL,
        wipe_cache::TOOL,
        open_incident::TOOL,
        list_invoices::TOOL,
        find_archived_invoices::TOOL,
        export_ledger::TOOL,
        billing_lookup::TOOL,
    ])
    .unwrap()
}

fn names(registry: &Registry) -> Vec<&str> {
    registry.tools().iter().map(|t| t.name()).collect()
}

#[test]
fn tools_are_sorted_by_name_whatever_the_input_order() {
    let forward = visibility_registry();
    let mut reversed_input: Vec<&'static ToolDescriptor> = forward
        .tools()
        .iter()
        .filter_map(|t| t.descriptor())
        .collect();
    reversed_input.reverse();
    let backward = Registry::from_tools(reversed_input).unwrap();
    let expected = [
        "billing__lookup",
        "export_ledger",
        "find_archived_invoices",
        "list_invoices",
        "open_incident",
        "submit_report",
        "wipe_cache",
    ];
    assert_eq!(names(&forward), expected);
    assert_eq!(names(&backward), expected);
    for format in Format::ALL {
        for audience in Audience::ALL {
            assert_eq!(
                forward.list(audience, format).json(),
                backward.list(audience, format).json()
            );
        }
    }
}

#[test]
fn get_and_by_id_use_the_model_name_and_the_id() {
    let registry = visibility_registry();
    let tool = registry.get("billing__lookup").unwrap();
    assert_eq!(tool.id(), "billing.lookup");
    assert_eq!(tool.name(), "billing__lookup");
    assert_eq!(tool.descriptor().unwrap().fn_name, "billing_lookup");
    assert!(std::ptr::eq(
        registry.by_id("billing.lookup").unwrap(),
        tool
    ));
    assert!(registry.get("billing.lookup").is_none());
    assert!(registry.by_id("billing__lookup").is_none());
    assert!(registry.get("lookup").is_none());
    let plain = registry.get("list_invoices").unwrap();
    assert!(std::ptr::eq(
        registry.by_id("list_invoices").unwrap(),
        plain
    ));
}

#[test]
fn an_unknown_name_suggests_similar_visible_tools() {
    let registry = visibility_registry();
    let error = registry.resolve("list_invoice", Caller::Model).unwrap_err();
    assert_eq!(error.code(), ErrorCode::UnknownTool);
    assert_eq!(
        error.message(),
        "no tool named `list_invoice`; did you mean `list_invoices`?"
    );

    let error = registry.resolve("invoices", Caller::Model).unwrap_err();
    assert!(error.message().contains("`list_invoices`"), "{error}");
    assert!(
        error.message().contains("`find_archived_invoices`"),
        "{error}"
    );

    let error = registry.resolve("zzzz", Caller::Model).unwrap_err();
    assert_eq!(
        error.message(),
        "no tool named `zzzz`; check the tool list for the right name"
    );
}

#[test]
fn user_only_tools_never_leak_to_a_model() {
    let registry = visibility_registry();
    for caller in [Caller::Model, Caller::Schedule, Caller::Subagent] {
        // Called by its exact name: the same answer as for a name that does not exist.
        let error = registry.resolve("wipe_cache", caller).unwrap_err();
        assert_eq!(error.code(), ErrorCode::UnknownTool, "{caller:?}");
        let hint = error.message().split_once(';').unwrap().1;
        assert!(!hint.contains("wipe_cache"), "{caller:?}: {error}");

        // Misspelt: never suggested.
        let error = registry.resolve("wipe_cach", caller).unwrap_err();
        assert!(
            !error.message().contains("wipe_cache"),
            "{caller:?}: {error}"
        );
    }
    // A person may call it, and is pointed at it.
    assert_eq!(
        registry.resolve("wipe_cache", Caller::User).unwrap().name(),
        "wipe_cache"
    );
    let error = registry.resolve("wipe_cach", Caller::User).unwrap_err();
    assert!(
        error.message().contains("did you mean `wipe_cache`?"),
        "{error}"
    );
}

#[test]
fn subagents_get_not_visible_for_tools_kept_from_them() {
    let registry = visibility_registry();
    let error = registry
        .resolve("open_incident", Caller::Subagent)
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotVisible);
    assert!(error.message().contains("`open_incident`"), "{error}");
    assert!(error.message().contains("delegated sessions"), "{error}");
    // Not suggested to them either.
    let error = registry
        .resolve("open_inciden", Caller::Subagent)
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::UnknownTool);
    assert!(!error.message().contains("open_incident`"), "{error}");

    assert!(registry.resolve("open_incident", Caller::Model).is_ok());
    assert!(registry.resolve("list_invoices", Caller::Subagent).is_ok());
}

#[test]
fn deferred_tools_can_be_called_by_name() {
    let registry = visibility_registry();
    assert!(registry.resolve("export_ledger", Caller::Model).is_ok());
    assert!(
        registry
            .resolve("find_archived_invoices", Caller::Subagent)
            .is_ok()
    );
    assert_eq!(
        registry
            .resolve("export_ledger", Caller::Subagent)
            .unwrap_err()
            .code(),
        ErrorCode::NotVisible
    );
}

#[test]
fn registry_call_resolves_for_the_caller() {
    let registry = visibility_registry();
    let out =
        futures_executor::block_on(registry.call("list_invoices", json!({ "customer": "cus_42" })))
            .unwrap();
    assert_eq!(out.value, json!({ "count": 6 }));
    let error = futures_executor::block_on(registry.call("wipe_cache", Value::Null)).unwrap_err();
    assert_eq!(error.code(), ErrorCode::UnknownTool);
    let out = futures_executor::block_on(registry.call_with(
        "wipe_cache",
        Value::Null,
        toolwright::context::CallContext::builder().caller(Caller::User),
    ))
    .unwrap();
    assert_eq!(out.value, json!(true));
}

/// Says which tool and call its context names.
#[tool(effect = read)]
async fn whoami(_: NoInput, ctx: ToolContext) -> Value {
    json!({ "tool": ctx.tool_name(), "call": ctx.call_id() })
}

// A direct call's context names the tool it resolved to and the id it was given (the registry
// shares the tool's name with the context, the builder copies a given id).
#[test]
fn a_direct_calls_context_names_its_tool_and_id() {
    let registry = Registry::from_tools([whoami::TOOL]).unwrap();
    let id = String::from("c-7");
    let out = futures_executor::block_on(registry.call_with(
        "whoami",
        json!({}),
        toolwright::context::CallContext::builder().call_id(&id),
    ))
    .unwrap();
    assert_eq!(out.value, json!({ "tool": "whoami", "call": "c-7" }));
    let out = futures_executor::block_on(registry.call("whoami", json!({}))).unwrap();
    assert_eq!(out.value["tool"], "whoami");
    assert!(out.value["call"].as_str().unwrap().starts_with("call-"));
}

// ---------------------------------------------------------------------------------------------
// Lists per audience.

fn listed(registry: &Registry, audience: Audience) -> Vec<String> {
    registry
        .list(audience, Format::Anthropic)
        .entries()
        .iter()
        .map(|e| e.name.clone())
        .collect()
}

#[test]
fn each_audience_sees_its_own_list() {
    let registry = visibility_registry();
    assert_eq!(
        listed(&registry, Audience::Model),
        [
            "billing__lookup",
            "list_invoices",
            "open_incident",
            "submit_report",
            "tool_search",
            "tool_call"
        ]
    );
    assert_eq!(
        listed(&registry, Audience::Subagent),
        [
            "billing__lookup",
            "list_invoices",
            "submit_report",
            "tool_search",
            "tool_call"
        ]
    );
    assert_eq!(
        listed(&registry, Audience::User),
        [
            "billing__lookup",
            "export_ledger",
            "find_archived_invoices",
            "list_invoices",
            "open_incident",
            "submit_report",
            "wipe_cache"
        ]
    );
}

#[test]
fn meta_tools_appear_only_where_deferred_tools_are_visible() {
    // `export_ledger` is deferred and kept from subagents: only the top-level model has a
    // deferred tool to find.
    let registry =
        Registry::from_tools([list_invoices::TOOL, export_ledger::TOOL, wipe_cache::TOOL]).unwrap();
    assert!(registry.has_deferred(Audience::Model));
    assert!(!registry.has_deferred(Audience::Subagent));
    assert!(!registry.has_deferred(Audience::User));
    assert_eq!(
        listed(&registry, Audience::Model),
        ["list_invoices", "tool_search", "tool_call"]
    );
    assert_eq!(listed(&registry, Audience::Subagent), ["list_invoices"]);
    assert_eq!(
        listed(&registry, Audience::User),
        ["export_ledger", "list_invoices", "wipe_cache"]
    );

    let plain = Registry::from_tools([list_invoices::TOOL, open_incident::TOOL]).unwrap();
    for audience in Audience::ALL {
        assert!(!plain.has_deferred(audience));
        assert!(
            !listed(&plain, audience)
                .iter()
                .any(|n| n.starts_with("tool_")),
            "{audience:?}"
        );
    }
}

#[test]
fn meta_tools_are_rendered_in_every_format() {
    let registry = visibility_registry();
    for format in Format::ALL {
        let list: Value =
            serde_json::from_str(registry.list(Audience::Model, format).json()).unwrap();
        let names: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .unwrap()
            })
            .collect();
        assert_eq!(
            &names[names.len() - 2..],
            ["tool_search", "tool_call"],
            "{format:?}"
        );
    }
}

#[test]
fn entries_point_back_at_their_tools() {
    let registry = visibility_registry();
    for audience in Audience::ALL {
        for entry in registry.list(audience, Format::Mcp).entries() {
            match entry.tool {
                Some(index) => assert_eq!(registry.tools()[index].name(), entry.name),
                None => assert!(["tool_search", "tool_call"].contains(&entry.name.as_str())),
            }
            let value: Value = serde_json::from_str(entry.json.get()).unwrap();
            assert_eq!(value["name"], entry.name.as_str());
        }
    }
}

#[test]
fn search_finds_deferred_tools_the_audience_may_call() {
    let registry = visibility_registry();
    let found = |query: &str, audience| -> Vec<String> {
        registry
            .search(query, audience)
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    };
    assert_eq!(found("ledger export", Audience::Model), ["export_ledger"]);
    assert_eq!(found("Ledger EXPORT", Audience::User), ["export_ledger"]);
    // Kept from subagents, so not found by them.
    assert!(found("ledger export", Audience::Subagent).is_empty());
    // Best match first; listed (not deferred) tools are never search results.
    assert_eq!(
        found("archived invoices ledger", Audience::Model),
        ["find_archived_invoices", "export_ledger"]
    );
    assert!(!found("invoices", Audience::Model).contains(&"list_invoices".to_owned()));
    assert!(found("kubernetes", Audience::Model).is_empty());
    // An empty query lists every deferred tool.
    assert_eq!(
        found("", Audience::Model),
        ["export_ledger", "find_archived_invoices"]
    );
}

#[test]
fn lists_are_serialized_once_per_audience_and_format() {
    let registry = visibility_registry();
    let clone = registry.clone();
    for audience in Audience::ALL {
        for format in Format::ALL {
            let first = registry.list(audience, format);
            let again = registry.list(audience, format);
            assert!(std::ptr::eq(first, again), "{audience:?} {format:?}");
            assert!(std::ptr::eq(first.json(), again.json()));
            assert!(std::ptr::eq(first, clone.list(audience, format)));

            let spliced = format!(
                "[{}]",
                first
                    .entries()
                    .iter()
                    .map(|e| e.json.get())
                    .collect::<Vec<_>>()
                    .join(",")
            );
            assert_eq!(spliced, first.json());
            let parsed: Vec<Value> = serde_json::from_str(first.json()).unwrap();
            assert_eq!(parsed.len(), first.entries().len());
        }
    }
    // Different audiences and formats are different lists.
    assert!(!std::ptr::eq(
        registry.list(Audience::Model, Format::OpenAi),
        registry.list(Audience::User, Format::OpenAi)
    ));
    assert!(!std::ptr::eq(
        registry.list(Audience::Model, Format::OpenAi),
        registry.list(Audience::Model, Format::Anthropic)
    ));
}

#[test]
fn an_empty_registry_has_empty_lists() {
    let registry = Registry::from_tools([]).unwrap();
    for audience in Audience::ALL {
        assert_eq!(registry.list(audience, Format::Mcp).json(), "[]");
        assert!(registry.search("", audience).is_empty());
    }
}
