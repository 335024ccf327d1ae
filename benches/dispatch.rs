//! Dispatch overhead of the direct call path against the floor (parse, call, serialize).
//! Issue #6 extends this with the runtime and rmcp comparisons.

use criterion::{Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ReadLogs {
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

fn default_limit() -> u32 {
    50
}

#[derive(Deserialize, Serialize, JsonSchema, Default, Clone, Copy)]
enum Window {
    #[serde(rename = "5m")]
    FiveMinutes,
    #[default]
    #[serde(rename = "1h")]
    OneHour,
    #[serde(rename = "24h")]
    OneDay,
}

#[derive(Deserialize, Serialize, JsonSchema, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Level {
    #[default]
    Error,
    Warn,
    All,
}

#[derive(Serialize, JsonSchema)]
struct Lines {
    lines: Vec<String>,
    truncated: bool,
}

/// Reads the latest error lines of one service.
#[tool(effect = read)]
async fn read_logs(args: ReadLogs) -> Result<Lines, ToolError> {
    let n = args.limit.min(3) as usize;
    let line = format!(
        "{} {:?} {:?}",
        args.service, args.window as u8, args.level as u8
    );
    Ok(Lines {
        lines: vec![line; n],
        truncated: false,
    })
}

const INPUT: &str = r#"{"service":"payment-api","window":"5m","limit":20}"#;

fn dispatch(c: &mut Criterion) {
    let registry = Registry::from_tools([read_logs::TOOL]).expect("registry");
    let mut group = c.benchmark_group("dispatch");
    group.bench_function("floor", |b| {
        b.iter(|| {
            let args: ReadLogs = serde_json::from_str(INPUT).expect("input");
            let out = futures_executor::block_on(read_logs(args)).expect("output");
            serde_json::to_string(&out).expect("json")
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
    group.bench_function("registry_call_invalid", |b| {
        b.iter(|| {
            let input = serde_json::json!({ "service": "", "limit": 500 });
            futures_executor::block_on(registry.call("read_logs", input)).expect_err("invalid")
        })
    });
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
