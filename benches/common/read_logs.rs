//! The seed's `read_logs` tool, the subject of the dispatch and step benchmarks: service 1–64
//! chars, a `window` enum with a default, a `level` enum with a default, `limit` 1–200 with
//! default 50.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

/// The arguments.
#[derive(Deserialize, JsonSchema, ToolInput)]
pub(crate) struct ReadLogs {
    /// Service name, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    pub(crate) service: String,
    /// How far back to read.
    #[serde(default)]
    pub(crate) window: Window,
    /// The lowest level to include.
    #[serde(default)]
    pub(crate) level: Level,
    /// How many lines at most.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 200))]
    pub(crate) limit: u32,
}

pub(crate) fn default_limit() -> u32 {
    50
}

#[derive(Deserialize, Serialize, JsonSchema, Default, Clone, Copy)]
pub(crate) enum Window {
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
pub(crate) enum Level {
    #[default]
    Error,
    Warn,
    All,
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct Lines {
    pub(crate) lines: Vec<String>,
    pub(crate) truncated: bool,
}

pub(crate) fn lines(args: &ReadLogs) -> Lines {
    let n = args.limit.min(3) as usize;
    let line = format!(
        "{} {:?} {:?}",
        args.service, args.window as u8, args.level as u8
    );
    Lines {
        lines: vec![line; n],
        truncated: false,
    }
}

/// Reads the latest error lines of one service.
#[tool(effect = read)]
pub(crate) async fn read_logs(args: ReadLogs) -> Result<Lines, ToolError> {
    Ok(lines(&args))
}

/// The input every benchmark calls with.
pub(crate) const INPUT: &str = r#"{"service":"payment-api","window":"5m","limit":20}"#;
