//! Tools defined and called with toolwright's lean core: `#[tool]`, the registry, schemas,
//! validation with defaults, the provider exports and a direct call, with no async runtime.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;
use toolwright::registry::{Audience, Format};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct StatusArgs {
    /// Service name, e.g. payment-api.
    service: String,
    /// How many recent checks to include.
    #[serde(default = "three")]
    checks: u32,
}

fn three() -> u32 {
    3
}

#[derive(Serialize)]
struct Status {
    service: String,
    checks: u32,
    healthy: bool,
}

/// Current health of one service. Use when the user asks whether a service is up.
#[tool(effect = read)]
async fn get_service_status(args: StatusArgs) -> Result<Status, ToolError> {
    Ok(Status {
        service: args.service,
        checks: args.checks,
        healthy: true,
    })
}

/// Polls `future` to its end on this thread. A tool body that awaits nothing is ready at once;
/// this crate has no async runtime, on purpose.
fn run<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        std::thread::yield_now();
    }
}

fn main() {
    let registry = Registry::from_tools([get_service_status::TOOL]).expect("a valid registry");

    let out = run(registry.call(
        "get_service_status",
        serde_json::json!({ "service": "payment-api" }),
    ))
    .expect("a valid call");
    assert_eq!(out.value["healthy"], true);
    assert_eq!(out.value["checks"], 3, "validation filled in the default");

    let refused = run(registry.call("get_service_status", serde_json::json!({ "service": 7 })));
    assert!(refused.is_err(), "input that breaks the schema is refused");

    for format in [Format::OpenAi, Format::Anthropic] {
        let list = registry.list(Audience::Model, format);
        let tools: serde_json::Value = serde_json::from_str(list.json()).expect("JSON");
        assert!(
            tools.to_string().contains("get_service_status"),
            "{format:?}: {tools}"
        );
    }
    println!("lean core: defined, validated, exported and called get_service_status");
}
