//! Titles and summaries served in two locales, `zh` (the registry's default: the tools' own
//! `title` and `summary` are Chinese, as in the plugin SDK's seed) and `en` (`i18n(en(...))`):
//! the catalog, search (the registry's and `tool_search` in a turn), the MCP list, and calls
//! from the user interface. The rule: a locale's title, else the base title; a locale's
//! summary, the base summary only in the default locale, otherwise none.

use rmcp::ServiceExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolwright::mcp::McpServer;
use toolwright::prelude::*;
use toolwright::registry::{ApprovalPolicy, Audience, ToolKind, ToolOrigin};
use toolwright::runtime::{Runtime, RuntimeError, SessionSpec, StepOutcome, ToolCall};
use toolwright::{Caller, Effect};

use crate::support::{alice, builder};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Service {
    /// The service's name.
    name: String,
}

/// Restarts a service and waits until it is healthy.
#[tool(
    toolset = "ops",
    effect = write,
    deferred,
    title = "重启服务",
    summary = "重启一个服务并等待它恢复健康",
    i18n(en(title = "Restart service", summary = "Restarts a service and waits until it is healthy"))
)]
async fn restart(args: Service) -> Result<Value, ToolError> {
    Ok(json!({ "restarted": args.name }))
}

/// Reads a service's recent log lines.
#[tool(
    toolset = "ops",
    effect = read,
    title = "查看日志",
    summary = "读取服务最近的日志",
    i18n(en(title = "Read logs"))
)]
async fn logs(args: Service) -> Result<Value, ToolError> {
    Ok(json!({ "service": args.name, "lines": [] }))
}

/// A runtime whose tools' own texts are Chinese.
fn runtime() -> Runtime {
    builder([restart::TOOL, logs::TOOL])
        .default_locale("zh")
        .build()
        .expect("valid runtime")
}

/// `(title, summary)` of each catalog entry.
fn texts(catalog: &toolwright::registry::Catalog) -> Vec<(String, Option<String>)> {
    catalog
        .entries()
        .iter()
        .map(|e| (e.texts.title.clone().unwrap(), e.texts.summary.clone()))
        .collect()
}

fn pair(title: &str, summary: Option<&str>) -> (String, Option<String>) {
    (title.to_owned(), summary.map(str::to_owned))
}

#[test]
fn the_catalog_resolves_texts_with_the_fallback_rule() {
    let runtime = runtime();
    assert_eq!(runtime.registry().default_locale(), "zh");
    let english = runtime.catalog(Audience::User, "en-US");
    assert_eq!(
        texts(&english),
        [
            // No English summary: English readers see no summary line.
            pair("Read logs", None),
            pair(
                "Restart service",
                Some("Restarts a service and waits until it is healthy")
            ),
        ]
    );
    let chinese = runtime.catalog(Audience::User, "zh-Hans-CN");
    assert_eq!(
        texts(&chinese),
        [
            pair("查看日志", Some("读取服务最近的日志")),
            pair("重启服务", Some("重启一个服务并等待它恢复健康")),
        ]
    );
    // A locale no tool has texts in: the base titles (never nameless), no summaries.
    assert_eq!(
        texts(&runtime.catalog(Audience::User, "de")),
        [pair("查看日志", None), pair("重启服务", None),]
    );

    let restart = english.get("ops.restart").expect("by id");
    assert_eq!(restart.name, "ops__restart");
    assert_eq!(restart.toolset.as_deref(), Some("ops"));
    assert_eq!(restart.effect, Effect::Write);
    assert_eq!(restart.approval, ApprovalPolicy::Never);
    assert_eq!(restart.kind, ToolKind::Plain);
    assert_eq!(restart.origin, ToolOrigin::Local);
    assert!(restart.visibility.deferred && !restart.visibility.user_only);
    assert_eq!(restart.input_schema["required"], json!(["name"]));

    // Serialized once; the JSON a page renders.
    let json: Value = serde_json::from_str(english.json()).unwrap();
    assert_eq!(json[0]["title"], "Read logs");
    assert_eq!(json[0]["locale"], "en");
    assert!(json[0].get("summary").is_none(), "{json}");
    assert_eq!(json[1]["visibility"]["deferred"], true);
    assert!(std::sync::Arc::ptr_eq(
        &english,
        &runtime.catalog(Audience::User, "EN_gb")
    ));
}

#[test]
fn registry_search_matches_localized_titles_and_summaries() {
    let registry = runtime().registry();
    let names = |query: &str| -> Vec<String> {
        registry
            .search(query, Audience::Model)
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    };
    assert_eq!(names("重启"), ["ops__restart"]);
    assert_eq!(names("healthy"), ["ops__restart"]);
    assert_eq!(names("Restart service"), ["ops__restart"]);
    assert!(names("kubernetes").is_empty());
}

/// The `tool_search` result of a turn in a session opened with `spec`.
async fn tool_search(runtime: &Runtime, spec: SessionSpec, query: &str) -> Value {
    let session = runtime.open_session(spec).await.unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let arguments = json!({ "query": query }).to_string();
    let outcome = turn
        .step(vec![ToolCall::new("s1", "tool_search", arguments)])
        .await
        .unwrap();
    let StepOutcome::Completed { results, .. } = outcome else {
        panic!("tool_search answers at once: {outcome:?}");
    };
    results[0].output.clone()
}

#[tokio::test]
async fn tool_search_gives_titles_in_the_sessions_locale() {
    let runtime = runtime();
    let english = tool_search(&runtime, SessionSpec::new("en").locale("en-US"), "restart").await;
    assert_eq!(english["tools"][0]["name"], "ops__restart");
    assert_eq!(english["tools"][0]["title"], "Restart service");
    // Without a locale, the registry's default: the tools' own texts.
    let chinese = tool_search(&runtime, SessionSpec::new("zh"), "服务").await;
    assert_eq!(chinese["tools"][0]["title"], "重启服务");
    // The session keeps its locale, for hosts to read.
    let (record, _) = runtime.store().session("en").await.unwrap().unwrap();
    assert_eq!(record.locale.as_deref(), Some("en-US"));
}

/// `(title, annotations.title)` of each tool an MCP client lists from `server`.
async fn mcp_titles(server: McpServer) -> Vec<(Option<String>, Option<String>)> {
    let (a, b) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(a).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(b).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let _ = client.cancel().await;
    // The meta-tools (`tool_search`, `tool_call`) have no title.
    tools
        .into_iter()
        .filter(|t| t.name.starts_with("ops__"))
        .map(|t| (t.title, t.annotations.and_then(|a| a.title)))
        .collect()
}

fn titled(title: &str) -> (Option<String>, Option<String>) {
    (Some(title.to_owned()), Some(title.to_owned()))
}

#[tokio::test]
async fn the_mcp_list_serves_titles_in_the_servers_locale() {
    let runtime = runtime();
    // `restart` is deferred: MCP lists what the model's list holds.
    let english = McpServer::new(runtime.clone()).locale("en").unwrap();
    assert_eq!(mcp_titles(english).await, [titled("Read logs")]);
    assert_eq!(
        mcp_titles(McpServer::new(runtime.clone())).await,
        [titled("查看日志")]
    );
    let chinese = McpServer::new(runtime.clone()).locale("zh-CN").unwrap();
    assert_eq!(mcp_titles(chinese).await, [titled("查看日志")]);
    let error = McpServer::new(runtime).locale("en US").unwrap_err();
    assert!(
        error.to_string().contains("`en US` is not a locale"),
        "{error}"
    );
}

#[tokio::test]
async fn ui_calls_give_texts_in_the_sessions_locale() {
    let runtime = runtime();
    let page = runtime
        .open_session(SessionSpec::new("ui:alice").locale("en").initiator(alice()))
        .await
        .unwrap();
    let invoked = page
        .invoke(alice(), "ops.logs", json!({ "name": "api" }))
        .await
        .unwrap();
    assert!(invoked.result().is_some());
    let logs = page.tool_texts("ops.logs").await.unwrap();
    assert_eq!(logs.title.as_deref(), Some("Read logs"));
    assert_eq!(logs.summary, None);
    let restart = page.tool_texts("ops__restart").await.unwrap();
    assert_eq!(
        restart.summary.as_deref(),
        Some("Restarts a service and waits until it is healthy")
    );
    assert_eq!(
        texts(&page.catalog().await.unwrap())[0],
        pair("Read logs", None)
    );
    assert_eq!(page.locale().await.unwrap(), "en");

    // The person switches the interface to Chinese.
    page.set_locale(Some("zh")).await.unwrap();
    assert_eq!(
        texts(&page.catalog().await.unwrap())[0],
        pair("查看日志", Some("读取服务最近的日志"))
    );
    let restart = page.tool_texts("ops__restart").await.unwrap();
    assert_eq!(restart.title.as_deref(), Some("重启服务"));
    page.set_locale(None).await.unwrap();
    assert_eq!(page.locale().await.unwrap(), "zh");

    // Not a language tag: refused with the reason.
    let refused = runtime
        .open_session(SessionSpec::new("ui:bad").locale("english please"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, RuntimeError::InvalidLocale(_)),
        "{refused}"
    );
    assert!(page.set_locale(Some("")).await.is_err());
}

/// A host serving its own MCP-shaped list from a turn gets the titles in the session's locale.
#[tokio::test]
async fn a_turns_mcp_list_gives_titles_in_the_sessions_locale() {
    let runtime = runtime();
    let titles = |list: String| -> Vec<Value> {
        let list: Value = serde_json::from_str(&list).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].clone())
            .collect()
    };
    for (id, locale, want) in [
        ("mcp-en", Some("en"), json!("Read logs")),
        ("mcp-zh", None, json!("查看日志")),
    ] {
        let mut spec = SessionSpec::new(id);
        if let Some(locale) = locale {
            spec = spec.locale(locale);
        }
        let session = runtime.open_session(spec).await.unwrap();
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let list = turn
            .tool_list(toolwright::registry::Format::Mcp)
            .await
            .unwrap();
        assert!(titles(list).contains(&want), "{id}");
    }
}
