//! Operations tools from the eve seed (chapter 4): service status, logs, restarts and error
//! budgets, over [`OpsBackend`], a fake ops and log API registered as application state.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::Principal;
use toolwright::prelude::*;

/// The ops, log and metrics APIs the tools call, faked in-process with fixed data. Register it
/// on the host (`DetachedHost::default().with_state(OpsBackend::default())`).
#[derive(Debug, Default)]
pub(crate) struct OpsBackend {
    changes: Mutex<Vec<Change>>,
}

/// One entry of the change log. Its idempotency key makes a re-run of the same call a no-op.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Change {
    /// The change-log id, e.g. chg-0001.
    id: String,
    /// What changed and why.
    summary: String,
    /// Who asked for the change, when a signed-in user did.
    requested_by: Option<String>,
    #[serde(skip)]
    key: String,
}

#[derive(Debug)]
pub(crate) struct Service {
    pub(crate) name: &'static str,
    health: Health,
    pub(crate) instances: u32,
    pub(crate) releases: &'static [&'static str],
    error_every: usize,
    warn_every: usize,
    errors: &'static [&'static str],
    warnings: &'static [&'static str],
    requests_30d: u64,
    errors_30d: u64,
}

const SERVICES: &[Service] = &[
    Service {
        name: "payment-api",
        health: Health::Degraded,
        instances: 6,
        releases: &["v2.14.0", "v2.13.2", "v2.13.1"],
        error_every: 2,
        warn_every: 3,
        errors: &[
            "upstream timeout calling card-gateway after 3000 ms",
            "charge ch_3PaXk2 failed: card-gateway returned 502",
            "connection pool exhausted (64/64 in use)",
        ],
        warnings: &["retrying card-gateway request (attempt 2 of 3)"],
        requests_30d: 48_000_000,
        errors_30d: 31_200,
    },
    Service {
        name: "search-api",
        health: Health::Healthy,
        instances: 4,
        releases: &["v5.2.1", "v5.2.0"],
        error_every: 97,
        warn_every: 11,
        errors: &["query parser rejected input: unbalanced quote"],
        warnings: &["slow query: 840 ms for catalog search"],
        requests_30d: 120_000_000,
        errors_30d: 2_400,
    },
    Service {
        name: "notification-worker",
        health: Health::Down,
        instances: 0,
        releases: &["v0.9.4", "v0.9.3"],
        error_every: 1,
        warn_every: 1,
        errors: &["crash loop: missing SMTP_PASSWORD"],
        warnings: &[],
        requests_30d: 3_000_000,
        errors_30d: 90_000,
    },
];

impl Service {
    pub(crate) fn healthy(&self) -> bool {
        self.health == Health::Healthy
    }

    pub(crate) fn error_rate_percent(&self) -> f64 {
        (self.errors_30d as f64 * 10_000.0 / self.requests_30d as f64).round() / 100.0
    }
}

/// Seconds between two fake log entries.
const LOG_INTERVAL: u64 = 30;

const INFO_LINES: &[&str] = &["request served in 42 ms"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Severity {
    Info,
    Warn,
    Error,
}

impl Severity {
    const fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "INFO",
            Severity::Warn => "WARN",
            Severity::Error => "ERROR",
        }
    }
}

impl OpsBackend {
    pub(crate) fn service(&self, name: &str) -> Result<&'static Service, ToolError> {
        SERVICES.iter().find(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = SERVICES.iter().map(|s| s.name).collect();
            ToolError::new(format!(
                "the ops API has no service named `{name}`; known services: {}",
                known.join(", ")
            ))
        })
    }

    fn search_logs(
        &self,
        service: &str,
        window: Window,
        level: Level,
        limit: usize,
    ) -> Result<Vec<String>, ToolError> {
        let service = self.service(service)?;
        let entries = (window.seconds() / LOG_INTERVAL) as usize;
        Ok((0..entries)
            .filter_map(|i| {
                let (severity, messages) = if i % service.error_every == 0 {
                    (Severity::Error, service.errors)
                } else if i % service.warn_every == 0 && !service.warnings.is_empty() {
                    (Severity::Warn, service.warnings)
                } else {
                    (Severity::Info, INFO_LINES)
                };
                level.includes(severity).then(|| {
                    format!(
                        "{} {} {} {}",
                        timestamp(i as u64 * LOG_INTERVAL),
                        severity.as_str(),
                        service.name,
                        messages[i % messages.len()]
                    )
                })
            })
            .take(limit)
            .collect())
    }

    /// Records a change under the idempotency key `key`; a key seen before returns the change
    /// it recorded, as an upstream API honouring idempotency keys does.
    pub(crate) fn record_change(
        &self,
        key: &str,
        summary: String,
        requested_by: Option<&Principal>,
    ) -> Change {
        let mut changes = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(change) = changes.iter().find(|c| c.key == key) {
            return change.clone();
        }
        let change = Change {
            id: format!("chg-{:04}", changes.len() + 1),
            summary,
            requested_by: requested_by.map(|p| p.principal_id.clone()),
            key: key.to_owned(),
        };
        changes.push(change.clone());
        change
    }
}

/// `seconds_ago` before the fake clock's now, 2026-03-14T12:00:00Z (at most a day back).
pub(crate) fn timestamp(seconds_ago: u64) -> String {
    const DAY: u64 = 86_400;
    let at = DAY + 12 * 3_600 - seconds_ago.min(DAY);
    let (day, second) = (13 + at / DAY, at % DAY);
    format!(
        "2026-03-{day:02}T{:02}:{:02}:{:02}Z",
        second / 3_600,
        second / 60 % 60,
        second % 60
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Health {
    Healthy,
    Degraded,
    Down,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct StatusArgs {
    /// Service name, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
}

#[derive(Serialize, JsonSchema)]
struct ServiceStatus {
    service: String,
    status: Health,
    /// Instances currently serving traffic.
    instances: u32,
    /// The release currently deployed.
    version: String,
    /// When the last health check ran (UTC).
    updated_at: String,
}

/// Current health of one service: `healthy`, `degraded` or `down`, with the number of serving
/// instances and the deployed release. Use when the user asks whether a service is up, how many
/// instances it runs or what version is live. It returns no history: for what went wrong use
/// `read_logs`, for the month's reliability use `compute_error_budget`.
#[tool(effect = read, title = "Service status", output_schema)]
async fn get_service_status(
    args: StatusArgs,
    ops: State<OpsBackend>,
) -> Result<ServiceStatus, ToolError> {
    let service = ops.service(&args.service)?;
    Ok(ServiceStatus {
        service: args.service,
        status: service.health,
        instances: service.instances,
        version: service.releases[0].to_owned(),
        updated_at: timestamp(40),
    })
}

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

impl Window {
    const fn seconds(self) -> u64 {
        match self {
            Window::FiveMinutes => 5 * 60,
            Window::OneHour => 60 * 60,
            Window::OneDay => 24 * 60 * 60,
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Window::FiveMinutes => "5 minutes",
            Window::OneHour => "hour",
            Window::OneDay => "24 hours",
        })
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Level {
    #[default]
    Error,
    Warn,
    All,
}

impl Level {
    fn includes(self, severity: Severity) -> bool {
        let least = match self {
            Level::Error => Severity::Error,
            Level::Warn => Severity::Warn,
            Level::All => Severity::Info,
        };
        severity >= least
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Error => "error",
            Level::Warn => "warning-or-worse",
            Level::All => "log",
        })
    }
}

fn default_limit() -> u32 {
    50
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ReadLogsArgs {
    /// Service name, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
    /// How far back to search.
    #[serde(default)]
    window: Window,
    /// Which lines: `error` only, `warn` (warnings and errors) or `all`.
    #[serde(default)]
    level: Level,
    /// The most lines to return, newest first.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 200))]
    limit: u32,
}

#[derive(Serialize, JsonSchema)]
struct LogLines {
    service: String,
    window: Window,
    level: Level,
    /// Matching lines, newest first: `<UTC time> <LEVEL> <service> <message>`.
    lines: Vec<String>,
    /// More lines matched than `limit`: narrow the window or the level to see the rest.
    truncated: bool,
}

/// Recent log lines of one service, filtered by time window and level, newest first. Use to
/// investigate a specific failure ("why is payment-api failing?"). Do not use it for counts,
/// rates or trends: it returns raw lines, not statistics. Returns the lines and whether more
/// matched than `limit`; when `truncated` is true, narrow the window or level before asking for
/// more.
#[tool(
    effect = read,
    title = "Read logs",
    label(start = "Reading {service} logs"),
    output_schema,
    to_model_output = log_summary,
)]
async fn read_logs(args: ReadLogsArgs, ops: State<OpsBackend>) -> Result<LogLines, ToolError> {
    let limit = args.limit as usize;
    let mut lines = ops.search_logs(&args.service, args.window, args.level, limit + 1)?;
    let truncated = lines.len() > limit;
    lines.truncate(limit);
    Ok(LogLines {
        service: args.service,
        window: args.window,
        level: args.level,
        lines,
        truncated,
    })
}

/// What the model reads of [`read_logs`]: a count and the three newest lines. The user's client
/// still renders every line.
fn log_summary(logs: &LogLines) -> String {
    let more = if logs.truncated {
        " (more matched: narrow the window or level)"
    } else {
        ""
    };
    let newest: Vec<&str> = logs.lines.iter().take(3).map(String::as_str).collect();
    format!(
        "{} {} lines from {} in the last {}{more}. Newest:\n{}",
        logs.lines.len(),
        logs.level,
        logs.service,
        logs.window,
        newest.join("\n")
    )
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RestartArgs {
    /// Service to restart, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
    /// Why the restart is needed; recorded in the change log.
    #[schemars(length(min = 10, max = 500))]
    reason: String,
}

#[derive(Serialize, JsonSchema)]
struct Restarted {
    service: String,
    restarted: bool,
    /// Instances that were rolled.
    instances: u32,
    /// The change-log entry of this restart.
    change: Change,
}

/// Restarts every instance of one service; each instance is unavailable for 10-30 s while it
/// rolls. Use only when the user asks for a restart, or agrees to one you proposed after reading
/// the logs. Never restart to "try something": check `get_service_status` and `read_logs` first.
/// Returns the number of instances rolled and the change-log entry.
#[tool(
    effect = write,
    approval(
        request = always,
        prompt = "Restart {service}? Every instance rolls and is unavailable for 10-30 s. Reason: {reason}",
    ),
    label(start = "Restarting {service}"),
    output_schema,
)]
async fn restart_service(
    args: RestartArgs,
    ctx: ToolContext,
    ops: State<OpsBackend>,
) -> Result<Restarted, ToolError> {
    let service = ops.service(&args.service)?;
    let change = ops.record_change(
        &format!("restart:{}:{}", args.service, ctx.idempotency_key()),
        format!("restart {}: {}", args.service, args.reason),
        ctx.current(),
    );
    Ok(Restarted {
        service: args.service,
        restarted: true,
        instances: service.instances,
        change,
    })
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct BudgetArgs {
    /// Service name, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
    /// Availability objective as a fraction of successful requests, e.g. 0.999.
    #[schemars(range(min = 0.5, max = 0.99999))]
    slo: f64,
}

#[derive(Serialize, JsonSchema)]
struct ErrorBudget {
    service: String,
    slo: f64,
    /// Requests and failed requests over the last 30 days.
    requests: u64,
    errors: u64,
    /// Share of the 30-day error budget still unspent, in percent; negative when overspent.
    budget_remaining_percent: f64,
}

/// How much of one service's error budget is left over the last 30 days, for a given SLO. Use
/// when the user asks whether a service can afford more risk (a deploy, an experiment) or how
/// it is doing against its SLO. Not for live health: use `get_service_status`. Returns request
/// and error counts and the remaining budget in percent (negative when overspent).
#[tool(effect = read, title = "Error budget", output_schema)]
async fn compute_error_budget(
    args: BudgetArgs,
    ops: State<OpsBackend>,
) -> Result<ErrorBudget, ToolError> {
    let service = ops.service(&args.service)?;
    let allowed = (1.0 - args.slo) * service.requests_30d as f64;
    let spent = service.errors_30d as f64 / allowed;
    Ok(ErrorBudget {
        service: args.service,
        slo: args.slo,
        requests: service.requests_30d,
        errors: service.errors_30d,
        budget_remaining_percent: ((1.0 - spent) * 1000.0).round() / 10.0,
    })
}
