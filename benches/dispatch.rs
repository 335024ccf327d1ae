//! Dispatch overhead and listing, side by side in one run (figures in BENCHMARKS.md):
//!
//! - `dispatch/floor`: `serde_json::from_str` into the argument struct, a direct call of the fn,
//!   `serde_json::to_string` of its output — what any framework must at least do;
//! - `dispatch/registry_call`: toolwright's registry call (strict parse, schema validation,
//!   defaults, execution, output);
//! - `dispatch/parts` and `dispatch/parts_value_out`: the parts a validating call is made of and
//!   nothing else, as issue 28 measured them: `serde_json::from_str` to a `Value`, a prebuilt
//!   `jsonschema` validator's `is_valid` (of the tool's own input schema), `from_value` into the
//!   struct, the call, `to_string` of the output; the second gives the output as a `Value`
//!   first, as `CallOutput`'s contract does. What a registry
//!   call costs beyond the second is dispatch, defaults, the context and the panic guard;
//! - `dispatch/registry_call_dynamic`: the same tool defined at run time (`DynamicTool`, its
//!   schema the argument struct's, its handler deserializing into it): what defining a tool from
//!   data costs per call against `#[tool]`;
//! - `dispatch/runtime_step`: a full runtime step of one call with approval `never` (events on, no
//!   subscriber; the turn recorded in an in-memory SQLite store);
//! - `dispatch/rmcp_router` and `dispatch/rmcp_server_handler`: the same tool through rmcp 3.x's
//!   `#[tool]` path in process, with a stored `ToolRouter` and with the documented
//!   `#[rmcp::tool_router(server_handler)]` form (a request context needs a peer, whose constructor is
//!   private: one is captured by serving once over `tokio::io::duplex`);
//! - the invalid input `{"service":"","limit":500}` through the registry and the runtime;
//! - `listing/*`: the model-facing list of 200 tools (toolwright's cached bytes) against rmcp's
//!   `tools/list` result for the same 200 tools, serialized;
//! - `scaling/*`: the registry call with 1, 50 and 200 registered tools.

use std::sync::OnceLock;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolRequestParams, ListToolsResult};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde::{Deserialize, Serialize};
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::registry::{Audience, Format, ToolDescriptor};
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore, ToolCall};

#[path = "common/read_logs.rs"]
mod common;

use common::{INPUT, Level, ReadLogs, Window, default_limit, lines, read_logs};

const INVALID: &str = r#"{"service":"","limit":500}"#;

// ---------------------------------------------------------------------------------------------
// rmcp's side: the same tool with rmcp's macros.

#[derive(Deserialize, rmcp::schemars::JsonSchema)]
struct RmcpReadLogs {
    #[schemars(length(min = 1, max = 64))]
    service: String,
    #[serde(default)]
    window: Window,
    #[serde(default)]
    level: Level,
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 200))]
    limit: u32,
}

#[derive(Serialize, rmcp::schemars::JsonSchema)]
struct RmcpLines {
    lines: Vec<String>,
    truncated: bool,
}

/// The `#[rmcp::tool_router(server_handler)]` form rmcp documents.
#[derive(Clone)]
struct RmcpServer;

#[rmcp::tool_router(server_handler)]
impl RmcpServer {
    /// Reads the latest error lines of one service.
    #[rmcp::tool(name = "read_logs")]
    async fn read_logs(&self, Parameters(args): Parameters<RmcpReadLogs>) -> Json<RmcpLines> {
        let out = lines(&ReadLogs {
            service: args.service,
            window: args.window,
            level: args.level,
            limit: args.limit,
        });
        Json(RmcpLines {
            lines: out.lines,
            truncated: out.truncated,
        })
    }
}

/// A server whose only job is to hand out a real request context (peer included).
#[derive(Clone)]
struct ContextTrap;

static CONTEXT: OnceLock<RequestContext<RoleServer>> = OnceLock::new();

impl ServerHandler for ContextTrap {
    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let _ = CONTEXT.set(cx);
        Ok(rmcp::model::CallToolResult::success(Vec::new()).into())
    }
}

/// A request context captured from one call served over an in-memory pipe.
fn request_context(rt: &tokio::runtime::Runtime) -> RequestContext<RoleServer> {
    rt.block_on(async {
        let (a, b) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let server = ContextTrap.serve(a).await.expect("serve");
            let _ = server.waiting().await;
        });
        let client = ().serve(b).await.expect("client");
        let _ = client
            .call_tool(CallToolRequestParams::new("trap"))
            .await
            .expect("trap call");
        // The client stays connected for the life of the benchmark.
        std::mem::forget(client);
    });
    CONTEXT.get().expect("captured").clone()
}

fn arguments(text: &str) -> serde_json::Map<String, serde_json::Value> {
    serde_json::from_str(text).expect("object")
}

// ---------------------------------------------------------------------------------------------
// Registries of many tools: copies of `read_logs` under other names.

fn copies(n: usize) -> Vec<&'static ToolDescriptor> {
    let mut tools = vec![read_logs::TOOL];
    for i in 1..n {
        let mut copy = *read_logs::TOOL;
        copy.name = Box::leak(format!("read_logs_{i}").into_boxed_str());
        copy.fn_name = copy.name;
        tools.push(Box::leak(Box::new(copy)));
    }
    tools
}

fn rmcp_router(n: usize) -> ToolRouter<RmcpServer> {
    let mut router = RmcpServer::tool_router();
    let base = router.list_all().remove(0);
    for i in 1..n {
        let mut tool = base.clone();
        tool.name = format!("read_logs_{i}").into();
        router = router.with_route(rmcp::handler::server::router::tool::ToolRoute::new_dyn(
            tool,
            |cx: ToolCallContext<'_, RmcpServer>| {
                Box::pin(async move {
                    let _ = cx;
                    Ok(rmcp::model::CallToolResult::success(Vec::new()).into())
                })
            },
        ));
    }
    router
}

// ---------------------------------------------------------------------------------------------

/// `read_logs` defined from data: the argument struct's schema, a handler that deserializes
/// into it and serializes the output back.
fn dynamic_registry() -> Registry {
    let schema = serde_json::to_value(schemars::schema_for!(ReadLogs)).expect("schema");
    let tool = toolwright::DynamicTool::new("read_logs_dynamic", toolwright::Effect::Read)
        .description("Reads recent log lines of one service.")
        .input_schema(schema)
        .handler(|input, _ctx| async move {
            let args: ReadLogs = serde_json::from_value(input)?;
            Ok(serde_json::to_value(read_logs(args).await?)?)
        });
    let tool = toolwright::registry::Tool::dynamic(tool).expect("a valid definition");
    Registry::from_tools([])
        .expect("registry")
        .with_dynamic([std::sync::Arc::new(tool)])
        .expect("registry")
}

fn dispatch(c: &mut Criterion) {
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let registry = Registry::from_tools([read_logs::TOOL]).expect("registry");
    let runtime = Runtime::builder(registry.clone())
        .store(SqliteStore::in_memory().expect("store"))
        .build()
        .expect("runtime");
    let turn = tokio.block_on(async {
        runtime
            .open_session(SessionSpec::new("bench"))
            .await
            .expect("session")
            .begin_turn(None, Caller::Model)
            .await
            .expect("turn")
    });
    let cx = request_context(&tokio);
    let router = RmcpServer::tool_router();
    let server = RmcpServer;

    let mut group = c.benchmark_group("dispatch");
    group.bench_function("floor", |b| {
        b.iter(|| {
            let args: ReadLogs = serde_json::from_str(INPUT).expect("input");
            let out = futures_executor::block_on(read_logs(args)).expect("output");
            serde_json::to_string(&out).expect("json")
        })
    });
    // The parts alone: the validator compiled once from the tool's own input schema.
    let schema = registry.get("read_logs").expect("tool").input_schema();
    let validator = jsonschema::validator_for(schema).expect("validator");
    let call_parts = || {
        let input: serde_json::Value = serde_json::from_str(INPUT).expect("input");
        assert!(validator.is_valid(&input), "valid input");
        let args: ReadLogs = serde_json::from_value(input).expect("args");
        futures_executor::block_on(read_logs(args)).expect("output")
    };
    group.bench_function("parts", |b| {
        b.iter(|| serde_json::to_string(&call_parts()).expect("json"))
    });
    group.bench_function("parts_value_out", |b| {
        b.iter(|| {
            let value = serde_json::to_value(call_parts()).expect("value");
            serde_json::to_string(&value).expect("json")
        })
    });
    group.bench_function("registry_call", |b| {
        b.iter(|| {
            let input: serde_json::Value = serde_json::from_str(INPUT).expect("input");
            let out =
                futures_executor::block_on(registry.call("read_logs", input)).expect("output");
            serde_json::to_string(&out.value).expect("json")
        })
    });
    let dynamic = dynamic_registry();
    group.bench_function("registry_call_dynamic", |b| {
        b.iter(|| {
            let input: serde_json::Value = serde_json::from_str(INPUT).expect("input");
            let out = futures_executor::block_on(dynamic.call("read_logs_dynamic", input))
                .expect("output");
            serde_json::to_string(&out.value).expect("json")
        })
    });
    group.bench_function("runtime_step", |b| {
        b.iter(|| {
            tokio
                .block_on(turn.step(vec![ToolCall::new("c", "read_logs", INPUT)]))
                .expect("step")
        })
    });
    group.bench_function("rmcp_router", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let params =
                    CallToolRequestParams::new("read_logs").with_arguments(arguments(INPUT));
                let result = router
                    .call(ToolCallContext::new(&server, params, cx.clone()))
                    .await
                    .expect("call");
                serde_json::to_string(&rmcp::model::ServerResult::from(result)).expect("json")
            })
        })
    });
    group.bench_function("rmcp_server_handler", |b| {
        b.iter(|| {
            tokio.block_on(async {
                let params =
                    CallToolRequestParams::new("read_logs").with_arguments(arguments(INPUT));
                let result = server.call_tool(params, cx.clone()).await.expect("call");
                serde_json::to_string(&rmcp::model::ServerResult::from(result)).expect("json")
            })
        })
    });
    group.bench_function("registry_call_invalid", |b| {
        b.iter(|| {
            let input: serde_json::Value = serde_json::from_str(INVALID).expect("input");
            futures_executor::block_on(registry.call("read_logs", input)).expect_err("invalid")
        })
    });
    group.bench_function("runtime_step_invalid", |b| {
        b.iter(|| {
            tokio
                .block_on(turn.step(vec![ToolCall::new("c", "read_logs", INVALID)]))
                .expect("step")
        })
    });
    group.finish();

    let mut listing = c.benchmark_group("listing");
    let tools = Registry::from_tools(copies(200)).expect("200 tools");
    let rmcp200 = rmcp_router(200);
    assert_eq!(rmcp200.list_all().len(), 200);
    listing.bench_function("toolwright_200_cached", |b| {
        b.iter(|| {
            // What a server writes for `tools/list`: the cached bytes.
            tools.list(Audience::Model, Format::Mcp).json().len()
        })
    });
    listing.bench_function("rmcp_200_tools_list", |b| {
        b.iter(|| {
            let result = ListToolsResult::with_all_items(rmcp200.list_all());
            serde_json::to_string(&result).expect("json").len()
        })
    });
    listing.finish();

    let mut scaling = c.benchmark_group("scaling");
    for n in [1, 50, 200] {
        let registry = Registry::from_tools(copies(n)).expect("registry");
        scaling.bench_with_input(
            BenchmarkId::new("registry_call", n),
            &registry,
            |b, registry| {
                b.iter(|| {
                    let input: serde_json::Value = serde_json::from_str(INPUT).expect("input");
                    let out = futures_executor::block_on(registry.call("read_logs", input))
                        .expect("output");
                    serde_json::to_string(&out.value).expect("json")
                })
            },
        );
    }
    scaling.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
